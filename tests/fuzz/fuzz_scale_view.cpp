// Fuzz target: the scale-view factories, the layout mappings, the re-view
// helpers and materializeHost.
//
// Each input picks a layout (RowMajor, ColMajor, TransposedContiguous,
// PerTensor, and the exponent layouts PackedUe8m0 / Swizzled128x4), an
// element type (float, UE8M0 bytes), extents, an ld
// and a pointer (a real buffer, null, misaligned, near the top of the
// address space, a fake address). The target computes in 128-bit integers
// what make() must answer (the status code and argument, or the span) and
// compares. An accepted view over a real buffer of exactly requiredSpan()
// elements is then written through every (m, g) and its padding routine, so
// AddressSanitizer sees any slot outside the span; the mapping must be
// one-to-one and leave the row gaps untouched. The re-view helpers must keep
// the pointer and give the documented strides, and materializeHost into a
// second buffer (or an overlapping, null or misaligned one) must refuse
// exactly the bad destinations and otherwise copy every (m, g) with the
// padding slots zeroed.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "fp8scale/layout_policy.hpp"
#include "fp8scale/scale_view.hpp"
#include "fuzz_common.hpp"

namespace fp8scale {
namespace fuzz {
namespace {

using i128 = __int128;

// Views up to this many slots get a real buffer and are written through.
constexpr index_t kMaxRealSpan = 1 << 14;

// Bytes of `elements` elements of T, or 2^100 for counts too large to matter
// (no product overflows the 128-bit arithmetic).
template <class T>
i128 bytesOf(i128 elements) {
  return elements > (i128(1) << 64) ? i128(1) << 100 : elements * i128(sizeof(T));
}

struct Expected {
  StatusCode code = StatusCode::kOk;
  const char* argument = "";
  i128 span = 0;
};

template <class T, class Layout>
Expected expectedMake(const T* p, index_t rows, index_t cols, index_t ld) {
  constexpr bool kHasLd = std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value;
  Expected e;
  if (rows < 0) return {StatusCode::kInvalidShape, "rows"};
  if (cols < 0) return {StatusCode::kInvalidShape, "cols"};
  if (std::is_same<Layout, RowMajor>::value && ld < cols) return {StatusCode::kLdTooSmall, "ld"};
  if (std::is_same<Layout, ColMajor>::value && ld < rows) return {StatusCode::kLdTooSmall, "ld"};
  if (std::is_same<Layout, RowMajor>::value) e.span = rows == 0 || cols == 0 ? 0 : i128(rows - 1) * ld + cols;
  else if (std::is_same<Layout, ColMajor>::value) e.span = i128(cols) * ld;
  else if (std::is_same<Layout, PerTensor>::value) e.span = 1;
  else e.span = i128(rows) * cols;
  const char* spanArg = kHasLd ? "ld" : "cols";
  const i128 bytes = bytesOf<T>(e.span);
  if (bytes > (i128(1) << 48)) return {StatusCode::kInvalidShape, spanArg, e.span};
  if (p != nullptr && bytes > i128(UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(p)))
    return {StatusCode::kInvalidShape, spanArg, e.span};
  const bool addresses = std::is_same<Layout, PerTensor>::value ? rows > 0 && cols > 0 : e.span > 0;
  if (p == nullptr && addresses) return {StatusCode::kNullPointer, "data", e.span};
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) return {StatusCode::kMisaligned, "data", e.span};
  return e;
}

template <class T>
T valueOf(std::size_t i) {
  if constexpr (std::is_same<T, float>::value) return static_cast<float>(i + 1);
  else return static_cast<T>(i % 255 + 1);
}

// The independent mapping of (m, g) to an element offset.
template <class Layout>
i128 offsetOf(index_t m, index_t g, index_t ld) {
  if constexpr (std::is_same<Layout, RowMajor>::value) return i128(m) * ld + g;
  else if constexpr (std::is_same<Layout, ColMajor>::value) return i128(g) * ld + m;
  else return 0;
}

// materializeHost(src) into a destination of the input's choice: the
// outcome is predicted first (planMaterialize's order), then the call must
// give it. A copy into anything but the real destination buffer is not made
// (it would write through a fake pointer); every refusal is.
enum class Outcome { kLdTooSmall, kSpan, kSameBytes, kNull, kMisaligned, kOverlap, kCopy };

template <class T, class Layout>
Outcome predictMaterialize(const ScaleView<T, Layout>& src, const T* dst, index_t ld) {
  if (ld < src.rows()) return Outcome::kLdTooSmall;
  const i128 dstSpan = i128(src.cols()) * ld;
  const i128 dstBytes = bytesOf<T>(dstSpan);
  if (dstBytes > (i128(1) << 48) ||
      (dst != nullptr && dstBytes > i128(UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(dst))))
    return Outcome::kSpan;
  // Whether src's bytes already are ColMajor{ld}: no padding slot, and every
  // (m, g) at the same offset (checked slot by slot for small views).
  bool same = false;
  if constexpr (std::is_same<Layout, ColMajor>::value) {
    same = src.ld() == ld;
  } else {
    same = !(src.cols() > 0 && ld > src.rows());
    if (same && !src.empty()) {
      if (src.rows() <= kMaxRealSpan && src.cols() <= kMaxRealSpan && src.rows() * src.cols() <= kMaxRealSpan) {
        for (index_t m = 0; m < src.rows() && same; ++m)
          for (index_t g = 0; g < src.cols() && same; ++g)
            same = i128(src.layout().offset(m, g)) == i128(g) * ld + m;
      } else {
        same = src.rows() == 1 || (src.cols() == 1 && src.ld() == 1);
      }
    }
  }
  if (same) return Outcome::kSameBytes;
  if (dst == nullptr) return Outcome::kNull;
  if (reinterpret_cast<std::uintptr_t>(dst) % alignof(T) != 0) return Outcome::kMisaligned;
  const auto* s0 = reinterpret_cast<const unsigned char*>(src.data());
  const auto* s1 = s0 + src.requiredSpan() * static_cast<index_t>(sizeof(T));
  const auto* d0 = reinterpret_cast<const unsigned char*>(dst);
  if (d0 < s1 && s0 < d0 + dstBytes) return Outcome::kOverlap;
  return Outcome::kCopy;
}

template <class T, class Layout>
void fuzzMaterialize(FuzzedDataProvider& in, const ScaleView<T, Layout>& src) {
  const index_t ld = pickStride(in, src.rows());
  const i128 dstSpan = i128(src.cols()) * (ld < 0 ? 0 : ld);
  const bool small = ld >= 0 && dstSpan <= kMaxRealSpan;
  std::vector<T> dstBuf(small ? static_cast<std::size_t>(dstSpan) + 1 : 1, T(0x7f));  // +1: a guard slot
  PointerKind kind = pickPointerKind(in);
  if (!small && kind == PointerKind::kReal) kind = PointerKind::kFake;  // no buffer that large
  const bool overlap = src.requiredSpan() > 0 && in.ConsumeIntegralInRange<int>(0, 9) == 0;
  T* dst = overlap ? src.data() + in.ConsumeIntegralInRange<index_t>(0, src.requiredSpan() - 1)
                   : pointerOf(kind, dstBuf.data());
  const Outcome expected = predictMaterialize(src, dst, ld);
  if (expected == Outcome::kCopy && dst != dstBuf.data()) return;
  const std::vector<T> before(src.data(), src.data() + src.requiredSpan());
  const auto r = materializeHost(src, dst, ld);
  const auto refused = [&](StatusCode code, const char* argument) {
    FUZZ_CHECK(!r && r.status().code() == code && std::strcmp(r.status().argument(), argument) == 0,
               "expected a refusal naming '" + std::string(argument) + "', got " + describe(r.status()));
    checkRefusal(r.status(), "materializeHost");
    FUZZ_CHECK(dstBuf.back() == T(0x7f) && (dstBuf.size() == 1 || dstBuf[0] == T(0x7f)), "a refused call wrote");
  };
  switch (expected) {
    case Outcome::kLdTooSmall: return refused(StatusCode::kLdTooSmall, "ld");
    case Outcome::kSpan: return refused(StatusCode::kInvalidShape, "ld");
    case Outcome::kNull: return refused(StatusCode::kNullPointer, "dst");
    case Outcome::kMisaligned: return refused(StatusCode::kMisaligned, "dst");
    case Outcome::kOverlap: return refused(StatusCode::kInvalidValue, "dst");
    case Outcome::kSameBytes:
      FUZZ_CHECK(r && r.value().data() == src.data() && r.value().ld() == ld, describe(r.status()));
      return;
    case Outcome::kCopy: break;
  }
  FUZZ_CHECK(r && r.value().data() == dst && r.value().ld() == ld && r.value().rows() == src.rows(),
             describe(r.status()));
  for (index_t g = 0; g < src.cols(); ++g) {
    for (index_t m = 0; m < src.rows(); ++m)
      FUZZ_CHECK(std::memcmp(&dstBuf[static_cast<std::size_t>(g * ld + m)], &src(m, g), sizeof(T)) == 0,
                 "materialized (m, g) differs");
    for (index_t m = src.rows(); m < ld; ++m)
      FUZZ_CHECK(dstBuf[static_cast<std::size_t>(g * ld + m)] == T(0), "a padding slot is not 0");
  }
  FUZZ_CHECK(dstBuf.back() == T(0x7f), "written past G * ld");
  FUZZ_CHECK(before.empty() || std::memcmp(before.data(), src.data(), before.size() * sizeof(T)) == 0,
             "the source changed");
}

template <class T, class Layout>
void fuzzView(FuzzedDataProvider& in) {
  const index_t rows = pickExtent(in);
  const index_t cols = pickExtent(in);
  const index_t minLd = std::is_same<Layout, ColMajor>::value ? rows : cols;
  const index_t ld = pickStride(in, minLd < 0 ? 0 : minLd);
  PointerKind kind = pickPointerKind(in);

  // The span decides whether a real buffer can back the view.
  const Expected shape = expectedMake<T, Layout>(reinterpret_cast<T*>(alignof(T)), rows, cols, ld);
  const bool small = shape.span >= 0 && shape.span <= kMaxRealSpan;
  if (kind == PointerKind::kReal && !small) kind = PointerKind::kFake;
  std::vector<T> buf(small ? static_cast<std::size_t>(shape.span) : 0);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = T(0x55);
  T* p = pointerOf(kind, buf.empty() ? reinterpret_cast<T*>(std::uintptr_t{1} << 20) : buf.data());
  if (kind == PointerKind::kReal && buf.empty()) p = nullptr;  // an empty vector has no storage: pass null
  const bool real = kind == PointerKind::kReal && p != nullptr;

  Layout layout{};
  if constexpr (std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value) layout.ld = ld;
  const auto view = ScaleView<T, Layout>::make(p, rows, cols, layout);
  const Expected e = expectedMake<T, Layout>(p, rows, cols, ld);
  if (e.code != StatusCode::kOk) {
    FUZZ_CHECK(!view, "accepted a view make() must refuse: " + std::string(e.argument));
    FUZZ_CHECK(view.status().code() == e.code && std::strcmp(view.status().argument(), e.argument) == 0,
               "expected " + std::string(e.argument) + ", got " + describe(view.status()));
    checkRefusal(view.status(), "ScaleView::make");
    return;
  }
  FUZZ_CHECK(view, "refused a valid view: " + describe(view.status()));
  const ScaleView<T, Layout> v = view.value();
  FUZZ_CHECK(v.data() == p && v.rows() == rows && v.cols() == cols, "extents or pointer changed");
  FUZZ_CHECK(i128(v.requiredSpan()) == e.span, "requiredSpan differs from the independent span");
  FUZZ_CHECK(v.empty() == (rows == 0 || cols == 0), "empty()");

  if constexpr (std::is_same<Layout, TransposedContiguous>::value) {
    FUZZ_CHECK(v.ld() == cols && v.stride(0) == cols && v.stride(1) == 1, "P1 presents strides (G, 1)");
    const ScaleView<T, ColMajor> c = asColumnMajor(v);  // P1 -> P2, no copy
    FUZZ_CHECK(c.data() == p && c.ld() == rows && c.stride(0) == 1 && c.stride(1) == rows, "P2 strides (1, M)");
    FUZZ_CHECK(c.requiredSpan() == v.requiredSpan() && !c.hasPadding(), "P2 spans P1's bytes, no padding");
    const QuantizedTensor<E4M3FN, TransposedContiguous, T> t{{}, v, 128};
    FUZZ_CHECK(viewTransposedScale(t).scale.data() == p, "viewTransposedScale keeps the pointer");
    if (real || p == nullptr) fuzzMaterialize(in, c);
    return;
  } else {
    FUZZ_CHECK(v.hasPadding() == (Layout::kColumnMajor && cols > 0 && ld > rows), "hasPadding()");
    if constexpr (std::is_same<Layout, PerTensor>::value) {
      FUZZ_CHECK(v.stride(0) == 0 && v.stride(1) == 0 && v.ld() == 0, "PerTensor strides (0, 0)");
    } else {
      FUZZ_CHECK(v.ld() == ld, "ld()");
      FUZZ_CHECK(v.stride(0) == (Layout::kColumnMajor ? 1 : ld) && v.stride(1) == (Layout::kColumnMajor ? ld : 1),
                 "strides");
    }
    // Row tiles of a launch over the view: the tiles of its rows, plus one
    // for the padding slots, which is the only padding tile.
    const index_t tileRows = in.ConsumeIntegralInRange<index_t>(1, 64);
    if (rows < (index_t{1} << 56)) {
      // The fewest whole tiles that cover the rows, and one more with padding.
      const i128 tiles = i128(paddedRowTiles(v, tileRows)) - (v.hasPadding() ? 1 : 0);
      FUZZ_CHECK(tiles >= 0 && tiles * tileRows >= rows && (rows == 0 ? tiles == 0 : (tiles - 1) * tileRows < rows),
                 "paddedRowTiles");
      const index_t start = in.ConsumeIntegralInRange<index_t>(0, 4) * tileRows + (rows / tileRows) * tileRows;
      FUZZ_CHECK(isPaddingTile(v, start, tileRows) == (v.hasPadding() && start >= rows && start < rows + tileRows),
                 "isPaddingTile");
    }
    // Sampled (m, g): inside the span, where the independent mapping puts them.
    if (rows > 0 && cols > 0 && !std::is_same<Layout, PerTensor>::value) {
      for (int i = 0; i < 4; ++i) {
        const index_t m = in.ConsumeIntegralInRange<index_t>(0, rows - 1);
        const index_t g = in.ConsumeIntegralInRange<index_t>(0, cols - 1);
        const i128 off = offsetOf<Layout>(m, g, ld);
        FUZZ_CHECK(off >= 0 && off < e.span && i128(v.layout().offset(m, g)) == off, "offset(m, g)");
      }
    }
    if (!real) {
      if constexpr (std::is_same<Layout, RowMajor>::value) {
        const auto t = reinterpretAsTransposedBytes(v);
        FUZZ_CHECK(bool(t) == (ld == cols), "reinterpretAsTransposedBytes needs ld == G");
      }
      if constexpr (!std::is_same<Layout, PerTensor>::value)
        if (p == nullptr) fuzzMaterialize(in, v);
      return;
    }
    // Write every (m, g) and the padding slots through the view: each slot
    // at most once, the gaps untouched, nothing outside the buffer (ASan).
    if (rows > kMaxRealSpan || cols > kMaxRealSpan || rows * cols > kMaxRealSpan) return;
    std::vector<int> hits(buf.size(), 0);
    std::size_t i = 0;
    for (index_t m = 0; m < rows; ++m)
      for (index_t g = 0; g < cols; ++g) {
        T& slot = v(m, g);
        slot = valueOf<T>(i++);
        ++hits[static_cast<std::size_t>(&slot - buf.data())];
      }
    for (index_t g = 0; g < cols; ++g) writeScalePadding(v, g, 0, 1);
    for (std::size_t k = 0; k < buf.size(); ++k) {
      if (!std::is_same<Layout, PerTensor>::value) FUZZ_CHECK(hits[k] <= 1, "two (m, g) share a slot");
      if (hits[k] == 0) {
        const bool paddingSlot = Layout::kColumnMajor && static_cast<index_t>(k) % (ld > 0 ? ld : 1) >= rows;
        FUZZ_CHECK(buf[k] == (paddingSlot ? T(0) : T(0x55)), "a gap was written, or a padding slot was not zeroed");
      }
    }
    if constexpr (!std::is_same<Layout, PerTensor>::value) fuzzMaterialize(in, v);
  }
}

// ---- The UE8M0 exponent layouts (PackedUe8m0, Swizzled128x4) -------------

constexpr i128 kMax48 = i128(1) << 48;

/// What make() must answer for an exponent view, in 128-bit arithmetic;
/// `param` is the packed ld or the tiles across (colTiles).
template <class Layout>
Expected expectedExponentMake(const std::uint8_t* p, index_t rows, index_t cols, index_t param) {
  constexpr bool kPacked = std::is_same<Layout, PackedUe8m0>::value;
  Expected e;
  if (rows < 0) return {StatusCode::kInvalidShape, "rows"};
  if (cols < 0) return {StatusCode::kInvalidShape, "cols"};
  if (rows > kMax48) return {StatusCode::kInvalidShape, "rows"};
  if (cols > kMax48) return {StatusCode::kInvalidShape, "cols"};
  const i128 words = (i128(cols) + 3) / 4;  // 4-group word columns, or tiles across
  if (kPacked) {
    if (param < (i128(rows) + 3) / 4 * 4) return {StatusCode::kLdTooSmall, "ld"};
    if (param % 4 != 0) return {StatusCode::kInvalidShape, "ld"};
    e.span = words * param * 4;
  } else {
    if (param != words) return {StatusCode::kInvalidShape, "layout"};
    e.span = (i128(rows) + 127) / 128 * words * 512;
  }
  const char* spanArg = kPacked ? "ld" : "cols";
  if (e.span > kMax48) return {StatusCode::kInvalidShape, spanArg, e.span};
  if (p != nullptr && e.span > i128(UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(p)))
    return {StatusCode::kInvalidShape, spanArg, e.span};
  if (p == nullptr && e.span > 0) return {StatusCode::kNullPointer, "data", e.span};
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return {StatusCode::kMisaligned, "data", e.span};
  return e;
}

/// The consumers' mappings, written out independently of the layouts.
template <class Layout>
i128 exponentOffsetOf(index_t m, index_t g, index_t param) {
  if constexpr (std::is_same<Layout, PackedUe8m0>::value) return (i128(g / 4) * param + m) * 4 + g % 4;
  else return (i128(m / 128) * param + g / 4) * 512 + (m % 32) * 16 + (m % 128) / 32 * 4 + g % 4;
}

template <class Layout>
void fuzzExponentView(FuzzedDataProvider& in) {
  constexpr bool kPacked = std::is_same<Layout, PackedUe8m0>::value;
  const index_t rows = pickExtent(in, 300);
  const index_t cols = pickExtent(in, 60);
  index_t param = 0;
  if (kPacked) {
    param = pickStride(in, rows >= 0 && rows <= (index_t{1} << 48) ? (rows + 3) / 4 * 4 : 0);
  } else {
    const index_t tiles = cols >= 0 ? cols / 4 + (cols % 4 != 0 ? 1 : 0) : 0;
    param = in.ConsumeIntegralInRange<int>(0, 5) == 0 ? pickStride(in, tiles) : tiles;
  }
  PointerKind kind = pickPointerKind(in);
  const Expected shape = expectedExponentMake<Layout>(reinterpret_cast<std::uint8_t*>(16), rows, cols, param);
  const bool small = shape.code == StatusCode::kOk && shape.span <= kMaxRealSpan;
  if (kind == PointerKind::kReal && !small) kind = PointerKind::kFake;
  std::vector<std::uint8_t> storage(small ? static_cast<std::size_t>(shape.span) + 16 : 16, 0x55);
  auto* aligned = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 15) &
                                                  ~std::uintptr_t{15});
  std::uint8_t* p = pointerOf(kind, aligned);
  if (kind == PointerKind::kReal && shape.span == 0) p = nullptr;
  const bool real = kind == PointerKind::kReal && p != nullptr;

  Layout layout{};
  if constexpr (kPacked) layout.ld = param;
  else layout.colTiles = param;
  const auto view = ScaleView<std::uint8_t, Layout>::make(p, rows, cols, layout);
  const Expected e = expectedExponentMake<Layout>(p, rows, cols, param);
  if (e.code != StatusCode::kOk) {
    FUZZ_CHECK(!view, "accepted an exponent view make() must refuse: " + std::string(e.argument));
    FUZZ_CHECK(view.status().code() == e.code && std::strcmp(view.status().argument(), e.argument) == 0,
               "expected " + std::string(e.argument) + ", got " + describe(view.status()));
    checkRefusal(view.status(), "ScaleView::make");
    return;
  }
  FUZZ_CHECK(view, "refused a valid exponent view: " + describe(view.status()));
  const auto v = view.value();
  FUZZ_CHECK(i128(v.requiredSpan()) == e.span, "requiredSpan differs from the independent span");
  FUZZ_CHECK(v.hasPadding() == (e.span > i128(rows) * cols), "hasPadding(): the span holds slots that are no scale");
  if (rows > 0 && cols > 0)
    for (int i = 0; i < 4; ++i) {
      const index_t m = in.ConsumeIntegralInRange<index_t>(0, rows - 1);
      const index_t g = in.ConsumeIntegralInRange<index_t>(0, cols - 1);
      const i128 off = exponentOffsetOf<Layout>(m, g, param);
      FUZZ_CHECK(off >= 0 && off < e.span && i128(v.layout().offset(m, g)) == off, "offset(m, g)");
    }
  if (!real || i128(rows) * cols > kMaxRealSpan) return;
  // Every (m, g) a distinct byte inside the span; the padding routine zeroes
  // exactly the rest of the span; nothing outside it is touched (ASan, and
  // the guard bytes after it).
  std::vector<int> hits(static_cast<std::size_t>(e.span), 0);
  for (index_t m = 0; m < rows; ++m)
    for (index_t g = 0; g < cols; ++g) {
      std::uint8_t& b = v(m, g);
      b = static_cast<std::uint8_t>(1 + (m * 31 + g) % 254);
      ++hits[static_cast<std::size_t>(&b - p)];
    }
  zeroPadding(v);
  for (std::size_t k = 0; k < hits.size(); ++k) {
    FUZZ_CHECK(hits[k] <= 1, "two (m, g) share a byte");
    if (hits[k] == 0) FUZZ_CHECK(p[k] == 0, "a byte of the span that is no scale was not zeroed as padding");
    else FUZZ_CHECK(p[k] != 0, "padding zeroing overwrote a scale");
  }
  for (std::uint8_t* q = p + e.span; q < storage.data() + storage.size(); ++q)
    FUZZ_CHECK(*q == 0x55, "written past requiredSpan()");
  // materializeHost from fp32 UE8M0 scales (row-major) gives the exponents.
  std::vector<float> src(static_cast<std::size_t>(rows * cols));
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = std::ldexp(1.0f, static_cast<int>(k % 200) - 100);
  std::memset(p, 0x55, static_cast<std::size_t>(e.span));
  const Status st = materializeHost(ScaleView<const float, RowMajor>::make(src.data(), rows, cols, RowMajor{cols}).value(), v);
  FUZZ_CHECK(st, describe(st));
  for (index_t m = 0; m < rows; ++m)
    for (index_t g = 0; g < cols; ++g)
      FUZZ_CHECK(v(m, g) == static_cast<std::uint8_t>((m * cols + g) % 200 - 100 + 127), "materialized exponent");
  for (std::size_t k = 0; k < hits.size(); ++k)
    if (hits[k] == 0) FUZZ_CHECK(p[k] == 0, "materializeHost left a padding byte");
}

template <class T>
void fuzzElement(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: fuzzView<T, RowMajor>(in); break;
    case 1: fuzzView<T, ColMajor>(in); break;
    case 2: fuzzView<T, TransposedContiguous>(in); break;
    default: fuzzView<T, PerTensor>(in); break;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace fp8scale

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: fp8scale::fuzz::fuzzElement<float>(in); break;
    case 1: fp8scale::fuzz::fuzzElement<std::uint8_t>(in); break;
    case 2: fp8scale::fuzz::fuzzExponentView<fp8scale::PackedUe8m0>(in); break;
    default: fp8scale::fuzz::fuzzExponentView<fp8scale::Swizzled128x4>(in); break;
  }
  return 0;
}
