// fp8scale: per-token-group fp8 quantization with a compile-time
// TRANSPOSE_SCALE.
//
// x[M, K] (any row stride), or x[M, H, D] flattened to [M, H * D] with any
// token and head strides (the MLA o_proj input), is quantized in groups of
// groupSize columns into q[M, K] (fp8, row stride ldq) and one scale per
// (row, group) written through a ScaleView: RowMajor{ld} when TRANSPOSE_SCALE
// is false, ColMajor{ld} (the consumer's [G][ld] bytes, padding slots zeroed)
// when it is true. One kernel body serves both; it indexes only through the
// view. Numerics: README "Numerics"; bit-identical to reference::groupQuant.
//
// Work mapping: a thread owns 32 contiguous input bytes of one group (two
// 16-byte loads: 16 bf16/fp16 or 8 fp32 values), so a group of 128 bf16 is 8
// lanes and a 256-thread block holds 32 groups, arranged as a tile of
// kTileRows x kTileGroups (row, group) pairs. The tile is row-major-friendly
// (8 groups of one row: one 32-byte sector of row-major scales) or
// column-major-friendly (8 rows of one group: one sector of [G][ld] scales),
// chosen by TRANSPOSE_SCALE, so scale stores are whole sectors either way.
#pragma once

#include <cstdint>

#include "common.hpp"

namespace fp8scale {

/// The input of group quant: element (m, k) with k = h * D + d lives at
/// x[m * tokenStride + h * headStride + d]. A plain matrix is H = 1. With
/// H > 1 the strides are free (the input is only read): [M, H, D] row-major
/// (tokenStride = H * D, headStride = D) and the transposed [H, M, D] of a
/// batched attention output (tokenStride = D, headStride = M * D) are both
/// legal; both must be multiples of the 16-byte vector in bytes.
template <class In>
struct GroupQuantInput {
  const In* x = nullptr;
  index_t rows = 0;         ///< M (tokens)
  index_t heads = 1;        ///< H
  index_t headDim = 0;      ///< D; K = H * D
  index_t tokenStride = 0;  ///< elements between rows
  index_t headStride = 0;   ///< elements between heads of one row

  /// x[M, K] with row stride ldx.
  static GroupQuantInput matrix(const In* x, index_t M, index_t K, index_t ldx) { return {x, M, 1, K, ldx, K}; }
  /// x[M, H, D] with the given token and head strides (elements).
  static GroupQuantInput headMajor(const In* x, index_t M, index_t H, index_t D, index_t tokenStride,
                                   index_t headStride) {
    return {x, M, H, D, tokenStride, headStride};
  }
  FP8SCALE_HOST_DEVICE constexpr index_t cols() const { return heads * headDim; }
};

/// Tuning of the group-local producers (group quant, SiLU-clamp quant).
template <class In>
struct GroupTilePolicy {
  static constexpr int kThreads = 256;
  static constexpr int kLoadsPerThread = 2;
  static constexpr int kElems = kLoadsPerThread * detail::kVecElems<In>;  // values per thread
  /// fp32 scales per 32-byte sector: the tile edge along the scale layout's
  /// contiguous dimension.
  static constexpr int kSectorScales = 8;
};

namespace detail {

/// Picks the (rows x groups) tile of one block: groupsPerBlock slots, the
/// scale layout's contiguous dimension `sector` wide when the shape allows.
template <bool TRANSPOSE_SCALE>
inline void chooseTile(int groupsPerBlock, int sector, index_t G, int& tileRows, int& tileGroups) {
  int fitG = 1;
  while (fitG < G && fitG < groupsPerBlock) fitG *= 2;  // next power of two >= G, capped
  if (TRANSPOSE_SCALE) {
    tileRows = groupsPerBlock >= sector ? sector : groupsPerBlock;
    tileGroups = groupsPerBlock / tileRows;
    if (tileGroups > fitG) {
      tileGroups = fitG;
      tileRows = groupsPerBlock / tileGroups;
    }
  } else {
    tileGroups = fitG < sector ? fitG : sector;
    tileRows = groupsPerBlock / tileGroups;
  }
}

#if defined(FP8SCALE_HAS_DEVICE)

/// Loads the kElems values of group-slice (m, k .. k + kElems) of x.
template <class In>
struct PlainLoad {
  GroupQuantInput<In> in;
  template <int kElems>
  FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void operator()(index_t m, index_t k, float (&v)[kElems]) const {
    const index_t h = k / in.headDim;
    const In* src = in.x + m * in.tokenStride + h * in.headStride + (k - h * in.headDim);  // x(m, h, d)
#pragma unroll
    for (int i = 0; i < kElems; i += kVecElems<In>) loadVec(src + i, v + i);
  }
};

/// The tiled body shared by group quant and SiLU-clamp quant. `load(m, k, v)`
/// produces the fp32 values of columns [k, k + kElems) of row m.
template <class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kElems, class Load>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void groupTile(const Load& load, index_t rows, index_t groups,
                                                    Fp8Matrix<Format> q,
                                                    ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale,
                                                    float fmax, float eps, int tileRows, int tileGroups,
                                                    index_t groupTiles) {
  constexpr int kLanes = kGroup / kElems;  // threads per group
  static_assert(kGroup % kElems == 0, "a group is a whole number of thread slices");
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;

  // Tile coordinates; the scale layout's contiguous dimension is fastest.
  const index_t tileM = static_cast<index_t>(blockIdx.x) / groupTiles;
  const index_t tileG = static_cast<index_t>(blockIdx.x) - tileM * groupTiles;
  const int r = TRANSPOSE_SCALE ? slot % tileRows : slot / tileGroups;
  const int c = TRANSPOSE_SCALE ? slot / tileRows : slot % tileGroups;
  const index_t m = tileM * tileRows + r;
  const index_t g = tileG * tileGroups + c;
  if (m >= rows || g >= groups) return;  // the whole group's lanes leave together

  // Load
  const index_t k = g * kGroup + lane * kElems;
  float v[kElems];
  load(m, k, v);  // (M, K) slice

  // Reduce, scale, convert, store
  const float s = quantizeGroupSlice<Format, Rule, kLanes, kElems>(v, &q(m, k), fmax, eps);
  if (lane == 0) storeScale(scale, m, g, s);  // (M, G)
  zeroScalePadding<kLanes>(scale, m, g, lane);
}

template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE>
FP8SCALE_GLOBAL void __launch_bounds__(GroupTilePolicy<In>::kThreads)
    groupQuantKernel(GroupQuantInput<In> in, Fp8Matrix<Format> q,
                     ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale, float fmax, float eps, int tileRows,
                     int tileGroups, index_t groupTiles) {
  groupTile<Format, Rule, kGroup, TRANSPOSE_SCALE, GroupTilePolicy<In>::kElems>(
      PlainLoad<In>{in}, in.rows, in.cols() / kGroup, q, scale, fmax, eps, tileRows, tileGroups, groupTiles);
}

/// groupQuantKernel for a rule and group size, in the form launchGroupTile takes.
template <class In, class Format, bool TRANSPOSE_SCALE>
struct GroupQuantKernelFor {
  template <class Rule, int kGroup>
  struct Of {
    static auto kernel() { return &groupQuantKernel<In, Format, Rule, kGroup, TRANSPOSE_SCALE>; }
  };
};

/// Grid size and tile of a group-tile launch; kInvalidShape past the grid limit.
template <class In, bool TRANSPOSE_SCALE>
inline Status groupTileGrid(const char* fn, index_t rows, index_t groups, int groupSize, dim3& grid, int& tileRows,
                            int& tileGroups, index_t& groupTiles) {
  const int groupsPerBlock = GroupTilePolicy<In>::kThreads / (groupSize / GroupTilePolicy<In>::kElems);
  chooseTile<TRANSPOSE_SCALE>(groupsPerBlock, GroupTilePolicy<In>::kSectorScales, groups, tileRows, tileGroups);
  groupTiles = (groups + tileGroups - 1) / tileGroups;
  const index_t blocks = ((rows + tileRows - 1) / tileRows) * groupTiles;
  if (!fitsOneGrid(blocks, GroupTilePolicy<In>::kThreads))
    return Status::error(StatusCode::kInvalidShape, fn, "M", "too many groups for one launch", rows);
  grid = dim3(static_cast<unsigned>(blocks));
  return Status::ok();
}

/// The launch shared by the group-tile producers: grid and tile, then the
/// rule x group-size dispatch to KernelFor<Rule, kGroup>::kernel(), called
/// with (args..., eps, tileRows, tileGroups, groupTiles).
template <class In, bool TRANSPOSE_SCALE, template <class, int> class KernelFor, class... Args>
Status launchGroupTile(const char* fn, index_t rows, index_t groups, const QuantOptions& opt, Stream stream,
                       Args... args) {
  dim3 grid;
  int tileRows = 0, tileGroups = 0;
  index_t groupTiles = 0;
  if (Status s = groupTileGrid<In, TRANSPOSE_SCALE>(fn, rows, groups, opt.groupSize, grid, tileRows, tileGroups,
                                                    groupTiles);
      !s)
    return s;
  return dispatchRuleAndGroup(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    const DeviceError e = launchKernel(KernelFor<decltype(rule), decltype(group)::value>::kernel(), grid,
                                       dim3(GroupTilePolicy<In>::kThreads), 0, stream, args..., opt.eps, tileRows,
                                       tileGroups, groupTiles);
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice(fn, e);
  });
}

#endif  // FP8SCALE_HAS_DEVICE

/// Argument checks of group quant (host side, also used by tests).
template <class Format, class In, class Layout>
Status checkGroupQuant(const char* fn, const GroupQuantInput<In>& in, const Fp8Matrix<Format>& q,
                       const ScaleView<float, Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkQuantOptions<Format>(fn, opt, fmax); !s) return s;
  if (in.heads < 1) return Status::error(StatusCode::kInvalidShape, fn, "heads", "must be >= 1", in.heads);
  if (in.headDim < 0) return Status::error(StatusCode::kInvalidShape, fn, "headDim", "extent is negative", in.headDim);
  QuantArgs a = quantArgs(in.x, in.rows, in.cols(), in.tokenStride, static_cast<int>(sizeof(In)), q, scale,
                          opt.groupSize);
  if (in.heads > 1) {
    if (isSupportedGroupSize(opt.groupSize) && in.headDim % opt.groupSize != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "headDim", "a group may not straddle two heads", in.headDim,
                           opt.groupSize);
    if (in.tokenStride < 0 || in.headStride < 0)
      return Status::error(StatusCode::kInvalidShape, fn, in.tokenStride < 0 ? "tokenStride" : "headStride",
                           "stride is negative", in.tokenStride < 0 ? in.tokenStride : in.headStride);
    if (in.rows > 0 && (in.headStride * a.inputBytes) % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "headStride",
                           "head stride in bytes is not a multiple of the 16-byte vector load", in.headStride, 16);
    if (in.rows > 0 && (in.tokenStride * a.inputBytes) % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "tokenStride",
                           "token stride in bytes is not a multiple of the 16-byte vector load", in.tokenStride, 16);
    a.ldx = a.cols;  // checked above; with free strides, rows may interleave
  }
  if (q.rows != in.rows || q.cols != in.cols())
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the input's (M, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols());
  return checkQuantArgs(fn, a, 16, GroupTilePolicy<In>::kElems);
}

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// Quantizes `in` into `q` and `scale` on `stream`.
///
/// @tparam Format  E4M3FN or E4M3FNUZ
/// @tparam Layout  RowMajor (TRANSPOSE_SCALE = false) or ColMajor
///                 (TRANSPOSE_SCALE = true: [G][ld] bytes, padding zeroed)
/// @tparam In      float, BFloat16 or Float16
/// @param in     x[M, K] or x[M, H, D]; x, row and head strides 16-byte aligned
/// @param q      fp8 output [M, K], row stride q.ld; pointer and ld aligned to
///               the per-thread store (16 bytes for 16-bit inputs, 8 for fp32)
/// @param scale  (M, K / groupSize) view of device memory
/// @return the QuantizedTensor {q, scale}: the producer's own buffers, no copy.
/// Errors (nothing is launched): kUnsupportedGroupSize, kInvalidShape (K % group,
/// extents), kLdTooSmall, kNullPointer, kMisaligned, kInvalidValue (fmax, eps),
/// kDeviceError (launch). M == 0 launches no kernel and succeeds; a column-major
/// view with ld > 0 is then all padding and is cleared with one memset.
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> groupQuant(const GroupQuantInput<In>& in, Fp8Matrix<Format> q,
                                                   ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                   Stream stream) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  float fmax = 0.0f;
  if (Status s = detail::checkGroupQuant("groupQuant", in, q, scale, opt, fmax); !s) return s;
  QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  const index_t groups = in.cols() / opt.groupSize;
  if (in.rows == 0 || groups == 0) {
    if (Status s = detail::clearEmptyScalePadding("groupQuant", scale, stream); !s) return s;
    return out;
  }
  const Status launched =
      detail::launchGroupTile<In, TRANSPOSE_SCALE, detail::GroupQuantKernelFor<In, Format, TRANSPOSE_SCALE>::template Of>(
          "groupQuant", in.rows, groups, opt, stream, in, q, scale, fmax);
  if (!launched) return launched;
  return out;
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
