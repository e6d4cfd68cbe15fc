// Fuzz target: the host references (reference::groupQuant, siluClampQuant,
// rmsNormQuant, allreduceSum, allreduceRmsNormQuant) and materializeHost of
// their results.
//
// Each input picks an operation, an input type (fp32, bf16, fp16), a format
// (e4m3fn, e4m3fnuz), a scale rule (fp32, UE8M0), a small shape, strides,
// options, input bits (NaN and infinities included) and, sometimes, a bad
// argument: an unsupported group size, fmax or eps, a negative or huge
// extent, a row stride below its minimum or misaligned, an fp8 output or a
// scale view of the wrong extents, a null, misaligned or near-the-top
// pointer. The target lists independently which arguments are bad; a call
// with a bad argument must be refused naming one of them and write nothing,
// a call without one must succeed. A call with a pointer that does not back
// its claimed span is made only when it must be refused.
//
// A successful call runs twice, into a row-major and into a padded
// column-major scale view over buffers filled with a marker; the two must
// agree bit for bit read through the logical (m, g), the column-major
// padding slots must be 0, the row-major gaps and the fp8 row gaps
// untouched, and materializeHost of the row-major scales must give the
// column-major buffer. The results are recomputed here from the numeric
// specification (docs/numerics.md): the values quantized (the input, the
// SiLU-clamp of gate and up, the RMSNorm of the row with its residual and
// normOut); amax ignoring NaN, floored at eps; s = amax / fmax or its
// power-of-two round-up; each code the format's nearest value to
// v * (1 / s), saturated, ties to even. Allreduce: the sum in rank order;
// the fused call must also equal rmsNormQuant of that sum.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fp8scale/layout_policy.hpp"
#include "fp8scale/reference/allreduce_fused.hpp"
#include "fp8scale/reference/fused_quant.hpp"
#include "fp8scale/reference/group_quant.hpp"
#include "fuzz_common.hpp"

namespace fp8scale {
namespace fuzz {
namespace {

constexpr std::uint8_t kMarker = 0xA5;  // fills every output buffer before a call

// A buffer of exactly `bytes` bytes (so AddressSanitizer sees one past its
// end), 64-byte aligned like a caching allocator's blocks.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) p_ = static_cast<unsigned char*>(::operator new(bytes_, std::align_val_t{64}));
    fill(kMarker);
  }
  ~Buffer() {
    if (p_ != nullptr) ::operator delete(p_, std::align_val_t{64});
  }
  Buffer(const Buffer& o) : Buffer(o.bytes_) {
    if (bytes_ > 0) std::memcpy(p_, o.p_, bytes_);
  }
  Buffer(Buffer&& o) noexcept : bytes_(o.bytes_), p_(o.p_) { o.bytes_ = 0, o.p_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(bytes_, o.bytes_);
    std::swap(p_, o.p_);
    return *this;
  }
  Buffer& operator=(const Buffer&) = delete;
  void fill(std::uint8_t b) {
    if (bytes_ > 0) std::memset(p_, b, bytes_);
  }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }
  bool operator==(const Buffer& o) const { return bytes_ == o.bytes_ && (bytes_ == 0 || !std::memcmp(p_, o.p_, bytes_)); }

 private:
  std::size_t bytes_ = 0;
  unsigned char* p_ = nullptr;
};

// The largest buffer a call gets: the shapes below stay far under it.
constexpr index_t kMaxBufferBytes = index_t{1} << 22;

// Bytes of a row buffer [rows, cols] with row stride ld, or -1 when it is
// not small enough to allocate (or the shape is not one).
index_t rowBufferBytes(index_t rows, index_t cols, index_t ld, index_t elementBytes) {
  if (rows < 0 || cols < 0 || ld < cols) return -1;
  if (rows == 0 || cols == 0) return 0;
  if (rows > kMaxBufferBytes || ld > kMaxBufferBytes) return -1;
  const __int128 bytes = (__int128(rows - 1) * ld + cols) * elementBytes;
  return bytes > kMaxBufferBytes ? -1 : static_cast<index_t>(bytes);
}

// Bytes of `elements` elements of `elementBytes` in 128-bit arithmetic, for
// the span checks (2^100: too many to matter).
__int128 spanBytes(index_t rows, index_t cols, index_t ld, index_t elementBytes) {
  if (rows <= 0 || cols <= 0) return 0;
  const __int128 e = __int128(rows - 1) * ld + cols;  // negative ld: refused as below its minimum
  return e < 0 ? 0 : (e > (__int128(1) << 64) ? __int128(1) << 100 : e * elementBytes);
}

// The arguments the target knows to be bad. `mayDeref` is false when some
// pointer does not back its claimed span: the call is then made only if
// some argument is bad (it must be refused before any access).
struct BadArgs {
  std::set<std::string> names;
  bool unbacked = false;
  void add(const char* name) { names.insert(name); }
  bool any() const { return !names.empty(); }
};

// A pointer argument: the real buffer or one of the other kinds; whether it
// must be refused (null, misaligned or past the end of the address space
// while the call touches memory) goes to `bad`.
template <class T>
T* pickPointer(FuzzedDataProvider& in, const Buffer* real, index_t spanBytes_, bool touches, int alignBytes,
               const char* name, BadArgs& bad) {
  PointerKind kind = real == nullptr ? PointerKind::kFake : pickPointerKind(in, 12);
  if (kind == PointerKind::kReal && real == nullptr) kind = PointerKind::kFake;
  T* p = pointerOf(kind, real == nullptr ? static_cast<T*>(nullptr) : real->as<T>());
  if (real != nullptr && real->bytes() == 0 && kind == PointerKind::kReal) p = nullptr;  // an empty buffer
  switch (kind) {
    case PointerKind::kReal: break;
    case PointerKind::kNull:
      if (touches) bad.add(name);
      break;
    case PointerKind::kMisaligned:
      if (touches && alignBytes > 1) bad.add(name);
      if (touches && alignBytes <= 1) bad.unbacked = true;
      break;
    case PointerKind::kNearTop:
      if (spanBytes_ > 4095) bad.add(name);
      else if (touches) bad.unbacked = true;
      break;
    case PointerKind::kFake:
      if (touches) bad.unbacked = true;
      break;
  }
  return p;
}

// ----- the numeric specification, written out independently -----

template <class Format>
float specDecode(std::uint8_t b) {
  constexpr bool kFn = std::is_same<Format, E4M3FN>::value;
  const int bias = kFn ? 7 : 8;
  if (kFn ? (b & 0x7F) == 0x7F : b == 0x80) return NAN;
  const int e = (b >> 3) & 0xF, m = b & 7;
  const float mag = e == 0 ? std::ldexp(m / 8.0f, 1 - bias) : std::ldexp(1.0f + m / 8.0f, e - bias);
  return (b & 0x80) ? -mag : mag;
}

template <class Format>
bool isNaNCode(std::uint8_t b) {
  return std::is_same<Format, E4M3FN>::value ? (b & 0x7F) == 0x7F : b == 0x80;
}

// Whether `code` is the format's nearest finite value to y, saturated, a
// tie between two values going to the even code (the last mantissa bit 0).
template <class Format>
bool isNearest(std::uint8_t code, float y) {
  if (std::isnan(y)) return isNaNCode<Format>(code);
  if (isNaNCode<Format>(code)) return false;
  const double t = std::fmax(-double(Format::kMax), std::fmin(double(Format::kMax), double(y)));
  const double value = specDecode<Format>(code);
  const double d = std::fabs(value - t);
  bool tie = false;
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<std::uint8_t>(c);
    if (isNaNCode<Format>(b)) continue;
    const double other = specDecode<Format>(b), e = std::fabs(other - t);
    if (e < d) return false;
    if (e == d && other != value) tie = true;
  }
  return !tie || (code & 1) == 0;
}

// SiLU-clamp of the specification (spec/silu_clamp_quant.hpp), on the host:
// the clamps by comparison, so that NaN stays NaN.
float specSiluClamp(float gate, float up, float limit) {
  if (limit > 0.0f) {
    if (gate > limit) gate = limit;
    if (up > limit) up = limit;
    if (up < -limit) up = -limit;
  }
  return gate / (1.0f + std::exp(-gate)) * up;
}

template <class Rule>
float specScale(const float* v, int n, float fmax, float eps) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (!std::isnan(v[i]) && std::fabs(v[i]) > amax) amax = std::fabs(v[i]);
  if (amax < eps) amax = eps;
  const float s = amax / fmax;
  if (!std::is_same<Rule, ScaleUE8M0>::value) return s;
  int e = 0;
  const float f = std::frexp(s, &e);  // s = f * 2^e, f in [0.5, 1)
  int p = f == 0.5f ? e - 1 : e;      // the smallest 2^p >= s
  if (std::isinf(s)) p = 127;
  p = p < -126 ? -126 : (p > 127 ? 127 : p);
  return std::ldexp(1.0f, p);
}

template <class Format, class Rule>
void checkGroup(const float* v, int n, const std::uint8_t* q, float s, float fmax, float eps) {
  const float want = specScale<Rule>(v, n, fmax, eps);
  FUZZ_CHECK(std::memcmp(&want, &s, 4) == 0,
             "scale " + std::to_string(s) + " differs from the specification's " + std::to_string(want));
  const float inv = 1.0f / s;
  for (int i = 0; i < n; ++i)
    FUZZ_CHECK(isNearest<Format>(q[i], v[i] * inv), "fp8 code " + std::to_string(q[i]) + " is not the nearest");
}

// ----- one call, into a row-major and a column-major scale view -----

struct Shape {
  index_t M = 0, K = 0, G = 0;  // G: scale columns (K / groupSize when valid)
  int groupSize = 128;
};

// The outputs of one call and the status.
struct Outcome {
  Status status;
  Buffer q, scale, residual, normOut, out;
  std::vector<float> logical;  // scale(m, g), row-major order
  Outcome(std::size_t qb, std::size_t sb, const Buffer& r, const Buffer& n, std::size_t ob)
      : q(qb), scale(sb), residual(r), normOut(n), out(ob) {}
};

template <class In>
struct Call {
  // Arguments
  Shape shape;
  index_t ldx = 0, ldq = 0, ldResidual = 0, ldNormOut = 0;
  index_t qRows = 0, qCols = 0;        // the fp8 output's claimed extents
  index_t scaleRows = 0, scaleCols = 0;  // the scale view's extents
  index_t rowPad = 0, colPad = 0;      // scale ld above its minimum, per layout
  float fmax = 0.0f, eps = kDefaultAmaxEps, limit = 0.0f, normEps = 1e-6f;
  int ranks = 1;
  bool withResidual = false, withNormOut = false;
  const In* x = nullptr;
  const In* weight = nullptr;
  std::vector<const In*> partials;
  bool qTouches = false;
  PointerKind qKind = PointerKind::kReal, residualKind = PointerKind::kReal, normOutKind = PointerKind::kReal,
              outKind = PointerKind::kReal;
  index_t qBytes = 0, residualBytes = 0, normOutBytes = 0, outBytes = 0;
};

template <class T>
T* kindPointer(PointerKind k, const Buffer& b) {
  T* p = pointerOf(k, b.as<T>());
  return k == PointerKind::kReal && b.bytes() == 0 ? nullptr : p;
}

enum class Op { kGroupQuant, kSiluClampQuant, kRmsNormQuant, kAllreduceSum, kAllreduceRmsNormQuant };

const char* functionOf(Op op) {
  switch (op) {
    case Op::kGroupQuant: return "reference::groupQuant";
    case Op::kSiluClampQuant: return "reference::siluClampQuant";
    case Op::kRmsNormQuant: return "reference::rmsNormQuant";
    case Op::kAllreduceSum: return "reference::allreduceSum";
    case Op::kAllreduceRmsNormQuant: return "reference::allreduceRmsNormQuant";
  }
  return "";
}

template <class Format, class Rule, class In, class Layout>
Status invoke(Op op, const Call<In>& c, Outcome& o, ScaleView<float, Layout> view) {
  const Fp8Matrix<Format> q{kindPointer<std::uint8_t>(c.qKind, o.q), c.qRows, c.qCols, c.ldq};
  RmsNormQuantInput<In> rms = RmsNormQuantInput<In>::matrix(c.x, c.shape.M, c.shape.K, c.ldx, c.weight);
  rms.normEps = c.normEps;
  if (c.withResidual) rms = rms.withResidual(kindPointer<In>(c.residualKind, o.residual), c.ldResidual);
  if (c.withNormOut) rms = rms.withNormOut(kindPointer<In>(c.normOutKind, o.normOut), c.ldNormOut);
  switch (op) {
    case Op::kGroupQuant:
      return reference::groupQuant<Format, Rule>(c.x, c.shape.M, c.shape.K, c.ldx, c.shape.groupSize, q, view,
                                                 c.fmax, c.eps);
    case Op::kSiluClampQuant: {
      SiluClampInput<In> s;
      s.x = c.x;
      s.rows = c.shape.M;
      s.intermediate = c.shape.K;
      s.ldx = c.ldx;
      s.limit = c.limit;
      return reference::siluClampQuant<Format, Rule>(s, q, view, c.shape.groupSize, c.fmax, c.eps);
    }
    case Op::kRmsNormQuant:
      return reference::rmsNormQuant<Format, Rule>(rms, q, view, c.shape.groupSize, c.fmax, c.eps);
    case Op::kAllreduceSum:
      return reference::allreduceSum<In>(c.partials, c.shape.M, c.shape.K, c.ldx,
                                         kindPointer<In>(c.outKind, o.out), c.shape.K);
    case Op::kAllreduceRmsNormQuant:
      return reference::allreduceRmsNormQuant<Format, Rule>(c.partials, rms, q, view, c.shape.groupSize, c.fmax,
                                                            c.eps);
  }
  return Status::ok();
}

template <class Format, class Rule, class In, class Layout>
Outcome runOnce(Op op, const Call<In>& c, const Buffer& residual, const Buffer& normOut) {
  constexpr bool kCol = Layout::kColumnMajor;
  const index_t ld = kCol ? c.scaleRows + c.colPad : c.scaleCols + c.rowPad;
  const index_t span = kCol ? c.scaleCols * ld : (c.scaleRows == 0 || c.scaleCols == 0 ? 0 : (c.scaleRows - 1) * ld + c.scaleCols);
  Outcome o(static_cast<std::size_t>(c.qBytes), static_cast<std::size_t>(span) * 4, residual, normOut,
            static_cast<std::size_t>(c.outBytes));
  const auto view = ScaleView<float, Layout>::make(o.scale.bytes() ? o.scale.as<float>() : nullptr, c.scaleRows,
                                                   c.scaleCols, Layout{ld});
  FUZZ_CHECK(view, "the scale view over its own buffer was refused: " + describe(view.status()));
  o.status = invoke<Format, Rule>(op, c, o, view.value());
  if (o.status)
    for (index_t m = 0; m < c.scaleRows; ++m)
      for (index_t g = 0; g < c.scaleCols; ++g) o.logical.push_back(view.value()(m, g));
  return o;
}

template <class In>
In inputValue(FuzzedDataProvider& in, int style) {
  if constexpr (std::is_same<In, float>::value) {
    if (style == 0) return bitCast<float>(in.ConsumeIntegral<std::uint32_t>());  // any bits: NaN, inf, subnormals
    return static_cast<float>(in.ConsumeIntegralInRange<int>(-2000, 2000)) / 64.0f;
  } else {
    if (style == 0) return In{in.ConsumeIntegral<std::uint16_t>()};
    return fromFloat<In>(static_cast<float>(in.ConsumeIntegralInRange<int>(-2000, 2000)) / 64.0f);
  }
}

// A buffer of `bytes` bytes of In values from the input (0 once it runs out).
template <class In>
Buffer inputBuffer(FuzzedDataProvider& in, index_t bytes) {
  Buffer b(static_cast<std::size_t>(bytes < 0 ? 0 : bytes));
  b.fill(0);
  const int style = in.ConsumeIntegralInRange<int>(0, 3);
  const std::size_t n = b.bytes() / sizeof(In);
  for (std::size_t i = 0; i < n && in.remaining_bytes() > 0; ++i) b.as<In>()[i] = inputValue<In>(in, style);
  return b;
}

int pickGroupSize(FuzzedDataProvider& in, BadArgs& bad) {
  static constexpr int kGood[] = {32, 64, 128};
  static constexpr int kBad[] = {0, -128, 16, 96, 256, 127};
  if (in.ConsumeIntegralInRange<int>(0, 15) != 0) return kGood[in.ConsumeIntegralInRange<int>(0, 2)];
  bad.add("groupSize");
  return kBad[in.ConsumeIntegralInRange<int>(0, 5)];
}

// A row stride in elements of `elementBytes`: aligned to 16 bytes above
// `minimum`, or below it, or misaligned (an odd count).
index_t pickLd(FuzzedDataProvider& in, index_t minimum, int elementBytes, bool touches, const char* name,
               BadArgs& bad) {
  const index_t step = 16 / elementBytes;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      if (minimum > 0) {
        bad.add(name);
        return minimum - step;
      }
      return minimum;
    case 1:
      if (touches) bad.add(name);
      return minimum + 1;
    default: return minimum + step * in.ConsumeIntegralInRange<int>(0, 2);
  }
}

template <class Format, class Rule, class In>
void fuzzOp(FuzzedDataProvider& in, Op op) {
  const char* fn = functionOf(op);
  constexpr int kInBytes = sizeof(In);
  const bool quantizes = op != Op::kAllreduceSum;
  const bool rmsLike = op == Op::kRmsNormQuant || op == Op::kAllreduceRmsNormQuant;
  const bool allreduce = op == Op::kAllreduceSum || op == Op::kAllreduceRmsNormQuant;
  BadArgs bad;
  Call<In> c;

  // Shape: small, or (rarely) wild, which no buffer backs.
  c.shape.groupSize = quantizes ? pickGroupSize(in, bad) : 32;
  const bool goodGroup = c.shape.groupSize == 32 || c.shape.groupSize == 64 || c.shape.groupSize == 128;
  const bool wild = in.ConsumeIntegralInRange<int>(0, 11) == 0;
  c.shape.M = wild ? pickExtent(in) : in.ConsumeIntegralInRange<index_t>(0, 5);
  c.shape.G = in.ConsumeIntegralInRange<index_t>(0, 3);
  c.shape.K = wild ? pickExtent(in) : c.shape.G * (goodGroup ? c.shape.groupSize : 128);
  if (!wild && in.ConsumeIntegralInRange<int>(0, 15) == 0) c.shape.K += 16;  // not a multiple of the group
  const index_t M = c.shape.M, K = c.shape.K;
  const char* colsName = op == Op::kSiluClampQuant ? "I" : "K";
  if (M < 0) bad.add("M");
  if (K < 0) bad.add(op == Op::kSiluClampQuant ? "intermediate" : "K");
  if (quantizes && K >= 0 && goodGroup && K % c.shape.groupSize != 0) bad.add(colsName);
  if (rmsLike && K > detail::kRmsNormMaxCols<In>) bad.add("K");
  if (op == Op::kGroupQuant && K > detail::kMaxSpanBytes) bad.add("K");  // H * D as a span
  c.shape.G = goodGroup && K >= 0 ? K / c.shape.groupSize : c.shape.G;
  const index_t inputCols = op == Op::kSiluClampQuant ? (K > (index_t{1} << 61) ? INT64_MAX : (K < 0 ? K : 2 * K)) : K;
  if (op == Op::kSiluClampQuant && K > (index_t{1} << 47)) bad.add("intermediate");
  const bool touches = M > 0 && K > 0;

  // Options.
  switch (in.ConsumeIntegralInRange<int>(0, 23)) {
    case 0: c.fmax = Format::kMax * 1.125f; bad.add("fmax"); break;
    case 1: c.fmax = -1.0f; bad.add("fmax"); break;
    case 2: c.fmax = NAN; bad.add("fmax"); break;
    case 3: c.eps = 0.0f; bad.add("eps"); break;
    case 4: c.eps = -1.0f; bad.add("eps"); break;
    case 5: c.eps = NAN; bad.add("eps"); break;
    case 6: c.fmax = 224.0f; break;
    case 7: c.eps = 1e-3f; break;
    case 8: c.eps = in.ConsumeBool() ? 1e-45f : Format::kMax * 0x1p-126f; break;  // below and at the floor
    default: c.fmax = in.ConsumeBool() ? 0.0f : Format::kMax; break;
  }
  const float fmax = c.fmax == 0.0f ? Format::kMax : c.fmax;
  if (c.eps > 0.0f && fmax > 0.0f && fmax <= Format::kMax && !(c.eps / fmax >= 0x1p-126f)) bad.add("eps");
  if (!quantizes) bad.names.erase("fmax"), bad.names.erase("eps");
  if (op == Op::kSiluClampQuant) {
    const int l = in.ConsumeIntegralInRange<int>(0, 9);
    c.limit = l == 0 ? NAN : (l < 4 ? 0.0f : static_cast<float>(l));
    if (l == 0) bad.add("limit");
  }
  if (rmsLike) {
    const int e = in.ConsumeIntegralInRange<int>(0, 9);
    c.normEps = e == 0 ? -1.0f : (e == 1 ? NAN : (e == 2 ? 0.0f : 1e-6f));
    if (e <= 1) bad.add("normEps");
  }

  // Input and its row stride.
  c.ldx = wild ? pickStride(in, inputCols < 0 ? 0 : inputCols) : pickLd(in, inputCols, kInBytes, touches && op != Op::kAllreduceSum, "ldx", bad);
  if (wild && inputCols >= 0 && c.ldx < inputCols) bad.add("ldx");
  if (wild && touches && op != Op::kAllreduceSum && c.ldx >= inputCols && (__int128(c.ldx) * kInBytes) % 16 != 0)
    bad.add("ldx");
  if (wild && spanBytes(M, inputCols, c.ldx, kInBytes) > (__int128(1) << 48))
    bad.add(allreduce ? "partials" : "x");
  const index_t xBytes = rowBufferBytes(M, inputCols, c.ldx, kInBytes);
  if (xBytes < 0 && touches) bad.unbacked = true;
  std::vector<Buffer> inputs;
  c.ranks = allreduce ? in.ConsumeIntegralInRange<int>(0, 3) : 1;
  if (allreduce && c.ranks == 0) bad.add("partials");
  for (int r = 0; r < (allreduce ? c.ranks : 1); ++r) inputs.push_back(inputBuffer<In>(in, xBytes));
  if (allreduce) {
    for (int r = 0; r < c.ranks; ++r) {
      const bool null = in.ConsumeIntegralInRange<int>(0, 15) == 0 || inputs[r].bytes() == 0;
      if (null && touches) bad.add("partials");
      c.partials.push_back(null ? nullptr : inputs[r].as<In>());
    }
  } else {
    c.x = pickPointer<In>(in, xBytes < 0 ? nullptr : &inputs[0], xBytes, touches, 16, "x", bad);
  }

  // The fp8 output.
  if (quantizes) {
    c.qRows = M;
    c.qCols = K;
    if (!wild && in.ConsumeIntegralInRange<int>(0, 15) == 0) {
      (in.ConsumeBool() ? c.qRows : c.qCols) += in.ConsumeBool() ? 1 : -1;
      bad.add("q");
    }
    c.ldq = wild ? pickStride(in, K < 0 ? 0 : K) : pickLd(in, K, 1, touches, "ldq", bad);
    if (c.ldq < K) bad.add("ldq");
    const index_t qVector = rmsLike ? 16 / kInBytes : 32 / kInBytes;  // the fp8 store width
    if (wild && touches && c.ldq >= K && c.ldq % qVector != 0) bad.add("ldq");
    if (spanBytes(M, K, c.ldq, 1) > (__int128(1) << 48)) bad.add("q");
    c.qBytes = rowBufferBytes(M, K, c.ldq, 1);
    if (c.qBytes < 0) {
      c.qBytes = 0;
      c.qKind = PointerKind::kFake;
      if (touches) bad.unbacked = true;
    } else {
      c.qKind = pickPointerKind(in, 12);
      if (c.qKind == PointerKind::kNull && touches) bad.add("q");
      if (c.qKind == PointerKind::kMisaligned && touches) bad.add("q");
      if (c.qKind == PointerKind::kNearTop && c.qBytes > 4095) bad.add("q");
      if ((c.qKind == PointerKind::kNearTop && c.qBytes <= 4095) || c.qKind == PointerKind::kFake)
        if (touches) bad.unbacked = true;
    }
  }

  // The scale view: (M, G), sometimes off by one, over its own buffer.
  c.scaleRows = M < 0 ? 0 : M;
  c.scaleCols = c.shape.G < 0 ? 0 : c.shape.G;
  if (quantizes && in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    index_t& e = in.ConsumeBool() ? c.scaleRows : c.scaleCols;
    e = e == 0 || e == INT64_MAX ? 1 : e + (in.ConsumeBool() ? 1 : -1);
    bad.add("scale");
  }
  if (wild && !bad.any() && (c.scaleRows > 64 || c.scaleCols > 64)) return;  // valid, but too large to back
  if (c.scaleRows > 64 || c.scaleCols > 64) c.scaleRows = c.scaleCols = 1, bad.add("scale");
  if (quantizes && (c.scaleRows != M || c.scaleCols != (goodGroup && K >= 0 ? K / c.shape.groupSize : -1)))
    bad.add("scale");
  c.rowPad = in.ConsumeIntegralInRange<index_t>(0, 2);
  c.colPad = in.ConsumeIntegralInRange<index_t>(0, 5);

  // RMSNorm's weight, residual and normOut.
  Buffer weight(static_cast<std::size_t>(rmsLike && K > 0 && K <= kMaxBufferBytes ? K * kInBytes : 0));
  Buffer residual(0), normOut(0);
  if (rmsLike) {
    const Buffer w = inputBuffer<In>(in, static_cast<index_t>(weight.bytes()));
    if (weight.bytes()) std::memcpy(weight.as<unsigned char>(), w.as<unsigned char>(), weight.bytes());
    c.weight = pickPointer<const In>(in, weight.bytes() || K == 0 ? &weight : nullptr,
                                     static_cast<index_t>(weight.bytes()), touches, 16, "weight", bad);
    if (K > 0 && weight.bytes() == 0 && touches) bad.unbacked = true;
    c.withResidual = in.ConsumeBool();
    c.withNormOut = in.ConsumeBool();
    const auto optional = [&](bool on, index_t& ld, const char* name, const char* ldName, PointerKind& kind,
                              index_t& bytes) {
      if (!on) return Buffer(0);
      ld = wild ? pickStride(in, K < 0 ? 0 : K) : pickLd(in, K, kInBytes, true, ldName, bad);
      if (wild && K >= 0 && ld < K) bad.add(ldName);
      if (wild && ld >= 0 && (__int128(ld) * kInBytes) % 16 != 0) bad.add(ldName);
      if (spanBytes(M, K, ld, kInBytes) > (__int128(1) << 48)) bad.add(name);
      bytes = rowBufferBytes(M, K, ld, kInBytes);
      kind = pickPointerKind(in, 12);
      if (bytes < 0) bytes = 0, kind = PointerKind::kFake;
      if (kind == PointerKind::kNull) {  // null: the optional buffer is absent, and ld is not looked at
        bad.names.erase(ldName);
        bad.names.erase(name);
      }
      if (kind == PointerKind::kMisaligned) bad.add(name);
      if (kind == PointerKind::kNearTop && bytes > 4095) bad.add(name);
      if ((kind == PointerKind::kNearTop && bytes <= 4095) || kind == PointerKind::kFake)
        if (touches) bad.unbacked = true;
      if (!touches) {  // M == 0 or K == 0: checked only when there is work
        bad.names.erase(name);
        bad.names.erase(ldName);
      }
      return inputBuffer<In>(in, bytes);
    };
    residual = optional(c.withResidual, c.ldResidual, "residual", "ldResidual", c.residualKind, c.residualBytes);
    normOut = optional(c.withNormOut, c.ldNormOut, "normOut", "ldNormOut", c.normOutKind, c.normOutBytes);
  }
  if (op == Op::kAllreduceSum) {
    c.outBytes = rowBufferBytes(M, K, K, kInBytes);
    c.outKind = c.outBytes < 0 ? PointerKind::kFake : pickPointerKind(in, 12);
    if (c.outBytes < 0) c.outBytes = 0;
    if (touches && (c.outKind == PointerKind::kNull)) bad.add("out");
    if (touches && (c.outKind == PointerKind::kFake || c.outKind == PointerKind::kMisaligned ||
                    (c.outKind == PointerKind::kNearTop && c.outBytes <= 4095)))
      bad.unbacked = true;
    if (c.outKind == PointerKind::kNearTop && c.outBytes > 4095) bad.add("out");
    if (spanBytes(M, K, K, kInBytes) > (__int128(1) << 48)) bad.add("out");
  }
  if (bad.unbacked && !bad.any()) return;  // it would touch memory that is not there

  const Outcome row = runOnce<Format, Rule, In, RowMajor>(op, c, residual, normOut);
  if (bad.any()) {
    FUZZ_CHECK(!row.status, std::string("accepted a call with a bad argument: ") + *bad.names.begin());
    checkRefusal(row.status, fn);
    FUZZ_CHECK(bad.names.count(row.status.argument()) == 1,
               std::string("refusal names an argument that is not bad: ") + row.status.message());
    const Buffer untouchedQ(row.q.bytes()), untouchedS(row.scale.bytes()), untouchedO(row.out.bytes());
    FUZZ_CHECK(row.q == untouchedQ && row.scale == untouchedS && row.out == untouchedO, "a refused call wrote");
    FUZZ_CHECK(row.residual == residual && row.normOut == normOut, "a refused call wrote");
    return;
  }
  FUZZ_CHECK(row.status, std::string("refused a valid call: ") + row.status.message());
  if (c.qKind != PointerKind::kReal || c.residualKind != PointerKind::kReal ||
      c.normOutKind != PointerKind::kReal || c.outKind != PointerKind::kReal)
    return;  // nothing to compare (M == 0 or K == 0 with a pointer that is not real)

  const Outcome col = runOnce<Format, Rule, In, ColMajor>(op, c, residual, normOut);
  FUZZ_CHECK(col.status, "the column-major call failed: " + describe(col.status));
  FUZZ_CHECK(row.q == col.q, "fp8 output differs between the scale layouts");
  FUZZ_CHECK(row.residual == col.residual && row.normOut == col.normOut && row.out == col.out,
             "outputs differ between the scale layouts");
  FUZZ_CHECK(row.logical.size() == col.logical.size() &&
                 (row.logical.empty() ||
                  std::memcmp(row.logical.data(), col.logical.data(), row.logical.size() * 4) == 0),
             "scales differ between the scale layouts");
  // Row-major gaps and fp8 row gaps untouched; column-major padding 0.
  const index_t G = c.scaleCols;
  const index_t rowLd = G + c.rowPad, colLd = M + c.colPad;
  for (index_t m = 0; quantizes && m + 1 < M && G > 0; ++m)  // a row-major span ends at the last row's last scale
    for (index_t g = G; g < rowLd; ++g)
      FUZZ_CHECK(row.scale.as<std::uint32_t>()[m * rowLd + g] == 0xA5A5A5A5u, "a row-major gap was written");
  for (index_t g = 0; quantizes && g < G; ++g)
    for (index_t m = M; m < colLd; ++m)
      FUZZ_CHECK(col.scale.as<float>()[g * colLd + m] == 0.0f, "a column-major padding slot is not 0");
  for (index_t m = 0; m + 1 < M && K > 0; ++m)
    for (index_t k = K; k < c.ldq; ++k)
      FUZZ_CHECK(row.q.as<std::uint8_t>()[m * c.ldq + k] == kMarker, "an fp8 row gap was written");
  // materializeHost of the row-major scales gives the column-major bytes.
  if (quantizes && M > 0 && G > 0) {
    Buffer dst(col.scale.bytes());
    const auto src = ScaleView<float, RowMajor>::make(row.scale.as<float>(), M, G, RowMajor{rowLd});
    const auto r = materializeHost(src.value(), dst.as<float>(), colLd);
    FUZZ_CHECK(r, "materializeHost: " + describe(r.status()));
    FUZZ_CHECK(r.value().data() == row.scale.as<float>() || dst == col.scale,
               "materializeHost differs from the column-major emit");
  }

  // The specification, recomputed.
  const int gs = c.shape.groupSize;
  std::vector<float> v(static_cast<std::size_t>(gs));
  if (op == Op::kGroupQuant || op == Op::kSiluClampQuant) {
    for (index_t m = 0; m < M; ++m)
      for (index_t g = 0; g < G; ++g) {
        for (int i = 0; i < gs; ++i) {
          const In* r = c.x + m * c.ldx + g * gs + i;
          v[i] = op == Op::kGroupQuant ? toFloat(*r) : specSiluClamp(toFloat(r[0]), toFloat(r[K]), c.limit);
        }
        checkGroup<Format, Rule>(v.data(), gs, row.q.as<std::uint8_t>() + m * c.ldq + g * gs,
                                 row.logical[static_cast<std::size_t>(m * G + g)], fmax, c.eps);
      }
  }
  if (op == Op::kAllreduceSum) {
    for (index_t m = 0; m < M; ++m)
      for (index_t k = 0; k < K; ++k) {
        float acc = toFloat(c.partials[0][m * c.ldx + k]);
        for (int p = 1; p < c.ranks; ++p) acc += toFloat(c.partials[p][m * c.ldx + k]);
        const In want = fromFloat<In>(acc);
        FUZZ_CHECK(std::memcmp(&want, row.out.as<In>() + m * K + k, sizeof(In)) == 0, "allreduce sum differs");
      }
  }
  if (rmsLike) {
    // RMSNorm (spec/rmsnorm_quant.hpp, docs/numerics.md): v = x (+ residual,
    // written back rounded), inv = 1 / sqrt(mean(v^2) + normEps) with the
    // sum of squares in double, h = v * inv * weight in fp32 (normOut: h
    // rounded), then the group step on h. The fused call's x is the
    // rank-ordered fp32 sum of the partials, rounded to In.
    std::vector<float> h(static_cast<std::size_t>(K));
    for (index_t m = 0; m < M; ++m) {
      double sumSq = 0.0;
      for (index_t k = 0; k < K; ++k) {
        float x = 0.0f;
        if (op == Op::kRmsNormQuant) {
          x = toFloat(c.x[m * c.ldx + k]);
        } else {
          float acc = toFloat(c.partials[0][m * c.ldx + k]);
          for (int p = 1; p < c.ranks; ++p) acc += toFloat(c.partials[p][m * c.ldx + k]);
          x = toFloat(fromFloat<In>(acc));
        }
        if (c.withResidual) {
          x += toFloat(residual.as<In>()[m * c.ldResidual + k]);
          const In want = fromFloat<In>(x);
          FUZZ_CHECK(std::memcmp(&want, row.residual.as<In>() + m * c.ldResidual + k, sizeof(In)) == 0,
                     "residual not updated to round(x + residual)");
        }
        h[static_cast<std::size_t>(k)] = x;
        sumSq += static_cast<double>(x) * x;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(sumSq / static_cast<double>(K) + c.normEps));
      for (index_t k = 0; k < K; ++k) {
        float& y = h[static_cast<std::size_t>(k)];
        y = y * inv * toFloat(c.weight[k]);
        if (c.withNormOut) {
          const In want = fromFloat<In>(y);
          FUZZ_CHECK(std::memcmp(&want, row.normOut.as<In>() + m * c.ldNormOut + k, sizeof(In)) == 0,
                     "normOut is not round(h)");
        }
      }
      for (index_t g = 0; g < G; ++g)
        checkGroup<Format, Rule>(h.data() + g * gs, gs, row.q.as<std::uint8_t>() + m * c.ldq + g * gs,
                                 row.logical[static_cast<std::size_t>(m * G + g)], fmax, c.eps);
    }
  }
  if (op == Op::kAllreduceRmsNormQuant) {
    // == allreduceSum, then rmsNormQuant on the sum.
    Buffer sum(static_cast<std::size_t>(M * K) * kInBytes);
    FUZZ_CHECK(reference::allreduceSum<In>(c.partials, M, K, c.ldx, sum.bytes() ? sum.as<In>() : nullptr, K),
               "allreduceSum");
    Call<In> local = c;
    local.x = sum.bytes() ? sum.as<In>() : nullptr;
    local.ldx = K;
    const Outcome one = runOnce<Format, Rule, In, RowMajor>(Op::kRmsNormQuant, local, residual, normOut);
    FUZZ_CHECK(one.status, "rmsNormQuant on the sum: " + describe(one.status));
    FUZZ_CHECK(one.q == row.q && one.scale == row.scale && one.residual == row.residual &&
                   one.normOut == row.normOut,
               "the fused allreduce differs from rmsNormQuant of the sum");
  }
}

template <class Format, class Rule>
void fuzzFormat(FuzzedDataProvider& in) {
  const Op op = static_cast<Op>(in.ConsumeIntegralInRange<int>(0, 4));
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: fuzzOp<Format, Rule, float>(in, op); break;
    case 1: fuzzOp<Format, Rule, BFloat16>(in, op); break;
    default: fuzzOp<Format, Rule, Float16>(in, op); break;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace fp8scale

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fp8scale;
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: fuzz::fuzzFormat<E4M3FN, ScaleFp32>(in); break;
    case 1: fuzz::fuzzFormat<E4M3FN, ScaleUE8M0>(in); break;
    case 2: fuzz::fuzzFormat<E4M3FNUZ, ScaleFp32>(in); break;
    default: fuzz::fuzzFormat<E4M3FNUZ, ScaleUE8M0>(in); break;
  }
  return 0;
}
