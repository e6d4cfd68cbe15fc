// fp8scale: the scale layouts, as mappings from (m, g) to buffer elements.
//
// ScaleView (scale_view.hpp) carries one of these as its layout; this header
// holds every layout's address math, its validation and its padding slots.
// The layouts and the consumers that read them are described in
// scale_view.hpp.
#pragma once

#include <cstdint>

#include "detail/span.hpp"
#include "platform.hpp"
#include "status.hpp"

namespace fp8scale {

// ---------------------------------------------------------------------------
// The layout mappings.
//
// A layout is a mapping from the logical (m, g) of an (M, G) = (rows, cols)
// scale matrix to an element of its buffer (CuTe's Layout, std::mdspan's
// layout mappings): all of the library's address math for scales is here,
// and ScaleView, the producers, materialize and the references ask the
// mapping rather than the layout's name. Every mapping provides
//
//   offset(m, g)                   the element of (m, g) (not P1: its
//                                  presented strides do not describe its bytes)
//   leadingDim(rows, cols)         the ld a caller hands over with the pointer
//   requiredSpan(rows, cols)       elements addressed, padding slots included
//   validate(fn, rows, cols, span) its parameters against the extents, naming
//                                  the argument; span = requiredSpan computed
//                                  without overflow (kSpanTooLarge past 2^48)
//   padded(rows, cols)             its padded rectangle: the slots of
//                                  [0, paddedRows) x [0, paddedCols) that
//                                  are not scales are its padding, addressed
//                                  memory that holds no scale and that every
//                                  writer sets to 0 (scale_view.hpp)
//
// and the traits kAddressable (has offset), kColumnMajor (fp32 [G][ld]: rows
// [M, ld) of each column are its padding; what TRANSPOSE_SCALE = true
// writes), kMnMajor (rows are the contiguous dimension of the stored scales:
// producers tile rows-fastest so that their scale stores fill sectors),
// kPadsRows (the layout may own padding rows past M: kernels for it carry
// the padding code), kStridedScales (fp32 scales at strides (ld, 1) or
// (1, ld), the layouts materialize reads), kExponentBytes (UE8M0 exponent
// bytes), kDataAlignment (bytes the data pointer needs beyond alignof(T);
// 0: none), kGroupAlignment (G is padded to a multiple of it: 1, no padding
// groups) and kSpanArgument (the argument an oversized span is blamed on);
// Element is what a slot stores (float, or std::uint8_t exponents).
// ---------------------------------------------------------------------------

/// Rounds `m` up to a multiple of `alignment` (> 0): align(M, 4) of TMA-aligned
/// scale buffers.
FP8SCALE_HOST_DEVICE constexpr index_t alignUp(index_t m, index_t alignment) {
  return (m + alignment - 1) / alignment * alignment;
}

namespace detail {
/// A layout's padding: the slots of the padded rectangle [0, paddedRows) x
/// [0, paddedCols) outside the scales' [0, rows) x [0, cols), enumerated
/// (slot) first along the rows that hold scales (groups [cols, paddedCols)),
/// then the rows past them. No columns, no padding.
struct PaddedRect {
  index_t rows, cols, paddedRows, paddedCols;
  FP8SCALE_HOST_DEVICE constexpr index_t count() const {
    // The rows past M, then the padding groups of the rows before it: no
    // product of two extents that a broadcast (PerTensor) view may not span.
    return cols == 0 ? 0 : (paddedRows - rows) * paddedCols + rows * (paddedCols - cols);
  }
  /// The (m, g) of padding slot i.
  FP8SCALE_HOST_DEVICE constexpr void slot(index_t i, index_t& m, index_t& g) const {
    const index_t inRows = rows * (paddedCols - cols);
    if (i < inRows) {
      m = i / (paddedCols - cols);
      g = cols + i % (paddedCols - cols);
    } else {
      m = rows + (i - inRows) / paddedCols;
      g = (i - inRows) % paddedCols;
    }
  }
};

/// kInvalidShape for an extent past 2^48: one byte a slot cannot fit (and the
/// padding arithmetic would overflow).
inline Status checkByteExtents(const char* fn, index_t rows, index_t cols) {
  if (rows > kMaxSpanBytes || cols > kMaxSpanBytes)
    return Status::error(StatusCode::kInvalidShape, fn, rows > kMaxSpanBytes ? "rows" : "cols",
                         "extent spans more than 2^48 bytes", rows > kMaxSpanBytes ? rows : cols, kMaxSpanBytes);
  return Status::ok();
}
}  // namespace detail

/// (m, g) -> m * ld + g. Strides (ld, 1), ld >= G. No padding slots (row-major
/// rows are the buffer's outer dimension).
struct RowMajor {
  index_t ld = 0;
  static constexpr bool kAddressable = true, kColumnMajor = false, kMnMajor = false, kPadsRows = false,
                        kStridedScales = true, kExponentBytes = false;
  static constexpr int kDataAlignment = 0;
  static constexpr int kGroupAlignment = 1;
  static constexpr const char* kSpanArgument = "ld";
  using Element = float;
  FP8SCALE_HOST_DEVICE constexpr index_t offset(index_t m, index_t g) const { return m * ld + g; }
  FP8SCALE_HOST_DEVICE constexpr index_t stride(int dim) const { return dim == 0 ? ld : 1; }
  FP8SCALE_HOST_DEVICE constexpr index_t presentedStride(int dim, index_t /*cols*/) const { return stride(dim); }
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t) const { return ld; }
  /// Elements addressed: (rows - 1) * ld + cols (mdspan's required_span_size).
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t rows, index_t cols) const {
    return (rows == 0 || cols == 0) ? 0 : (rows - 1) * ld + cols;
  }
  /// The smallest legal ld for `cols` groups.
  static constexpr index_t minLd(index_t /*rows*/, index_t cols) { return cols; }
  Status validate(const char* fn, index_t rows, index_t cols, index_t& span) const {
    if (ld < cols)
      return Status::error(StatusCode::kLdTooSmall, fn, "ld", "row-major ld is smaller than cols", ld, cols);
    span = detail::stridedSpan(rows, cols, ld);
    return Status::ok();
  }
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, rows, cols};
  }
};

/// (m, g) -> g * ld + m. Strides (1, ld), ld >= M. The layout owns the padding
/// slots [M, ld) of each column: they are addressed memory that every writer
/// sets, so requiredSpan() is cols * ld whatever M is (M == 0 included).
struct ColMajor {
  index_t ld = 0;
  static constexpr bool kAddressable = true, kColumnMajor = true, kMnMajor = true, kPadsRows = true,
                        kStridedScales = true, kExponentBytes = false;
  static constexpr int kDataAlignment = 0;
  static constexpr int kGroupAlignment = 1;
  static constexpr const char* kSpanArgument = "ld";
  using Element = float;
  FP8SCALE_HOST_DEVICE constexpr index_t offset(index_t m, index_t g) const { return g * ld + m; }
  FP8SCALE_HOST_DEVICE constexpr index_t stride(int dim) const { return dim == 0 ? 1 : ld; }
  FP8SCALE_HOST_DEVICE constexpr index_t presentedStride(int dim, index_t /*cols*/) const { return stride(dim); }
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t) const { return ld; }
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t /*rows*/, index_t cols) const { return cols * ld; }
  static constexpr index_t minLd(index_t rows, index_t /*cols*/) { return rows; }
  Status validate(const char* fn, index_t rows, index_t cols, index_t& span) const {
    if (ld < rows)
      return Status::error(StatusCode::kLdTooSmall, fn, "ld", "column-major ld is smaller than rows", ld, rows);
    span = detail::spanMul(cols, ld);
    return Status::ok();
  }
  /// Slots m in [rows, ld) of each column: addressed by offset(m, g) like the
  /// scales, holding no scale.
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, ld, cols};
  }
};

/// Column-major bytes [G][M] under a contiguous (M, G) presentation ("P1").
/// Reports the strides it is presented with, (G, 1), which are wrong for its
/// bytes; has no offset(), so elements cannot be read through it.
struct TransposedContiguous {
  static constexpr bool kAddressable = false, kColumnMajor = false, kMnMajor = false, kPadsRows = false,
                        kStridedScales = false, kExponentBytes = false;
  static constexpr int kDataAlignment = 0;
  static constexpr int kGroupAlignment = 1;
  static constexpr const char* kSpanArgument = "cols";
  using Element = float;
  FP8SCALE_HOST_DEVICE constexpr index_t presentedStride(int dim, index_t cols) const { return dim == 0 ? cols : 1; }
  /// Its presented row stride, cols.
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t cols) const { return cols; }
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t rows, index_t cols) const { return rows * cols; }
  Status validate(const char*, index_t rows, index_t cols, index_t& span) const {
    span = detail::spanMul(rows, cols);
    return Status::ok();
  }
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, rows, cols};
  }
};

/// One scale broadcast over all (m, g). Strides (0, 0).
struct PerTensor {
  static constexpr bool kAddressable = true, kColumnMajor = false, kMnMajor = false, kPadsRows = false,
                        kStridedScales = false, kExponentBytes = false;
  static constexpr int kDataAlignment = 0;
  static constexpr int kGroupAlignment = 1;
  static constexpr const char* kSpanArgument = "cols";
  using Element = float;
  FP8SCALE_HOST_DEVICE constexpr index_t offset(index_t, index_t) const { return 0; }
  FP8SCALE_HOST_DEVICE constexpr index_t stride(int) const { return 0; }
  FP8SCALE_HOST_DEVICE constexpr index_t presentedStride(int, index_t) const { return 0; }
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t) const { return 0; }
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t, index_t) const { return 1; }
  /// The one scale is addressed only when the view has an element.
  Status validate(const char*, index_t rows, index_t cols, index_t& span) const {
    span = rows > 0 && cols > 0 ? 1 : 0;
    return Status::ok();
  }
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, rows, cols};
  }
};

/// DeepGEMM's packed UE8M0 scales (SM100 FP8 GEMMs with 1 x 128 or 1 x 32
/// activation groups): the UE8M0 exponent bytes of groups 4w .. 4w + 3 of
/// row m are the little-endian bytes 0..3 of int32 word w * ld + m, so the
/// consumer's tensor is int32 (M, ceil(G / 4)) with strides (1, ld) and
/// ld = align(M, 4) (DeepGEMM get_mn_major_tma_aligned_packed_ue8m0_tensor,
/// vLLM per_token_group_quant_8bit_packed). The words are MN-major, but a
/// byte view is not the fp32 column-major layout (kColumnMajor is false):
/// offset(m, g) = ((g / 4) * ld + m) * 4 + g % 4.
///
/// Padding slots, which every writer sets to 0: the rows [M, ld) of every
/// word column, and in rows [0, M) the bytes of groups [G, align(G, 4)).
/// ld is a multiple of 4 (TMA strides are multiples of 16 bytes), >= M.
struct PackedUe8m0 {
  index_t ld = 0;  ///< int32 words from one word column to the next
  static constexpr bool kAddressable = true, kColumnMajor = false, kMnMajor = true, kPadsRows = true,
                        kStridedScales = false, kExponentBytes = true;
  static constexpr int kDataAlignment = 16;  // read by TMA
  static constexpr int kGroupAlignment = 4;   // groups a 32-bit word
  static constexpr const char* kSpanArgument = "ld";
  using Element = std::uint8_t;
  /// Groups per int32 word: groups 4w .. 4w + 3 of a row are its four bytes.
  static constexpr index_t kGroupsPerWord = 4;
  FP8SCALE_HOST_DEVICE constexpr index_t offset(index_t m, index_t g) const {
    return ((g / kGroupsPerWord) * ld + m) * kGroupsPerWord + g % kGroupsPerWord;
  }
  /// Strides of the consumer's int32 (M, ceil(G / 4)) tensor, in words.
  FP8SCALE_HOST_DEVICE constexpr index_t wordStride(int dim) const { return dim == 0 ? 1 : ld; }
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t) const { return ld; }
  /// Bytes addressed: ceil(G / 4) word columns of ld words, at any M.
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t /*rows*/, index_t cols) const {
    return (cols + kGroupsPerWord - 1) / kGroupsPerWord * ld * kGroupsPerWord;
  }
  static constexpr index_t minLd(index_t rows, index_t /*cols*/) { return alignUp(rows, kGroupsPerWord); }
  Status validate(const char* fn, index_t rows, index_t cols, index_t& span) const {
    if (Status s = detail::checkByteExtents(fn, rows, cols); !s) return s;
    if (ld < minLd(rows, cols))
      return Status::error(StatusCode::kLdTooSmall, fn, "ld", "packed UE8M0 ld is smaller than align(rows, 4)", ld,
                           minLd(rows, cols));
    if (ld % kGroupsPerWord != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "ld",
                           "packed UE8M0 ld must be a multiple of 4 words (16-byte TMA strides)", ld);
    span = detail::spanMul(detail::spanMul((cols + 3) / 4, ld), kGroupsPerWord);
    return Status::ok();
  }
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, ld, alignUp(cols, kGroupsPerWord)};
  }
};

/// The 128 x 4 tiled UE8M0 scale layout of Blackwell block-scaled MMA: cuBLASLt's
/// VEC32_UE8M0 scale mode (MXFP8, groups of 32; cuBLAS "1D Block Scaling Factors
/// Layout"), cuDNN's 128x4 layout, CUTLASS's block-scaled SM100 configs. The
/// (M, G) exponents, padded to align(M, 128) rows and align(G, 4) groups, are
/// cut into tiles of 128 rows x 4 groups, 512 bytes each, tiles row-major
/// (tile (m / 128, g / 4) at (m / 128) * ceil(G / 4) + g / 4); inside a tile,
/// row r = m % 128 and group c = g % 4 are at byte (r % 32) * 16 + (r / 32) * 4 + c.
///
/// Padding slots, which every writer sets to 0: rows [M, align(M, 128)) and
/// groups [G, align(G, 4)).
struct Swizzled128x4 {
  index_t colTiles = 0;  ///< ceil(G / 4): tiles across a band of 128 rows
  static constexpr bool kAddressable = true, kColumnMajor = false, kMnMajor = false, kPadsRows = true,
                        kStridedScales = false, kExponentBytes = true;
  static constexpr int kDataAlignment = 16;  // read by TMA
  static constexpr int kGroupAlignment = 4;   // groups a tile column
  static constexpr const char* kSpanArgument = "cols";
  using Element = std::uint8_t;
  static constexpr index_t kTileRows = 128;
  static constexpr index_t kTileCols = 4;
  /// Groups 4q .. 4q + 3 of a row are four consecutive bytes, 4-aligned.
  static constexpr index_t kGroupsPerWord = kTileCols;
  static constexpr index_t kTileBytes = kTileRows * kTileCols;
  /// The layout of (rows, cols) exponents.
  static constexpr Swizzled128x4 forCols(index_t cols) {
    return Swizzled128x4{cols <= 0 ? 0 : cols / kTileCols + (cols % kTileCols != 0 ? 1 : 0)};
  }
  FP8SCALE_HOST_DEVICE constexpr index_t offset(index_t m, index_t g) const {
    const index_t tile = (m / kTileRows) * colTiles + g / kTileCols;
    const index_t r = m % kTileRows;
    return tile * kTileBytes + (r % 32) * 16 + (r / 32) * kTileCols + g % kTileCols;
  }
  /// No ld: the tiles are packed.
  FP8SCALE_HOST_DEVICE constexpr index_t leadingDim(index_t, index_t) const { return 0; }
  static constexpr index_t minLd(index_t, index_t) { return 0; }
  /// Bytes addressed: whole tiles, ceil(M / 128) x ceil(G / 4) of them.
  FP8SCALE_HOST_DEVICE constexpr index_t requiredSpan(index_t rows, index_t /*cols*/) const {
    return (rows + kTileRows - 1) / kTileRows * colTiles * kTileBytes;
  }
  Status validate(const char* fn, index_t rows, index_t cols, index_t& span) const {
    if (Status s = detail::checkByteExtents(fn, rows, cols); !s) return s;
    if (colTiles != forCols(cols).colTiles)
      return Status::error(StatusCode::kInvalidShape, fn, "layout",
                           "Swizzled128x4::colTiles must be ceil(cols / 4) (use Swizzled128x4::forCols)", colTiles,
                           forCols(cols).colTiles);
    span = detail::spanMul(detail::spanMul((rows + 127) / 128, colTiles), kTileBytes);
    return Status::ok();
  }
  FP8SCALE_HOST_DEVICE constexpr detail::PaddedRect padded(index_t rows, index_t cols) const {
    return {rows, cols, alignUp(rows, kTileRows), colTiles * kTileCols};
  }
};

namespace detail {
/// align(rows, 4), the packed ld DeepGEMM allocates; extents past 2^48 are
/// passed through for make() to refuse.
constexpr index_t defaultPackedLd(index_t rows) {
  return rows >= 0 && rows <= kMaxSpanBytes ? alignUp(rows, PackedUe8m0::kGroupsPerWord) : rows;
}
}  // namespace detail

}  // namespace fp8scale
