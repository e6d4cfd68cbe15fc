// fp8scale spec: group quant's input and argument checks. Host code only
// (no kernels): producers/group_quant.hpp includes it, and so may host code
// that checks arguments without the device producers.
#pragma once

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"
#include "quant_options.hpp"

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

namespace detail {

/// Bytes of fp8 one thread of the group-tile producers (group quant,
/// SiLU-clamp quant) stores at once, 16 for bf16 / fp16 input, 8 for fp32
/// (two 16-byte input vectors: GroupTilePolicy::kElems): q and ldq must be
/// multiples of it.
template <class In>
constexpr int kGroupTileStoreBytes = 2 * kVecElems<In>;

/// The kernel finds a column's head with 32-bit division.
constexpr index_t kMaxHeadMajorCols = 2147483647;

/// Argument checks of group quant, in this order: options, heads and
/// strides, the fp8 output's extents, then checkQuantArgs.
template <class Format, class In, class Layout>
Status checkGroupQuant(const char* fn, const GroupQuantInput<In>& in, const Fp8Matrix<Format>& q,
                       const ScaleOutput<Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkProducerOptions<Format, Layout>(fn, opt, fmax); !s) return s;
  if (in.heads < 1) return Status::error(StatusCode::kInvalidShape, fn, "heads", "must be >= 1", in.heads);
  // A matrix input (H = 1) names its column count K, as the caller passed it.
  if (in.headDim < 0)
    return Status::error(StatusCode::kInvalidShape, fn, in.heads == 1 ? "K" : "headDim", "extent is negative",
                         in.headDim);
  if (spanMul(in.heads, in.headDim) < 0)
    return Status::error(StatusCode::kInvalidShape, fn, in.heads == 1 ? "K" : "heads",
                         "H * D spans more than 2^48 elements", in.heads == 1 ? in.headDim : in.heads);
  QuantArgs a = quantArgs(in.x, in.rows, in.cols(), in.tokenStride, static_cast<int>(sizeof(In)), q, scale,
                          opt.groupSize);
  if (in.heads > 1) {
    if (isSupportedGroupSize(opt.groupSize) && in.headDim % opt.groupSize != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "headDim", "a group may not straddle two heads", in.headDim,
                           opt.groupSize);
    if (in.tokenStride < 0 || in.headStride < 0)
      return Status::error(StatusCode::kInvalidShape, fn, in.tokenStride < 0 ? "tokenStride" : "headStride",
                           "stride is negative", in.tokenStride < 0 ? in.tokenStride : in.headStride);
    if (in.rows > 0 && !isWholeVectors(in.headStride, a.inputBytes, 16))
      return Status::error(StatusCode::kMisaligned, fn, "headStride",
                           "head stride in bytes is not a multiple of the 16-byte vector load", in.headStride, 16);
    if (in.rows > 0 && !isWholeVectors(in.tokenStride, a.inputBytes, 16))
      return Status::error(StatusCode::kMisaligned, fn, "tokenStride",
                           "token stride in bytes is not a multiple of the 16-byte vector load", in.tokenStride, 16);
    a.ldx = a.cols;  // checked above; with free strides, rows may interleave
    // Element (m, h, d) at m * tokenStride + h * headStride + d.
    // rows < 0 is refused by checkQuantArgs below; rows - 1 must not be formed for it.
    a.inputSpan = in.rows <= 0 || in.headDim == 0
                      ? 0
                      : spanAdd(spanAdd(spanMul(in.rows - 1, in.tokenStride), spanMul(in.heads - 1, in.headStride)),
                                in.headDim);
    if (in.cols() > kMaxHeadMajorCols)
      return Status::error(StatusCode::kInvalidShape, fn, "K", "H * D of a head-major input must be < 2^31",
                           in.cols(), kMaxHeadMajorCols);
  }
  if (q.rows != in.rows || q.cols != in.cols())
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the input's (M, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols());
  return checkQuantArgs(fn, a, 16, kGroupTileStoreBytes<In>);
}

}  // namespace detail
}  // namespace fp8scale
