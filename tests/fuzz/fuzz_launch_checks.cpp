// Fuzz target: the launchers' host-side argument checks and launch plans,
// which need no GPU. The launchers run these checks first and launch
// nothing when they refuse: detail::checkGroupQuant (matrix and head-major
// input), checkSiluClampQuant, checkRmsNormQuant and checkWeightBlockQuant
// as groupQuant(), siluClampQuant(), rmsNormQuant() and weightBlockQuant()
// call them, then the plans the group-tile producers and RMSNorm quant
// launch (planGroupTile with device facts from the input,
// rmsNormQuantLaunch).
//
// No memory is touched, so extents, strides and pointers are wild: any
// 64-bit value, null, misaligned by 1 to 8 bytes, near the top of the
// address space. The target states the rules once more in 128-bit
// arithmetic (docs/bad_input.md) and requires the checks to accept a call
// exactly when it follows them: an accepted call addresses only its spans,
// each at most 2^48 bytes and inside the address space, with the pointers
// and strides aligned as the kernels load and store. A refusal names the
// launcher and an argument. An accepted call's plan must cover every
// (row, group) with whole tiles inside the grid limits, launch nothing
// exactly when there is no work, and give the padding tile to padded
// column-major views.
//
// The launchers themselves, built by nvcc, are called without a GPU by
// tests/device/test_no_device.cu: they refuse as these checks do, or fail
// with a device error.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>

#include "fp8scale/producers/group_quant.hpp"
#include "fp8scale/producers/rmsnorm_quant.hpp"
#include "fp8scale/producers/silu_clamp_quant.hpp"
#include "fp8scale/spec/weight_block_quant.hpp"
#include "fuzz_common.hpp"

namespace fp8scale {
namespace fuzz {
namespace {

using i128 = __int128;
constexpr i128 kMaxBytes = i128(1) << 48;

// A pointer no call dereferences: null, an aligned fake address, the same
// misaligned by 1 to 8 bytes, or near the top of the address space.
template <class T>
T* fakePointer(FuzzedDataProvider& in) {
  const std::uintptr_t base = std::uintptr_t{1} << 32;
  switch (in.ConsumeIntegralInRange<int>(0, 11)) {
    case 0: return nullptr;
    case 1: return reinterpret_cast<T*>(base + (std::uintptr_t{1} << in.ConsumeIntegralInRange<int>(0, 3)));
    case 2: return reinterpret_cast<T*>(UINTPTR_MAX - 4095);
    case 3: return reinterpret_cast<T*>(UINTPTR_MAX - (std::uintptr_t{1} << in.ConsumeIntegralInRange<int>(12, 50)) + 1);
    default: return reinterpret_cast<T*>(base);
  }
}

bool aligned(const void* p, int bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// Elements [rows, cols] with row stride ld span, in 128-bit arithmetic.
i128 span(i128 rows, i128 cols, i128 ld) { return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols; }

// A buffer of `elements` elements of `bytes` bytes fits the span rules.
bool fits(const void* p, i128 elements, int bytes) {
  if (elements < 0 || elements > (i128(1) << 64)) return false;  // a negative stride, or far past 2^48
  const i128 b = elements * bytes;
  return b <= kMaxBytes && (p == nullptr || b <= i128(UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(p)));
}

// a * b saturated to int64 (strides derived from wild extents).
index_t satMul(index_t a, index_t b) {
  const i128 r = i128(a) * b;
  return r > INT64_MAX ? INT64_MAX : (r < INT64_MIN ? INT64_MIN : static_cast<index_t>(r));
}

index_t pickWild(FuzzedDataProvider& in, index_t typical) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return pickExtent(in, 4);
    case 1: return typical * in.ConsumeIntegralInRange<index_t>(1, 70000);
    default: return typical;
  }
}

// The rules a call breaks, by the argument each names: a call must be
// accepted exactly when it breaks none, and a refusal must name one of
// them (the checks report the first they find).
struct Rules {
  std::set<std::string> broken;
  void need(bool holds, const char* argument) {
    if (!holds) broken.insert(argument);
  }
  bool ok() const { return broken.empty(); }
  std::string list() const {
    std::string l;
    for (const auto& b : broken) l += (l.empty() ? "" : ", ") + b;
    return l;
  }
};

// Checks the status of a call against its rules.
void expectRules(const Status& s, const Rules& rules, const char* fn) {
  if (!s) {
    checkRefusal(s, fn);
    FUZZ_CHECK(!rules.ok(), "refused a call that follows the rules: " + s.message());
    FUZZ_CHECK(rules.broken.count(s.argument()) == 1,
               "the refusal names '" + std::string(s.argument()) + "', the call breaks rules of " + rules.list());
    return;
  }
  FUZZ_CHECK(rules.ok(), "accepted a call that breaks rules of " + rules.list());
}

template <class Format>
QuantOptions pickOptions(FuzzedDataProvider& in) {
  QuantOptions o;
  static constexpr int kSizes[] = {32, 64, 128, 128, 128, 16, 96, 256, 0, -128};
  o.groupSize = kSizes[in.ConsumeIntegralInRange<int>(0, 9)];
  const int f = in.ConsumeIntegralInRange<int>(0, 11);
  o.fmax = f == 0 ? -1.0f : f == 1 ? NAN : f == 2 ? std::nextafter(Format::kMax, 1e9f) : f == 3 ? 224.0f
         : f == 4 ? 1e-38f : 0.0f;
  const int e = in.ConsumeIntegralInRange<int>(0, 11);
  o.eps = e == 0 ? 0.0f : e == 1 ? NAN : e == 2 ? 1e-45f : e == 3 ? -1e-10f : e == 4 ? INFINITY
        : e == 5 ? 1e38f : kDefaultAmaxEps;
  const int r = in.ConsumeIntegralInRange<int>(0, 15);
  o.rule = r == 0 ? static_cast<ScaleRule>(in.ConsumeIntegralInRange<int>(2, 255))
                  : (r % 2 ? ScaleRule::kUE8M0 : ScaleRule::kFp32);
  const int p = in.ConsumeIntegralInRange<int>(0, 15);
  o.scaleStore = p == 0 ? static_cast<ScaleStorePolicy>(in.ConsumeIntegralInRange<int>(2, 255))
                        : (p % 2 ? ScaleStorePolicy::kEvictLast : ScaleStorePolicy::kEvictNormal);
  o.programmaticLaunch = in.ConsumeBool();
  return o;
}

// The scale options' rules (fmax, eps, rule) in fp32, as docs/numerics.md
// states them.
template <class Format>
void scaleOptionRules(Rules& r, float fmaxOption, float eps, ScaleRule rule) {
  const float fmax = fmaxOption == 0.0f ? Format::kMax : fmaxOption;
  const bool fmaxOk = fmax > 0.0f && fmax <= Format::kMax;
  r.need(fmaxOk, "fmax");
  if (fmaxOk) {
    const float smallest = eps / fmax;
    r.need(eps > 0.0f && smallest >= 0x1p-126f && smallest <= 3.40282347e+38f, "eps");
  }
  r.need(rule == ScaleRule::kFp32 || rule == ScaleRule::kUE8M0, "rule");
}

template <class Format>
void producerOptionRules(Rules& r, const QuantOptions& o) {
  scaleOptionRules<Format>(r, o.fmax, o.eps, o.rule);
  r.need(o.scaleStore == ScaleStorePolicy::kEvictNormal || o.scaleStore == ScaleStorePolicy::kEvictLast,
         "scaleStore");
  r.need(o.groupSize == 32 || o.groupSize == 64 || o.groupSize == 128, "groupSize");
}

// The device facts of a plan: the SM count and the blocks resident at once.
struct Facts {
  int smCount = 132;
  int tileResident = 16;
  int loopResident = 8;
  int sms() const { return smCount; }
  int resident(bool loop) const { return loop ? loopResident : tileResident; }
};

// A scale view of (rows, cols) made by make() over a fake pointer (the
// views a launcher gets are made so); false when make() refuses it.
template <class Layout>
bool pickScale(FuzzedDataProvider& in, index_t rows, index_t cols, ScaleView<float, Layout>& out) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) rows = pickExtent(in);
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) cols = pickExtent(in);
  const index_t minLd = Layout::kColumnMajor ? rows : cols;
  const index_t ld = pickStride(in, minLd < 0 ? 0 : minLd);
  const auto v = ScaleView<float, Layout>::make(fakePointer<float>(in), rows, cols, Layout{ld});
  if (!v) return false;
  out = v.value();
  return true;
}

// The plan of an accepted group-tile call: the whole (rows, groups) range
// in tiles, the grid within the limits, the padding tile where it belongs.
template <class In, class Layout>
void checkGroupTilePlan(FuzzedDataProvider& in, const char* fn, index_t rows, index_t groups, int groupSize,
                        const ScaleView<float, Layout>& scale, int smallGridElems, int loopWaves) {
  using Policy = GroupTilePolicy<In>;
  Facts facts;
  facts.smCount = in.ConsumeIntegralInRange<int>(1, 264);
  facts.tileResident = in.ConsumeIntegralInRange<int>(1, 64);
  facts.loopResident = in.ConsumeIntegralInRange<int>(1, 64);
  const bool padded = scale.hasPaddingRows();
  const detail::GroupTileLaunch plan = detail::planGroupTile<In>(fn, rows, groups, groupSize, Layout::kMnMajor, padded,
                                                         smallGridElems, loopWaves, facts);
  const bool work = groups > 0 && (rows > 0 || padded);
  FUZZ_CHECK((plan.kernel == detail::GroupTileKernel::kNone) == !work, "kNone exactly when there is no work");
  if (!work) return;
  const auto& g = plan.grid;
  if (!g.status) {
    checkRefusal(g.status, fn);
    FUZZ_CHECK(std::strcmp(g.status.argument(), "groups") == 0 || std::strcmp(g.status.argument(), "M") == 0,
               g.status.message());
    FUZZ_CHECK(g.gridY > kMaxGridY || !fitsOneGrid(g.gridX, plan.threads), "refused a grid within the limits");
    return;
  }
  FUZZ_CHECK(g.gridY >= 1 && g.gridY <= kMaxGridY && g.gridX >= 1 && fitsOneGrid(g.gridX, plan.threads),
             "grid outside the limits");
  FUZZ_CHECK(plan.threads == Policy::kThreads || plan.threads == Policy::kSmallGridThreads, "threads");
  const int slots = plan.threads / (groupSize / plan.elems);
  FUZZ_CHECK(g.tileRows >= 1 && g.tileGroups >= 1 && g.tileRows * g.tileGroups == slots &&
                 (g.tileRows & (g.tileRows - 1)) == 0 && (g.tileGroups & (g.tileGroups - 1)) == 0,
             "the tile is the block's slots, powers of two");
  FUZZ_CHECK(i128(g.gridY) * g.tileGroups >= groups && i128(g.gridY - 1) * g.tileGroups < groups,
             "the group tiles cover the groups, none idle");
  const index_t rowTiles = (rows + g.tileRows - 1) / g.tileRows;
  if (plan.kernel == detail::GroupTileKernel::kLoop) {
    FUZZ_CHECK(loopWaves > 0 && plan.threads == Policy::kThreads, "only group quant loops");
    FUZZ_CHECK(g.gridX <= rowTiles, "more looping blocks than row tiles");
    const index_t target = static_cast<index_t>(facts.loopResident) * loopWaves;
    FUZZ_CHECK(g.gridX <= (target / g.gridY > 1 ? target / g.gridY : 1), "the looping grid exceeds its cap");
  } else {
    const index_t paddingTiles = padded ? 1 : 0;
    FUZZ_CHECK(g.gridX == rowTiles + paddingTiles, "a block per row tile, plus the padding tile");
    FUZZ_CHECK(!padded || isPaddingTile(scale, (g.gridX - 1) * g.tileRows, g.tileRows),
               "the last block is the padding tile");
  }
}

// ---- group quant ----

template <class Format, class In, class Layout>
void fuzzGroupQuant(FuzzedDataProvider& in) {
  const QuantOptions o = pickOptions<Format>(in);
  const int gs = o.groupSize > 0 ? o.groupSize : 128;
  const bool headMajor = in.ConsumeBool();
  GroupQuantInput<In> x;
  x.x = fakePointer<const In>(in);
  x.rows = pickWild(in, in.ConsumeIntegralInRange<index_t>(0, 5));
  x.heads = headMajor ? pickWild(in, in.ConsumeIntegralInRange<index_t>(1, 8)) : 1;
  x.headDim = pickWild(in, gs * in.ConsumeIntegralInRange<index_t>(0, 4));
  const i128 K = i128(x.heads) * x.headDim;
  const index_t cols = K > INT64_MAX || K < INT64_MIN ? 0 : x.cols();
  if (headMajor) {
    const bool tokensOuter = in.ConsumeBool();  // [M, H, D] or [H, M, D]
    x.tokenStride = pickStride(in, tokensOuter ? cols : x.headDim);
    x.headStride = pickStride(in, tokensOuter ? x.headDim : satMul(x.rows < 0 ? 0 : x.rows, x.headDim));
  } else {
    x.tokenStride = pickStride(in, cols);
    x.headStride = x.headDim;
  }
  Fp8Matrix<Format> q{fakePointer<std::uint8_t>(in), x.rows, cols, pickStride(in, cols)};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) q.rows = pickExtent(in);
  ScaleView<float, Layout> scale;
  if (!pickScale(in, x.rows, cols / gs, scale)) return;

  float fmax = 0.0f;
  const Status s = detail::checkGroupQuant("groupQuant", x, q, scale, o, fmax);

  // The rules, stated again (docs/bad_input.md).
  const index_t M = x.rows;
  const int inBytes = sizeof(In);
  const int store = detail::kGroupTileStoreBytes<In>;
  const bool matrix = x.heads == 1;
  Rules r;
  producerOptionRules<Format>(r, o);
  r.need(x.heads >= 1, "heads");
  r.need(x.headDim >= 0, matrix ? "K" : "headDim");
  r.need(K <= kMaxBytes, matrix ? "K" : "heads");
  r.need(M >= 0, "M");
  r.need(K % gs == 0, "K");
  r.need(q.rows == M && q.cols == K, "q");
  r.need(q.ld >= K, "ldq");
  r.need(scale.rows() == M && i128(scale.cols()) == K / gs, "scale");
  i128 xSpan = 0;
  if (matrix) {
    r.need(x.tokenStride >= K, "ldx");
    xSpan = span(M, K, x.tokenStride);
  } else {
    r.need(x.headDim % gs == 0, "headDim");
    r.need(x.tokenStride >= 0, "tokenStride");
    r.need(x.headStride >= 0, "headStride");
    r.need(M <= 0 || i128(x.headStride) * inBytes % 16 == 0, "headStride");
    r.need(M <= 0 || i128(x.tokenStride) * inBytes % 16 == 0, "tokenStride");
    r.need(K <= detail::kMaxHeadMajorCols, "K");
    xSpan = M <= 0 || x.headDim <= 0 || x.heads < 1
                ? 0
                : (i128(M) - 1) * x.tokenStride + (i128(x.heads) - 1) * x.headStride + x.headDim;
  }
  r.need(fits(x.x, xSpan, inBytes), "x");
  r.need(fits(q.data, span(M, K, q.ld), 1), "q");
  if (M > 0 && K > 0) {
    r.need(x.x != nullptr && aligned(x.x, 16), "x");
    r.need(q.data != nullptr && aligned(q.data, store), "q");
    if (matrix) r.need(i128(x.tokenStride) * inBytes % 16 == 0, "ldx");
    r.need(q.ld % store == 0, "ldq");
  }
  expectRules(s, r, "groupQuant");
  if (!s) return;
  FUZZ_CHECK(fmax == (o.fmax == 0.0f ? Format::kMax : o.fmax), "the checked fmax");
  checkGroupTilePlan<In>(in, "groupQuant", M, K / gs, gs, scale, GroupTilePolicy<In>::kSmallGridElems,
                         GroupTilePolicy<In>::kGroupQuantWaves);
}

// ---- SiLU-clamp quant ----

template <class Format, class In, class Layout>
void fuzzSiluClampQuant(FuzzedDataProvider& in) {
  const QuantOptions o = pickOptions<Format>(in);
  const int gs = o.groupSize > 0 ? o.groupSize : 128;
  SiluClampInput<In> x;
  x.x = fakePointer<const In>(in);
  x.rows = pickWild(in, in.ConsumeIntegralInRange<index_t>(0, 5));
  x.intermediate = pickWild(in, gs * in.ConsumeIntegralInRange<index_t>(0, 4));
  const index_t I = x.intermediate;
  const i128 twoI = i128(2) * I;
  x.ldx = pickStride(in, twoI > INT64_MAX || twoI < 0 ? 0 : static_cast<index_t>(twoI));
  const int l = in.ConsumeIntegralInRange<int>(0, 7);
  x.limit = l == 0 ? NAN : l == 1 ? -INFINITY : static_cast<float>(l - 2);
  Fp8Matrix<Format> q{fakePointer<std::uint8_t>(in), x.rows, I, pickStride(in, I < 0 ? 0 : I)};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) q.cols = pickExtent(in);
  ScaleView<float, Layout> scale;
  if (!pickScale(in, x.rows, I / gs, scale)) return;

  float fmax = 0.0f;
  const Status s = detail::checkSiluClampQuant("siluClampQuant", x, q, scale, o, fmax);
  const index_t M = x.rows;
  const int inBytes = sizeof(In);
  const int store = detail::kGroupTileStoreBytes<In>;
  Rules r;
  producerOptionRules<Format>(r, o);
  r.need(I >= 0 && twoI <= kMaxBytes, "intermediate");
  r.need(x.ldx >= twoI, "ldx");
  r.need(!std::isnan(x.limit), "limit");
  r.need(q.rows == M && q.cols == I, "q");
  r.need(M >= 0, "M");
  r.need(I % gs == 0, "I");
  r.need(q.ld >= I, "ldq");
  r.need(scale.rows() == M && scale.cols() == I / gs, "scale");
  r.need(fits(x.x, span(M, twoI, x.ldx), inBytes), "x");
  r.need(fits(q.data, span(M, I, q.ld), 1), "q");
  if (M > 0 && I > 0) {
    r.need(x.x != nullptr && aligned(x.x, 16), "x");
    r.need(i128(x.ldx) * inBytes % 16 == 0, "ldx");
    r.need(q.data != nullptr && aligned(q.data, store), "q");
    r.need(q.ld % store == 0, "ldq");
  }
  expectRules(s, r, "siluClampQuant");
  if (!s) return;
  checkGroupTilePlan<In>(in, "siluClampQuant", M, I / gs, gs, scale, GroupTilePolicy<In>::kSiluSmallGridElems, 0);
}

// ---- RMSNorm quant ----

template <class Format, class In, class Layout>
void fuzzRmsNormQuant(FuzzedDataProvider& in) {
  const QuantOptions o = pickOptions<Format>(in);
  const int gs = o.groupSize > 0 ? o.groupSize : 128;
  const index_t M0 = pickWild(in, in.ConsumeIntegralInRange<index_t>(0, 5));
  const index_t K0 = in.ConsumeIntegralInRange<int>(0, 9) == 0 ? pickExtent(in)
                                                               : gs * in.ConsumeIntegralInRange<index_t>(0, 300);
  RmsNormQuantInput<In> x =
      RmsNormQuantInput<In>::matrix(fakePointer<const In>(in), M0, K0, pickStride(in, K0 < 0 ? 0 : K0),
                                    fakePointer<const In>(in));
  const int e = in.ConsumeIntegralInRange<int>(0, 7);
  x.normEps = e == 0 ? NAN : e == 1 ? -1e-6f : e == 2 ? 0.0f : 1e-6f;
  if (in.ConsumeBool()) x = x.withResidual(fakePointer<In>(in), pickStride(in, K0 < 0 ? 0 : K0));
  if (in.ConsumeBool()) x = x.withNormOut(fakePointer<In>(in), pickStride(in, K0 < 0 ? 0 : K0));
  const index_t M = x.rows, K = x.cols;
  Fp8Matrix<Format> q{fakePointer<std::uint8_t>(in), M, K, pickStride(in, K < 0 ? 0 : K)};
  ScaleView<float, Layout> scale;
  if (!pickScale(in, M, K / gs, scale)) return;

  float fmax = 0.0f;
  const Status s = detail::checkRmsNormQuant("rmsNormQuant", x, q, scale, o, fmax);
  const int inBytes = sizeof(In);
  const int store = detail::kVecElems<In>;
  Rules r;
  producerOptionRules<Format>(r, o);
  r.need(K <= detail::kRmsNormMaxCols<In>, "K");
  r.need(x.normEps >= 0.0f, "normEps");
  r.need(M >= 0, "M");
  r.need(K >= 0 && K % gs == 0, "K");
  r.need(x.ldx >= K, "ldx");
  r.need(q.ld >= K, "ldq");
  r.need(scale.rows() == M && scale.cols() == K / gs, "scale");
  r.need(fits(x.x, span(M, K, x.ldx), inBytes), "x");
  r.need(fits(q.data, span(M, K, q.ld), 1), "q");
  const auto optionalRows = [&](const void* p, index_t ld, const char* name, const char* ldName) {
    if (p == nullptr) return;  // absent
    r.need(ld >= K, ldName);
    r.need(fits(p, span(M, K, ld), inBytes), name);
    r.need(aligned(p, 16), name);
    r.need(i128(ld) * inBytes % 16 == 0, ldName);
  };
  if (M > 0 && K > 0) {
    r.need(x.x != nullptr && aligned(x.x, 16), "x");
    r.need(i128(x.ldx) * inBytes % 16 == 0, "ldx");
    r.need(q.data != nullptr && aligned(q.data, store), "q");
    r.need(q.ld % store == 0, "ldq");
    r.need(x.weight != nullptr && fits(x.weight, K, inBytes) && aligned(x.weight, 16), "weight");
    optionalRows(x.residual, x.ldResidual, "residual", "ldResidual");
    optionalRows(x.normOut, x.ldNormOut, "normOut", "ldNormOut");
  }
  expectRules(s, r, "rmsNormQuant");
  if (!s) return;
  if (K > 0) {
    using Policy = RmsNormPolicy<In>;
    const RmsNormLaunch plan = detail::rmsNormQuantLaunch<In>(M, K);
    const index_t vecs = K / detail::kVecElems<In>;
    FUZZ_CHECK((plan.kernel == RmsNormKernel::kLongRows) == (vecs > Policy::kWideThreads), "long rows");
    if (plan.kernel == RmsNormKernel::kLongRows)
      FUZZ_CHECK(i128(Policy::kLargeThreads) * Policy::kLargeVecs >= vecs, "a long row fits its block");
    if (plan.kernel == RmsNormKernel::kBlockPerRow)
      FUZZ_CHECK(plan.threads >= vecs && plan.threads <= Policy::kWideThreads && plan.threads % detail::kWarpSize == 0 &&
                     fitsOneGrid(M + 1, plan.threads),
                 "a block per row holds the row, whole warps, one grid with the padding block");
    if (plan.kernel == RmsNormKernel::kStaged || plan.kernel == RmsNormKernel::kRowLoop)
      FUZZ_CHECK(M >= Policy::kRowsMinRows, "the many-rows kernels run from kRowsMinRows rows");
  }
}

// ---- weight block quant (weightBlockQuant's checks: 16-byte loads, one
// fp8 vector a store) ----

template <class Format, class In>
void fuzzWeightBlockQuant(FuzzedDataProvider& in) {
  const QuantOptions o = pickOptions<Format>(in);
  WeightQuantOptions opt;
  opt.rule = o.rule;
  opt.fmax = o.fmax;
  opt.eps = o.eps;
  WeightQuantInput<In> w;
  w.w = fakePointer<const In>(in);
  w.rows = pickWild(in, in.ConsumeIntegralInRange<index_t>(0, 300));
  w.cols = pickWild(in, kWeightBlock * in.ConsumeIntegralInRange<index_t>(0, 4));
  w.ld = pickStride(in, w.cols < 0 ? 0 : w.cols);
  Fp8Matrix<Format> q{fakePointer<std::uint8_t>(in), w.rows, w.cols, pickStride(in, w.cols < 0 ? 0 : w.cols)};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) q.rows = pickExtent(in);
  const index_t N = w.rows, K = w.cols;
  // ceil(N / 128) in 128-bit arithmetic, not by weightScaleRows().
  const i128 scaleRows = N < 0 ? 0 : (i128(N) + kWeightBlock - 1) / kWeightBlock;
  ScaleView<float, RowMajor> scale;
  if (!pickScale(in, static_cast<index_t>(scaleRows), K < 0 ? 0 : K / kWeightBlock, scale)) return;
  float fmax = 0.0f;
  const int store = detail::kVecElems<In>;
  const Status s = detail::checkWeightBlockQuant("weightBlockQuant", w, q, scale, opt, fmax, 16, store);
  const int inBytes = sizeof(In);
  Rules r;
  scaleOptionRules<Format>(r, opt.fmax, opt.eps, opt.rule);
  r.need(N >= 0, "N");
  r.need(K >= 0 && K % kWeightBlock == 0, "K");
  r.need(w.ld >= K, "ld");
  r.need(q.rows == N && q.cols == K, "q");
  r.need(q.ld >= K, "q.ld");
  r.need(scale.rows() == scaleRows && scale.cols() == K / kWeightBlock && scale.ld() >= scale.cols(), "scale");
  r.need(fits(w.w, span(N, K, w.ld), inBytes), "w");
  r.need(fits(q.data, span(N, K, q.ld), 1), "q");
  if (N > 0 && K > 0) {
    r.need(w.w != nullptr && aligned(w.w, 16), "w");
    r.need(i128(w.ld) * inBytes % 16 == 0, "ld");
    r.need(q.data != nullptr && aligned(q.data, store), "q");
    r.need(q.ld % store == 0, "q.ld");
  }
  expectRules(s, r, "weightBlockQuant");
}

template <class Format, class In, class Layout>
void fuzzProducers(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: fuzzGroupQuant<Format, In, Layout>(in); break;
    case 1: fuzzSiluClampQuant<Format, In, Layout>(in); break;
    case 2: fuzzRmsNormQuant<Format, In, Layout>(in); break;
    default: fuzzWeightBlockQuant<Format, In>(in); break;
  }
}

template <class Format, class In>
void fuzzLayouts(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) fuzzProducers<Format, In, RowMajor>(in);
  else fuzzProducers<Format, In, ColMajor>(in);
}

template <class Format>
void fuzzInputs(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: fuzzLayouts<Format, BFloat16>(in); break;
    case 1: fuzzLayouts<Format, Float16>(in); break;
    default: fuzzLayouts<Format, float>(in); break;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace fp8scale

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) fp8scale::fuzz::fuzzInputs<fp8scale::E4M3FN>(in);
  else fp8scale::fuzz::fuzzInputs<fp8scale::E4M3FNUZ>(in);
  return 0;
}
