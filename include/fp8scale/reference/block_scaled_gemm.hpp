// fp8scale: host references of the block-scaled GEMM consumer: 128 x 128
// weight block quantization (bit-exact specification of weightBlockQuant) and
// an fp64 GEMM of dequantized operands, the yardstick for cuBLASLt's output.
//
// The GEMM reference computes, for activations x (1 x 128 groups, scale
// xs(m, g)) and a block-quantized weight w (128 x 128 blocks, scale
// ws(n / 128, g)):
//
//   Y(m, n) = sum_g  xs(m, g) * ws(n / 128, g) * sum_{k in group g} xq(m, k) * wq(n, k)
//
// which is cuBLAS's definition of 128-element 1D x 128x128 2D block scaling
// (cuBLAS documentation, section 3.1.4.5, "128-element 1D and 128x128 2D Block
// Scaling For FP8 Data Types"). The inner sums are exact in double: a product
// of two e4m3 values has at most 8 significant bits and lies in [2^-18, 2^18),
// so 128 of them add up without rounding in a 53-bit significand, in any
// order. The result is therefore independent of the loop order and thread
// split; only the K / 128 scaled group sums per output are rounded, in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <new>
#include <type_traits>
#include <vector>

#include "../spec/weight_block_quant.hpp"
#include "group_quant.hpp"

namespace fp8scale {
namespace reference {

/// Host 128 x 128 block quantization of W[N, K] into q[N, K] and scale
/// (ceil(N / 128), K / 128): per block amax = max(max |v| ignoring NaN, eps),
/// s = Rule(amax / fmax), q = encode(v * (1 / s)); scale padding slots
/// [K / 128, ld) set to 0. The specification weightBlockQuant() equals bit for bit.
/// Errors: as detail::checkWeightBlockQuant (no alignment demands on the host).
template <class Format, class Rule, class In>
Status weightBlockQuant(const WeightQuantInput<In>& in, Fp8Matrix<Format> q, ScaleView<float, RowMajor> scale,
                        float fmax = Format::kMax, float eps = kDefaultAmaxEps) {
  WeightQuantOptions opt;
  opt.fmax = fmax;
  opt.eps = eps;
  opt.rule = std::is_same<Rule, ScaleUE8M0>::value ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
  float checkedFmax = 0.0f;
  if (Status s = detail::checkWeightBlockQuant("reference::weightBlockQuant", in, q, scale, opt, checkedFmax, 1, 1); !s)
    return s;
  const index_t N = in.rows;
  for (index_t nb = 0; nb < scale.rows(); ++nb) {
    const index_t n1 = (nb + 1) * kWeightBlock < N ? (nb + 1) * kWeightBlock : N;
    for (index_t kb = 0; kb < scale.cols(); ++kb) {
      float amax = 0.0f;
      for (index_t n = nb * kWeightBlock; n < n1; ++n)
        for (index_t k = kb * kWeightBlock; k < (kb + 1) * kWeightBlock; ++k)
          amax = amaxStep(amax, toFloat(in.w[n * in.ld + k]));
      const float s = scaleFromAmax<Rule>(amax, checkedFmax, eps);
      const float inv = inverseScale(s);
      for (index_t n = nb * kWeightBlock; n < n1; ++n)
        for (index_t k = kb * kWeightBlock; k < (kb + 1) * kWeightBlock; ++k)
          q(n, k) = encode<Format>(toFloat(in.w[n * in.ld + k]) * inv);
      scale(nb, kb) = s;
    }
    for (index_t c = scale.cols(); c < scale.ld(); ++c) scale.data()[scale.layout().offset(nb, c)] = 0.0f;  // padding
  }
  return Status::ok();
}

/// The fp8 values of `m`, decoded exactly to float, dense [rows, cols].
template <class Format>
std::vector<float> decodeFp8(const Fp8Matrix<Format>& m) {
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = decode<Format>(static_cast<std::uint8_t>(b));
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  for (index_t r = 0; r < m.rows; ++r)
    for (index_t c = 0; c < m.cols; ++c) out[r * m.cols + c] = table[m(r, c)];
  return out;
}

/// Columns [n0, n1) of the fp64 block-scaled GEMM over decoded operands.
///
/// @param xv      decoded activation fp8 values, dense [M, K] (see decodeFp8)
/// @param xs      activation scales (M, K / 128), any layout with element access
/// @param wv      decoded weight fp8 values, dense [N, K]
/// @param ws      weight scales (ceil(N / 128), K / 128), any layout
/// @param y       output [M, ldy] (double): Y(m, n) for n in [n0, n1)
/// @param absSum  optional [M, ldy]: sum_g |xs * ws| * sum_k |xq * wq|, the
///                magnitude the rounding of a floating-point GEMM scales with
/// K must be a multiple of 128. Columns outside [n0, n1) are not touched, so
/// threads may fill disjoint ranges of one output.
template <class XT, class XLayout, class WT, class WLayout>
void blockScaledGemmColumns(const float* xv, const ScaleView<XT, XLayout>& xs, const float* wv,
                            const ScaleView<WT, WLayout>& ws, index_t M, index_t K, index_t n0, index_t n1, double* y,
                            index_t ldy, double* absSum = nullptr) {
  constexpr index_t kTile = 16;  // 16 x 16 (m, n) pairs: 2 x 16 rows of K floats stay in cache
  constexpr int kLanes = 8;      // independent partial sums (exact in any order, see above)
  const index_t groups = K / kWeightBlock;
  for (index_t nt = n0; nt < n1; nt += kTile) {
    const index_t ntEnd = nt + kTile < n1 ? nt + kTile : n1;
    for (index_t mt = 0; mt < M; mt += kTile) {
      const index_t mtEnd = mt + kTile < M ? mt + kTile : M;
      for (index_t n = nt; n < ntEnd; ++n) {
        const float* wr = wv + n * K;
        for (index_t m = mt; m < mtEnd; ++m) {
          const float* xr = xv + m * K;
          double acc = 0.0, mag = 0.0;
          for (index_t g = 0; g < groups; ++g) {
            double part[kLanes] = {}, partAbs[kLanes] = {};
            for (index_t k = g * kWeightBlock; k < (g + 1) * kWeightBlock; k += kLanes)
              for (int j = 0; j < kLanes; ++j) {
                const double p = static_cast<double>(xr[k + j] * wr[k + j]);  // exact in fp32
                part[j] += p;
                partAbs[j] += std::fabs(p);
              }
            double s = 0.0, sAbs = 0.0;
            for (int j = 0; j < kLanes; ++j) {
              s += part[j];
              sAbs += partAbs[j];
            }
            const double f = static_cast<double>(xs(m, g)) * static_cast<double>(ws(n / kWeightBlock, g));
            acc += s * f;
            mag += sAbs * std::fabs(f);
          }
          y[m * ldy + n] = acc;
          if (absSum != nullptr) absSum[m * ldy + n] = mag;
        }
      }
    }
  }
}

/// The whole fp64 GEMM Y[M, N] = x . w^T of a producer's output and a block-
/// quantized weight, both in host memory. `y` (and `absSum` when given) are
/// resized to M * N, row-major.
/// Errors, in this order: kInvalidShape ('M', 'K', 'N' negative), 'w' (K
/// differs), 'K' (not a multiple of 128); kLdTooSmall ('x.ld' / 'w.ld' <
/// K); kInvalidShape naming 'x' / 'w' (span beyond checkSpan's bounds);
/// kNullPointer ('x' / 'w' with work to do), as CublasLtBlockGemm::run names them;
/// kUnsupportedGroupSize ('x.groupSize' != 128); kInvalidShape 'x.scale' /
/// 'w.scale' (extents), 'M' (M x N results beyond 2^48 bytes or host memory).
/// No scale layout or N alignment is required: this is the arithmetic the
/// GEMM consumers implement, not one consumer's contract.
template <class Format, class XLayout>
Status blockScaledGemm(const QuantizedTensor<Format, XLayout>& x, const BlockQuantizedWeight<Format>& w,
                       std::vector<double>& y, std::vector<double>* absSum = nullptr) {
  const char* fn = "reference::blockScaledGemm";
  const index_t M = x.data.rows, K = x.data.cols, N = w.data.rows;
  if (M < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", M);
  if (K < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", K);
  if (N < 0) return Status::error(StatusCode::kInvalidShape, fn, "N", "extent is negative", N);
  if (w.data.cols != K)
    return Status::error(StatusCode::kInvalidShape, fn, "w", "weight K differs from the activation's", w.data.cols, K);
  if (K % kWeightBlock != 0)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "not a multiple of 128", K, kWeightBlock);
  if (x.data.ld < K)
    return Status::error(StatusCode::kLdTooSmall, fn, "x.ld", "row stride is smaller than K", x.data.ld, K);
  if (w.data.ld < K)
    return Status::error(StatusCode::kLdTooSmall, fn, "w.ld", "row stride is smaller than K", w.data.ld, K);
  if (Status s = detail::checkSpan(fn, "x", x.data.data, detail::stridedSpan(M, K, x.data.ld), 1); !s) return s;
  if (Status s = detail::checkSpan(fn, "w", w.data.data, detail::stridedSpan(N, K, w.data.ld), 1); !s) return s;
  if (M > 0 && K > 0 && x.data.data == nullptr)
    return Status::error(StatusCode::kNullPointer, fn, "x", "null fp8 activation with M, K > 0");
  if (N > 0 && K > 0 && w.data.data == nullptr)
    return Status::error(StatusCode::kNullPointer, fn, "w", "null fp8 weight with N, K > 0");
  if (x.groupSize != kWeightBlock)
    return Status::error(StatusCode::kUnsupportedGroupSize, fn, "x.groupSize", "the GEMM reads 1 x 128 groups",
                         x.groupSize, kWeightBlock);
  // The value and limit of an extents error: the first extent that differs.
  const bool xRows = x.scale.rows() != M;
  if (xRows || x.scale.cols() != K / kWeightBlock)
    return Status::error(StatusCode::kInvalidShape, fn, "x.scale", "extents differ from (M, K / 128)",
                         xRows ? x.scale.rows() : x.scale.cols(), xRows ? M : K / kWeightBlock);
  const bool wRows = w.scale.rows() != weightScaleRows(N);
  if (wRows || w.scale.cols() != K / kWeightBlock)
    return Status::error(StatusCode::kInvalidShape, fn, "w.scale", "extents differ from (ceil(N / 128), K / 128)",
                         wRows ? w.scale.rows() : w.scale.cols(), wRows ? weightScaleRows(N) : K / kWeightBlock);
  const index_t results = detail::spanMul(M, N);
  if (detail::spanMul(results, sizeof(double)) < 0)
    return Status::error(StatusCode::kInvalidShape, fn, "M", "the M x N results span more than 2^48 bytes", M);
  std::vector<float> xv, wv;
  try {
    xv = decodeFp8(x.data);
    wv = decodeFp8(w.data);
    y.assign(static_cast<std::size_t>(results), 0.0);
    if (absSum != nullptr) absSum->assign(static_cast<std::size_t>(results), 0.0);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::kInvalidShape, fn, "M", "the operands and results do not fit in host memory", M);
  }
  blockScaledGemmColumns(xv.data(), x.scale, wv.data(), w.scale, M, K, 0, N, y.data(), N,
                         absSum != nullptr ? absSum->data() : nullptr);
  return Status::ok();
}

}  // namespace reference
}  // namespace fp8scale
