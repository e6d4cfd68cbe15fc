// fp8scale spec: 128 x 128 weight block quantization's scale shapes, input,
// options and argument checks. Host code only (no kernels): the device
// quantizer (consumers/weight_block_quant.hpp) and the host reference
// (reference/block_scaled_gemm.hpp) both include it.
#pragma once

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"

namespace fp8scale {

/// Edge of a weight scale block, in elements, along N and along K.
constexpr int kWeightBlock = 128;

/// Number of N blocks of a weight with N rows: ceil(N / 128).
FP8SCALE_HOST_DEVICE constexpr index_t weightScaleRows(index_t n) {
  return n / kWeightBlock + (n % kWeightBlock > 0 ? 1 : 0);  // ceil without n + 127, which could wrap
}

/// Number of K blocks of a weight with K columns (K a multiple of 128): K / 128.
FP8SCALE_HOST_DEVICE constexpr index_t weightScaleCols(index_t k) { return k / kWeightBlock; }

/// The K-block stride cuBLASLt's BLK128x128 scales need: align(K / 128, 4).
FP8SCALE_HOST_DEVICE constexpr index_t weightScaleLd(index_t k) { return alignUp(weightScaleCols(k), 4); }

/// Floats a weight scale buffer holds, padding included: ceil(N / 128) * align(K / 128, 4).
FP8SCALE_HOST_DEVICE constexpr index_t weightScaleElems(index_t n, index_t k) {
  return weightScaleRows(n) * weightScaleLd(k);
}

/// The RowMajor view of a weight scale buffer of weightScaleElems(N, K) floats:
/// (ceil(N / 128), K / 128) with ld = align(K / 128, 4).
template <class T>
Result<ScaleView<T, RowMajor>> weightScaleView(T* data, index_t n, index_t k) {
  if (n < 0) return Status::error(StatusCode::kInvalidShape, "weightScaleView", "N", "extent is negative", n);
  if (k < 0 || k % kWeightBlock != 0)
    return Status::error(StatusCode::kInvalidShape, "weightScaleView", "K", "not a non-negative multiple of 128", k,
                         kWeightBlock);
  return rowMajorView(data, weightScaleRows(n), weightScaleCols(k), weightScaleLd(k));
}

/// The input of weight quantization: W(n, k) = w[n * ld + k], n < rows (N), k < cols (K).
template <class In>
struct WeightQuantInput {
  const In* w = nullptr;
  index_t rows = 0;  ///< N (output features)
  index_t cols = 0;  ///< K (input features), a multiple of 128
  index_t ld = 0;    ///< row stride of w in elements, >= K
};

/// Options of weight quantization. Defaults: fp32 scales, fmax = the
/// format's max (448 for e4m3fn), eps 1e-10.
struct WeightQuantOptions {
  ScaleRule rule = ScaleRule::kFp32;
  float fmax = 0.0f;  ///< 0 selects the format's max
  float eps = kDefaultAmaxEps;
};

/// A block-quantized weight: fp8 data [N, K] (row stride data.ld bytes) and
/// its (ceil(N / 128), K / 128) block scales, RowMajor with ld = align(K / 128, 4).
template <class Format>
struct BlockQuantizedWeight {
  using format_type = Format;
  Fp8Matrix<Format> data;
  ScaleView<float, RowMajor> scale;
};

namespace detail {

/// Argument checks shared by the device launcher and the host reference, in
/// this order: options; shape (N >= 0, K >= 0, K % 128); strides; the fp8
/// output's and the scale view's extents and ld; the spans of w and q
/// (checkSpan); then, only for a non-empty
/// weight, null pointers and alignment (input pointer and row stride to
/// `inputVectorBytes`, fp8 pointer and row stride to `outputVectorBytes`).
template <class Format, class In>
Status checkWeightBlockQuant(const char* fn, const WeightQuantInput<In>& in, const Fp8Matrix<Format>& q,
                             const ScaleView<float, RowMajor>& scale, const WeightQuantOptions& opt, float& fmax,
                             int inputVectorBytes, int outputVectorBytes) {
  if (Status s = checkQuantOptions<Format>(fn, opt, fmax); !s) return s;
  if (in.rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "N", "extent is negative", in.rows);
  if (in.cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", in.cols);
  if (in.cols % kWeightBlock != 0)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "not a multiple of the 128-wide weight block", in.cols,
                         kWeightBlock);
  if (in.ld < in.cols)
    return Status::error(StatusCode::kLdTooSmall, fn, "ld", "weight row stride is smaller than K", in.ld, in.cols);
  if (q.rows != in.rows || q.cols != in.cols)
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the weight's (N, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols);
  if (q.ld < in.cols)
    return Status::error(StatusCode::kLdTooSmall, fn, "q.ld", "fp8 row stride is smaller than K", q.ld, in.cols);
  if (scale.rows() != weightScaleRows(in.rows))
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view rows differ from ceil(N / 128)",
                         scale.rows(), weightScaleRows(in.rows));
  if (scale.cols() != weightScaleCols(in.cols))
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view cols differ from K / 128", scale.cols(),
                         weightScaleCols(in.cols));
  if (scale.ld() < scale.cols())
    return Status::error(StatusCode::kLdTooSmall, fn, "scale", "scale view ld is smaller than K / 128", scale.ld(),
                         scale.cols());
  if (Status s = checkSpan(fn, "w", in.w, stridedSpan(in.rows, in.cols, in.ld), sizeof(In)); !s) return s;
  if (Status s = checkSpan(fn, "q", q.data, stridedSpan(in.rows, in.cols, q.ld), 1); !s) return s;
  if (in.rows == 0 || in.cols == 0) return Status::ok();
  if (in.w == nullptr) return Status::error(StatusCode::kNullPointer, fn, "w", "null weight with N, K > 0");
  if (q.data == nullptr) return Status::error(StatusCode::kNullPointer, fn, "q", "null fp8 output with N, K > 0");
  if (scale.data() == nullptr)
    return Status::error(StatusCode::kNullPointer, fn, "scale", "null scale output with N, K > 0");
  if (Status s = checkAligned(fn, "w", in.w, inputVectorBytes); !s) return s;
  if (!isWholeVectors(in.ld, sizeof(In), inputVectorBytes))
    return Status::error(StatusCode::kMisaligned, fn, "ld",
                         "weight row stride (elements) is not a whole number of vector loads (bytes)", in.ld,
                         inputVectorBytes);
  if (Status s = checkAligned(fn, "q", q.data, outputVectorBytes); !s) return s;
  if (q.ld % outputVectorBytes != 0)
    return Status::error(StatusCode::kMisaligned, fn, "q.ld", "fp8 row stride is not a multiple of the store width",
                         q.ld, outputVectorBytes);
  if (Status s = checkAligned(fn, "scale", scale.data(), 4); !s) return s;
  return Status::ok();
}

}  // namespace detail
}  // namespace fp8scale
