// fp8scale spec: RMSNorm quant's input and argument checks. Host code only
// (no kernels): the device producer (producers/rmsnorm_quant.hpp) and the
// host reference (reference/fused_quant.hpp) both include it.
#pragma once

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"
#include "quant_options.hpp"

namespace fp8scale {

/// The input of RMSNorm quant. `residual` (nullable) is read and overwritten
/// with round(x + residual); `normOut` (nullable) receives round(y).
template <class In>
struct RmsNormQuantInput {
  const In* x = nullptr;
  index_t rows = 0;  ///< M
  index_t cols = 0;  ///< K
  index_t ldx = 0;  ///< row stride of x, elements
  In* residual = nullptr;  ///< [M, K], row stride ldResidual; in/out
  index_t ldResidual = 0;
  const In* weight = nullptr;  ///< [K]
  float normEps = 1e-6f;
  In* normOut = nullptr;  ///< [M, K], row stride ldNormOut; optional output
  index_t ldNormOut = 0;

  /// x[M, K] with row stride ldx (elements), weight[K]; no residual, no
  /// normOut, normEps 1e-6. withResidual / withNormOut add those. Nothing
  /// is checked here: rmsNormQuant refuses, naming the argument, pointers
  /// and row strides not aligned to 16 bytes, K not a multiple of the group
  /// size or above RmsNormPolicy::kMaxCols, and a null weight with M > 0.
  static RmsNormQuantInput matrix(const In* x, index_t M, index_t K, index_t ldx, const In* weight) {
    RmsNormQuantInput in;
    in.x = x;
    in.rows = M;
    in.cols = K;
    in.ldx = ldx;
    in.weight = weight;
    return in;
  }
  /// This input with residual[M, K] (row stride ld elements; nullptr: none),
  /// read and overwritten in place with round(x + residual). It must not
  /// overlap x, normOut or the fp8 output.
  RmsNormQuantInput withResidual(In* r, index_t ld) const {
    RmsNormQuantInput in = *this;
    in.residual = r;
    in.ldResidual = ld;
    return in;
  }
  /// This input with normOut[M, K] (row stride ld elements; nullptr: none),
  /// which receives the normalized values rounded to In. It must not
  /// overlap x, the residual or the fp8 output.
  RmsNormQuantInput withNormOut(In* y, index_t ld) const {
    RmsNormQuantInput in = *this;
    in.normOut = y;
    in.ldNormOut = ld;
    return in;
  }
};

namespace detail {

/// The longest row RMSNorm quant takes: one block of 512 threads x 8
/// vectors holds it (RmsNormPolicy::kMaxCols): 32768 bf16 / fp16 or 16384
/// fp32 columns.
template <class In>
constexpr index_t kRmsNormMaxCols = static_cast<index_t>(512) * 8 * kVecElems<In>;

/// Argument checks of RMSNorm quant (the launchers' and the reference's),
/// in this order: options, K against kRmsNormMaxCols, normEps, the fp8
/// output's extents, checkQuantArgs (q aligned to one fp8 vector), then for
/// M > 0 the weight (non-null, its K elements within the address space,
/// 16-byte aligned), residual and normOut.
template <class Format, class In, class Layout>
Status checkRmsNormQuant(const char* fn, const RmsNormQuantInput<In>& in, const Fp8Matrix<Format>& q,
                         const ScaleOutput<Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkProducerOptions<Format, Layout>(fn, opt, fmax); !s) return s;
  if (in.cols > kRmsNormMaxCols<In>)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "row too long for one block", in.cols,
                         kRmsNormMaxCols<In>);
  if (!(in.normEps >= 0.0f))
    return Status::errorFloat(StatusCode::kInvalidValue, fn, "normEps", "must be >= 0", in.normEps);
  if (q.rows != in.rows || q.cols != in.cols)
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the input's (M, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols);
  const QuantArgs a = quantArgs(in.x, in.rows, in.cols, in.ldx, static_cast<int>(sizeof(In)), q, scale,
                                opt.groupSize);
  if (Status s = checkQuantArgs(fn, a, 16, kVecElems<In>); !s) return s;
  if (in.rows == 0 || in.cols == 0) return Status::ok();
  const index_t inBytes = static_cast<index_t>(sizeof(In));
  if (in.weight == nullptr) return Status::error(StatusCode::kNullPointer, fn, "weight", "null weight with M > 0");
  if (Status s = checkSpan(fn, "weight", in.weight, in.cols, inBytes); !s) return s;
  if (Status s = checkAligned(fn, "weight", in.weight, 16); !s) return s;
  if (Status s = checkOptionalRows(fn, "residual", "ldResidual", in.residual, in.rows, in.ldResidual, in.cols, inBytes); !s)
    return s;
  if (Status s = checkOptionalRows(fn, "normOut", "ldNormOut", in.normOut, in.rows, in.ldNormOut, in.cols, inBytes); !s)
    return s;
  return Status::ok();
}

}  // namespace detail
}  // namespace fp8scale
