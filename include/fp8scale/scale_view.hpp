// fp8scale: typed views of per-group scale buffers.
//
// A producer quantizes x[M, K] in groups of `groupSize` columns and writes one
// scale per (row m, group g): a logical (M, G) matrix, G = K / groupSize. The
// bytes come in one of these layouts, and the layout is part of the view's type
// so that a buffer can only be re-read the way it was written:
//
//   RowMajor{ld}          (m, g) -> m * ld + g    strides (ld, 1), ld >= G.
//                         What engines emit by default.
//   ColMajor{ld}          (m, g) -> g * ld + m    strides (1, ld), ld >= M.
//                         Physical [G][ld]. What the gfx950 "bpreshuffle"
//                         blockscale GEMM (ld == M exactly), cuBLASLt
//                         VEC128_32F scales and DeepGEMM (ld == align(M, 4),
//                         TMA) read. Slots m in [M, ld) of every column are
//                         padding that producers write as 0.
//   TransposedContiguous  column-major bytes [G][M] presented with the
//                         contiguous (M, G) shape and strides (G, 1) ("P1"):
//                         what a framework shows when a kernel wrote transposed
//                         bytes into a tensor allocated as (M, G). Only data()
//                         is meaningful; element access does not compile.
//                         asColumnMajor() turns it into ColMajor{M} ("P2")
//                         without touching memory.
//   PerTensor             one scale for the whole tensor, broadcast: strides
//                         (0, 0). Re-view helpers pass it through unchanged.
//   PackedUe8m0{ld}       UE8M0 exponent bytes, four groups to an int32 word,
//                         words column-major: byte g % 4 of word
//                         (g / 4) * ld + m. The int32 (M, ceil(G / 4))
//                         tensor with strides (1, ld), ld = align(M, 4), that
//                         DeepGEMM's SM100 kernels read.
//   Swizzled128x4         UE8M0 exponent bytes in tiles of 128 rows x 4
//                         groups (512 bytes), rows interleaved by 32 inside a
//                         tile: the layout of Blackwell block-scaled MMA
//                         (cuBLASLt VEC32_UE8M0, MXFP8).
//
// The two byte layouts hold exponents only (ScaleView<std::uint8_t, ...>); a
// float view of them, or a float view re-viewed as them, does not compile:
// materializeHost() converts fp32 UE8M0 scales into them.
//
// There is no default layout: every view names one. Each layout is a mapping
// (layouts.hpp) that holds its address math, validation and padding slots;
// the view asks it and never tests which layout it has.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "detail/span.hpp"
#include "fp8.hpp"
#include "layouts.hpp"
#include "platform.hpp"
#include "status.hpp"

namespace fp8scale {

template <class T, class Layout>
class ScaleView;

/// The view a producer writes (M, G) scales through in `Layout`: float slots,
/// or the UE8M0 exponent bytes of PackedUe8m0 and Swizzled128x4.
template <class Layout>
using ScaleOutput = ScaleView<typename Layout::Element, Layout>;

/// A non-owning (rows, cols) = (M, G) view of a scale buffer in `Layout`.
/// Trivially copyable; pass it to kernels by value. `T` is float for fp32 and
/// UE8M0-as-fp32 scales, or std::uint8_t for packed UE8M0 exponents.
///
/// Build one with ScaleView::make() (validates, returns Result) or the free
/// helpers rowMajorView() / colMajorView() / transposedContiguousView().
template <class T, class Layout>
class ScaleView {
  static_assert(!Layout::kExponentBytes || std::is_same<std::remove_const_t<T>, std::uint8_t>::value,
                "PackedUe8m0 and Swizzled128x4 hold UE8M0 exponent bytes: view them as std::uint8_t, not as "
                "fp32 scales");

 public:
  using element_type = T;
  using layout_type = Layout;
  static constexpr bool kColumnMajor = Layout::kColumnMajor;

  /// An empty view (0 x 0, null data).
  constexpr ScaleView() = default;

  /// A view over `data` with logical extents (rows, cols). Errors:
  /// kInvalidShape for a negative extent; kLdTooSmall when the layout's ld is
  /// below its minimum (RowMajor: cols, ColMajor: rows); kNullPointer when
  /// data is null and the view addresses at least one element or padding
  /// slot (ColMajor at M == 0 with ld > 0).
  static Result<ScaleView> make(T* data, index_t rows, index_t cols, Layout layout = Layout{});

  /// Converts a mutable view to a read-only one.
  template <class U, class = std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value>>
  FP8SCALE_HOST_DEVICE constexpr ScaleView(const ScaleView<U, Layout>& other)  // NOLINT: implicit
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()), layout_(other.layout()) {}

  FP8SCALE_HOST_DEVICE constexpr T* data() const { return data_; }
  /// M: tokens.
  FP8SCALE_HOST_DEVICE constexpr index_t rows() const { return rows_; }
  /// G: groups per row.
  FP8SCALE_HOST_DEVICE constexpr index_t cols() const { return cols_; }
  FP8SCALE_HOST_DEVICE constexpr bool empty() const { return rows_ == 0 || cols_ == 0; }
  FP8SCALE_HOST_DEVICE constexpr const Layout& layout() const { return layout_; }

  /// Leading dimension: RowMajor / ColMajor: the layout's ld. P1: cols (its
  /// presented row stride). PerTensor: 0.
  FP8SCALE_HOST_DEVICE constexpr index_t ld() const { return layout_.leadingDim(rows_, cols_); }

  /// Stride of dimension 0 (m) or 1 (g), in elements. For P1 these are the
  /// presented strides (G, 1), not the ones its bytes have. The byte layouts
  /// have none (PackedUe8m0: see PackedUe8m0::wordStride).
  template <class L = Layout, class = std::enable_if_t<!L::kExponentBytes>>
  FP8SCALE_HOST_DEVICE constexpr index_t stride(int dim) const {
    return layout_.presentedStride(dim, cols_);
  }

  /// Elements the buffer must hold: every slot the view addresses, the
  /// padding slots of a column-major view included (cols * ld, also at
  /// rows == 0). make() refuses views whose span exceeds 2^48 bytes.
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan() const { return layout_.requiredSpan(rows_, cols_); }

  /// The layout's padded rectangle of this view's extents (layouts.hpp).
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded() const { return layout_.padded(rows_, cols_); }

  /// Whether the view has padding slots: column-major with ld > rows (ld =
  /// align(M, 4) with M % 4 != 0, or any ld > 0 at M == 0) and a column; an
  /// exponent layout addressing bytes that hold no exponent. See
  /// writeScalePadding() and zeroPadding().
  template <class L = Layout, class = std::enable_if_t<L::kAddressable>>
  FP8SCALE_HOST_DEVICE constexpr bool hasPadding() const {
    return padded().count() > 0;
  }

  /// Whether the view has padding slots in rows past its last (M): the
  /// padding a producer's padding tile writes.
  template <class L = Layout, class = std::enable_if_t<L::kAddressable>>
  FP8SCALE_HOST_DEVICE constexpr bool hasPaddingRows() const {
    return cols_ > 0 && padded().paddedRows > rows_;
  }

  /// Element (m, g). Not available on P1 (its strides do not describe its bytes).
  template <class L = Layout, class = std::enable_if_t<L::kAddressable>>
  FP8SCALE_HOST_DEVICE constexpr T& operator()(index_t m, index_t g) const {
    return data_[layout_.offset(m, g)];
  }

  /// Unchecked construction, for code that already validated (launchers,
  /// kernels slicing a view they were given).
  FP8SCALE_HOST_DEVICE static constexpr ScaleView fromValidated(T* data, index_t rows, index_t cols,
                                                                Layout layout) {
    return ScaleView(data, rows, cols, layout);
  }

 private:
  FP8SCALE_HOST_DEVICE constexpr ScaleView(T* data, index_t rows, index_t cols, Layout layout)
      : data_(data), rows_(rows), cols_(cols), layout_(layout) {}

  T* data_ = nullptr;
  index_t rows_ = 0;
  index_t cols_ = 0;
  Layout layout_{};
};

// ---------------------------------------------------------------------------
// Padding slots: one plan, one routine.
//
// A layout's padded rectangle (layouts.hpp, padded()) has slots that exist
// in memory but hold no scale: the rows [M, ld) of a column-major view, the
// rows and groups an exponent layout rounds its extents up to. A consumer
// reading whole TMA rows or tiles reads them, so every writer of a view (each
// producer, materialize, the host references) sets them to 0 and none leaves
// them to the allocator. Two routines write them, on the host and the
// device alike:
//   writeScalePadding(v, g, ...)  the rows past M of column g (and of the
//                                 padding columns after it, for the last g);
//                                 a producer runs one more row tile past the
//                                 rows, the tile that starts in [M, M +
//                                 tileRows) (a block-per-row producer: row M;
//                                 M == 0: the only tile), whose threads call
//                                 it for their columns: a launch covers
//                                 paddedRowTiles() tiles;
//   writeRowPadding(v, m)         the padding groups of row m < M, called by
//                                 the writer of the row's last scale
//                                 (storeScale).
// zeroPadding() is both over the whole view.
// ---------------------------------------------------------------------------

/// Rows tiles of `tileRows` rows a launch over `v` covers: the tiles holding
/// its rows, and one for its padding rows when it has any.
template <class T, class Layout>
FP8SCALE_HOST_DEVICE constexpr index_t paddedRowTiles(const ScaleView<T, Layout>& v, index_t tileRows) {
  return (v.rows() + tileRows - 1) / tileRows + (v.hasPaddingRows() ? 1 : 0);
}

/// Whether the row tile of `tileRows` rows starting at row `tileStart` is the
/// padding tile of `v` (the one past its rows; only when it has padding rows).
template <class T, class Layout>
FP8SCALE_HOST_DEVICE constexpr bool isPaddingTile(const ScaleView<T, Layout>& v, index_t tileStart,
                                                  index_t tileRows) {
  return tileStart >= v.rows() && tileStart - v.rows() < tileRows && v.hasPaddingRows();
}

namespace detail {

/// The padding groups [cols, align(cols, 4)) of a row of an exponent layout,
/// given `last`, the address of the row's group cols - 1: the bytes after it
/// in its 4-byte word (both layouts keep groups 4q .. 4q + 3 of a row in the
/// four bytes of one aligned word: kGroupsPerWord), so one address serves
/// them all.
template <class Layout, class T>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE void zeroWordTail(T* last, index_t cols) {
  static_assert(Layout::kGroupsPerWord == 4 && Layout::kGroupAlignment == 4,
                "a row's padding groups are the rest of its last 4-byte word");
  const int used = static_cast<int>(cols % Layout::kGroupsPerWord);  // 0: a whole last word, no padding
  if (used == 0) return;
  last[1] = T(0);  // predicated stores, no loop: the producers' registers are scarce here
  if (used <= 2) last[2] = T(0);
  if (used == 1) last[3] = T(0);
}

}  // namespace detail

/// Writes 0 to the padding slots (M + first, g), (M + first + stride, g), ...
/// of the rows past M of `v`, and for the last column (g == cols - 1) to the
/// same rows of the padding columns [cols, paddedCols). The threads of a
/// padding tile split a column's slots between them by `first` and `stride`.
/// Nothing for layouts without padding rows.
template <class T, class Layout>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE void writeScalePadding(const ScaleView<T, Layout>& v, index_t g,
                                                                 index_t first, index_t stride) {
  const detail::PaddedRect p = v.padded();
  for (index_t m = v.rows() + first; m < p.paddedRows; m += stride) {
    T* const slot = &v(m, g);
    *slot = T(0);
    if constexpr (Layout::kGroupAlignment > 1) {
      if (g + 1 == v.cols()) detail::zeroWordTail<Layout>(slot, v.cols());  // the padding groups of row m (writeRowPadding)
    }
  }
}

/// Writes 0 to the padding groups [cols, paddedCols) of row m (< M) of `v`:
/// exponent layouts whose G is not a multiple of 4. Nothing for the fp32
/// layouts.
template <class T, class Layout>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE void writeRowPadding(const ScaleView<T, Layout>& v, index_t m) {
  if constexpr (Layout::kGroupAlignment > 1) {
    if (v.cols() > 0) detail::zeroWordTail<Layout>(&v(m, v.cols() - 1), v.cols());
  } else {
    (void)v;
    (void)m;
  }
}

/// Writes 0 to every padding slot of `v`: the host writers' routine (the
/// references, materializeHost), the device routines over the whole view.
template <class T, class Layout>
void zeroPadding(const ScaleView<T, Layout>& v) {
  for (index_t g = 0; g < v.cols(); ++g) writeScalePadding(v, g, 0, 1);
  for (index_t m = 0; m < v.rows(); ++m) writeRowPadding(v, m);
}

template <class T, class Layout>
Result<ScaleView<T, Layout>> ScaleView<T, Layout>::make(T* data, index_t rows, index_t cols, Layout layout) {
  constexpr const char* fn = "ScaleView::make";
  if (rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "rows", "extent is negative", rows);
  if (cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "cols", "extent is negative", cols);
  index_t span = 0;  // elements addressed, computed without overflow
  if (Status s = layout.validate(fn, rows, cols, span); !s) return s;
  if (Status s = detail::checkSpan(fn, Layout::kSpanArgument, data, span, sizeof(T)); !s) return s;
  // A column-major view of M == 0 with ld > 0 still has padding slots to write.
  if (data == nullptr && span > 0)
    return Status::error(StatusCode::kNullPointer, fn, "data",
                         rows > 0 ? "null data for a non-empty view" : "null data for a view with padding slots");
  if (Status s = detail::checkAligned(fn, "data", data, static_cast<int>(alignof(T)),
                                      "pointer is not aligned to the element type");
      !s)
    return s;
  if constexpr (Layout::kDataAlignment > 0) {
    if (Status s = detail::checkAligned(fn, "data", data, Layout::kDataAlignment,
                                        "exponent layouts are read by TMA: 16-byte aligned pointer required");
        !s)
      return s;
  }
  return ScaleView(data, rows, cols, layout);
}

/// The `ld` argument of rowMajorView() / colMajorView() that selects the
/// contiguous default (G, or M). Any other negative ld is refused by make().
constexpr index_t kDefaultLd = -1;

/// Row-major (M, G) view; ld defaults to G (contiguous).
template <class T>
Result<ScaleView<T, RowMajor>> rowMajorView(T* data, index_t rows, index_t cols, index_t ld = kDefaultLd) {
  return ScaleView<T, RowMajor>::make(data, rows, cols, RowMajor{ld == kDefaultLd ? cols : ld});
}

/// Column-major (M, G) view, physical [G][ld]; ld defaults to M.
template <class T>
Result<ScaleView<T, ColMajor>> colMajorView(T* data, index_t rows, index_t cols, index_t ld = kDefaultLd) {
  return ScaleView<T, ColMajor>::make(data, rows, cols, ColMajor{ld == kDefaultLd ? rows : ld});
}

/// DeepGEMM's packed UE8M0 exponents of (M, G) scales, bytes of the int32
/// (M, ceil(G / 4)) tensor with strides (1, ld); ld defaults to align(M, 4).
inline Result<ScaleView<std::uint8_t, PackedUe8m0>> packedUe8m0View(std::uint8_t* data, index_t rows, index_t cols,
                                                                    index_t ld = kDefaultLd) {
  return ScaleView<std::uint8_t, PackedUe8m0>::make(data, rows, cols,
                                                    PackedUe8m0{ld == kDefaultLd ? detail::defaultPackedLd(rows) : ld});
}
inline Result<ScaleView<const std::uint8_t, PackedUe8m0>> packedUe8m0View(const std::uint8_t* data, index_t rows,
                                                                          index_t cols, index_t ld = kDefaultLd) {
  return ScaleView<const std::uint8_t, PackedUe8m0>::make(data, rows, cols,
                                                          PackedUe8m0{ld == kDefaultLd ? detail::defaultPackedLd(rows) : ld});
}

/// The 128 x 4 tiled UE8M0 exponents of (M, G) scales: a buffer of
/// ceil(M / 128) * ceil(G / 4) * 512 bytes.
inline Result<ScaleView<std::uint8_t, Swizzled128x4>> swizzled128x4View(std::uint8_t* data, index_t rows,
                                                                        index_t cols) {
  return ScaleView<std::uint8_t, Swizzled128x4>::make(data, rows, cols, Swizzled128x4::forCols(cols));
}
inline Result<ScaleView<const std::uint8_t, Swizzled128x4>> swizzled128x4View(const std::uint8_t* data, index_t rows,
                                                                              index_t cols) {
  return ScaleView<const std::uint8_t, Swizzled128x4>::make(data, rows, cols, Swizzled128x4::forCols(cols));
}

/// "P1": a contiguous (M, G) tensor whose bytes a producer wrote transposed.
template <class T>
Result<ScaleView<T, TransposedContiguous>> transposedContiguousView(T* data, index_t rows, index_t cols) {
  return ScaleView<T, TransposedContiguous>::make(data, rows, cols);
}

/// A per-tensor scale broadcast to (M, G).
template <class T>
Result<ScaleView<T, PerTensor>> perTensorView(T* data, index_t rows, index_t cols) {
  return ScaleView<T, PerTensor>::make(data, rows, cols);
}

// ---------------------------------------------------------------------------
// Re-viewing without copies.
// ---------------------------------------------------------------------------

/// P1 -> P2: the same pointer, read as column-major with strides (1, M). The
/// zero-copy step of the library; no memory is touched.
template <class T>
FP8SCALE_HOST_DEVICE constexpr ScaleView<T, ColMajor> asColumnMajor(ScaleView<T, TransposedContiguous> v) {
  return ScaleView<T, ColMajor>::fromValidated(v.data(), v.rows(), v.cols(), ColMajor{v.rows()});
}

/// Already column-major: returned as is (same pointer, same ld).
template <class T>
FP8SCALE_HOST_DEVICE constexpr ScaleView<T, ColMajor> asColumnMajor(ScaleView<T, ColMajor> v) {
  return v;
}

/// A row-major buffer holds row-major bytes: reading it as column-major
/// scrambles every scale once M >= 2 and G >= 2. Use materialize() to relayout,
/// or reinterpretAsTransposedBytes() if the bytes are known to be transposed.
template <class T>
ScaleView<T, ColMajor> asColumnMajor(ScaleView<T, RowMajor> v) = delete;

/// Scales in RowMajor / ColMajor / P1 are one value a slot: none of them holds
/// the bytes of the packed or tiled exponent layouts, so there is no re-view
/// into those; materializeHost() converts.
template <class T, class Layout>
void asPackedUe8m0(ScaleView<T, Layout> v) = delete;
template <class T, class Layout>
void asSwizzled128x4(ScaleView<T, Layout> v) = delete;

/// The explicit escape hatch: declares that a buffer typed row-major actually
/// holds transposed bytes (a producer ran with TRANSPOSE_SCALE into a tensor
/// allocated as (M, G)). Requires ld == cols (a contiguous presentation);
/// otherwise kInvalidShape naming 'ld'.
template <class T>
Result<ScaleView<T, TransposedContiguous>> reinterpretAsTransposedBytes(ScaleView<T, RowMajor> v) {
  if (v.ld() != v.cols())
    return Status::error(StatusCode::kInvalidShape, "reinterpretAsTransposedBytes", "ld",
                         "only a contiguous (M, G) presentation can hold transposed bytes", v.ld(), v.cols());
  return ScaleView<T, TransposedContiguous>::fromValidated(v.data(), v.rows(), v.cols(), TransposedContiguous{});
}

// ---------------------------------------------------------------------------
// Quantized tensors: fp8 data + scale view.
// ---------------------------------------------------------------------------

/// Row-major fp8 data [M, K] with row stride `ld` (elements = bytes), in
/// `Format` (E4M3FN or E4M3FNUZ).
template <class Format>
struct Fp8Matrix {
  std::uint8_t* data = nullptr;
  index_t rows = 0;
  index_t cols = 0;
  index_t ld = 0;
  FP8SCALE_HOST_DEVICE constexpr std::uint8_t& operator()(index_t m, index_t k) const {
    return data[RowMajor{ld}.offset(m, k)];
  }
};

/// What a producer returns: fp8 data [M, K] and its scales (M, K / groupSize)
/// in `ScaleLayout` (groupSize columns per scale; PerTensor: one scale).
template <class Format, class ScaleLayout, class ScaleT = typename ScaleLayout::Element>
struct QuantizedTensor {
  using format_type = Format;
  using scale_layout = ScaleLayout;
  Fp8Matrix<Format> data;
  ScaleView<ScaleT, ScaleLayout> scale;
  int groupSize = 0;
};

/// The "tuple" helper: re-views only the scale of a producer's output.
/// P1 scales become ColMajor{M} (no copy); ColMajor and PerTensor scales pass
/// through unchanged; the data is never touched.
template <class Format, class ScaleT>
constexpr QuantizedTensor<Format, ColMajor, ScaleT> viewTransposedScale(
    const QuantizedTensor<Format, TransposedContiguous, ScaleT>& q) {
  return {q.data, asColumnMajor(q.scale), q.groupSize};
}
template <class Format, class ScaleT>
constexpr QuantizedTensor<Format, ColMajor, ScaleT> viewTransposedScale(
    const QuantizedTensor<Format, ColMajor, ScaleT>& q) {
  return q;
}
template <class Format, class ScaleT>
constexpr QuantizedTensor<Format, PerTensor, ScaleT> viewTransposedScale(
    const QuantizedTensor<Format, PerTensor, ScaleT>& q) {
  return q;
}
/// Row-major scales are not transposed bytes; see asColumnMajor(RowMajor).
template <class Format, class ScaleT>
void viewTransposedScale(const QuantizedTensor<Format, RowMajor, ScaleT>& q) = delete;

}  // namespace fp8scale
