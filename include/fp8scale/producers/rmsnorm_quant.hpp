// fp8scale: (residual add) + RMSNorm + per-group fp8 quantization, with a
// compile-time TRANSPOSE_SCALE (the attention / MoE input site).
//
// For each row m of x[M, K]:
//   h = x + residual (fp32; without a residual h = x); residual = round(h)
//   (in place, the input type);
//   y = h * rsqrt(mean(h^2) + normEps) * weight   (fp32, h not re-rounded)
//   q, scale = group quant of y (fp32, never rounded to bf16 first);
//   optionally normOut = round(y) (the "emit_bf16" output).
// One block per row; each thread keeps its slice of h in registers between
// the norm's reduction and the quantization.
#pragma once

#include <cmath>
#include <cstdint>

#include "common.hpp"

namespace fp8scale {

/// The input of RMSNorm quant. `residual` (nullable) is read and overwritten
/// with round(x + residual); `normOut` (nullable) receives round(y).
template <class In>
struct RmsNormQuantInput {
  const In* x = nullptr;
  index_t rows = 0;  ///< M
  index_t cols = 0;  ///< K
  index_t ldx = 0;
  In* residual = nullptr;  ///< [M, K], row stride ldResidual; in/out
  index_t ldResidual = 0;
  const In* weight = nullptr;  ///< [K]
  float normEps = 1e-6f;
  In* normOut = nullptr;  ///< [M, K], row stride ldNormOut; optional output
  index_t ldNormOut = 0;
};

/// Tuning: one block per row, each thread holding up to kMaxVecs 16-byte
/// vectors of the row in registers. Rows of up to 1024 vectors (7168 and 8192
/// bf16 columns) run 1024 threads of one vector (30 registers on sm_90, two
/// blocks per SM): the shortest per-thread chain of loads, reductions and
/// stores. On the H200 at K = 7168 (benchmarks/results, tune/ entries), it
/// and 512 x 2 tie at M <= 64 (3.2-3.3 us; 256 x 4: 4.0-4.2 us), 512 x 2 wins
/// at M = 512 (7.9 vs 8.6 us), and 1024 x 1 wins from M = 2048 on (0.78x vs
/// 0.73x the copy bandwidth at M = 8192, 0.80x vs 0.77x at 65536). Longer rows,
/// up to kMaxCols, run 512 threads of 8 vectors (128 registers: one block per SM).
template <class In>
struct RmsNormPolicy {
  static constexpr int kWideThreads = 1024;
  static constexpr int kWideVecs = 1;
  static constexpr int kLargeThreads = 512;
  static constexpr int kLargeVecs = 8;
  static constexpr index_t kMaxCols = static_cast<index_t>(kLargeThreads) * kLargeVecs * detail::kVecElems<In>;
};

namespace detail {

#if defined(FP8SCALE_HAS_DEVICE)

/// The row body of RMSNorm quant for row `m`, with the row's input values
/// supplied by `loadX(v, out)`: out[0, kVecElems) = x(m, v * kVecElems + j) as
/// fp32 (already rounded to In). rmsNormQuantRow passes a load of in.x; the
/// fused allreduce passes its rank-ordered sum. in.x itself is not read here.
/// Every thread of the block must call it (it contains block barriers).
template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kThreads, int kMaxVecs,
          class LoadX>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormQuantRowFrom(const RmsNormQuantInput<In>& in, index_t m,
                                                              const LoadX& loadX, Fp8Matrix<Format> q,
                                                              ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale,
                                                              float fmax, float eps) {
  constexpr int kVE = kVecElems<In>;
  constexpr int kLanes = kGroup / kVE;  // threads per group in one pass
  const int vecs = static_cast<int>(in.cols / kVE);
  const int t = static_cast<int>(threadIdx.x);

  // Load (+ residual), keep h, accumulate sum of squares. The weight is
  // fetched now too, as raw bytes (4 registers a vector), so that its latency
  // hides behind the reduction instead of following it.
  float h[kMaxVecs][kVE];
  Bytes16 wRaw[kMaxVecs];
  float sumSq = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + t;
    if (v < vecs) {
      wRaw[i] = *reinterpret_cast<const Bytes16*>(in.weight + v * kVE);  // weight(v)
      loadX(v, h[i]);                                                    // x(m, v)
      if (in.residual != nullptr) {
        In* r = in.residual + m * in.ldResidual + v * kVE;  // residual(m, v)
        float rv[kVE];
        loadVec(r, rv);
#pragma unroll
        for (int j = 0; j < kVE; ++j) h[i][j] += rv[j];
        storeVec(r, h[i]);
      }
#pragma unroll
      for (int j = 0; j < kVE; ++j) sumSq += h[i][j] * h[i][j];
    }
  }

  // Reduce
  const float total = blockSum<kThreads>(sumSq);
  const float inv = rsqrtf(total / static_cast<float>(in.cols) + in.normEps);

  // Normalize, quantize, store
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + t;
    if (v < vecs) {  // uniform over a group's kLanes lanes: vecs is a multiple of kLanes
      float w[kVE];
      loadVec(reinterpret_cast<const In*>(&wRaw[i]), w);
#pragma unroll
      for (int j = 0; j < kVE; ++j) h[i][j] = h[i][j] * inv * w[j];
      if (in.normOut != nullptr) storeVec(in.normOut + m * in.ldNormOut + v * kVE, h[i]);
      const float s = quantizeGroupSlice<Format, Rule, kLanes, kVE>(h[i], &q(m, static_cast<index_t>(v) * kVE), fmax,
                                                                    eps);
      const index_t g = static_cast<index_t>(v) * kVE / kGroup;
      if (t % kLanes == 0) storeScale(scale, m, g, s);  // (M, G)
      zeroScalePadding<kLanes>(scale, m, g, t % kLanes);
    }
  }
}

template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kThreads, int kMaxVecs>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormQuantRow(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                                          ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale,
                                                          float fmax, float eps) {
  const index_t m = blockIdx.x;
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  const auto loadX = [&](int v, float* out) { loadVec(in.x + m * in.ldx + v * kVecElems<In>, out); };  // x(m, v)
  rmsNormQuantRowFrom<In, Format, Rule, kGroup, TRANSPOSE_SCALE, kThreads, kMaxVecs>(in, m, loadX, q, scale, fmax,
                                                                                     eps);
}

template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kThreads, int kMaxVecs>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads)
    rmsNormQuantKernel(RmsNormQuantInput<In> in, Fp8Matrix<Format> q,
                       ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale, float fmax, float eps) {
  rmsNormQuantRow<In, Format, Rule, kGroup, TRANSPOSE_SCALE, kThreads, kMaxVecs>(in, q, scale, fmax, eps);
}

/// One launch of kThreads-thread blocks, kMaxVecs vectors a thread (the row
/// must fit: K / kVecElems <= kThreads * kMaxVecs), one block per row.
template <class Format, int kThreads, int kMaxVecs, class In, class Layout>
Status launchRmsNormQuantWith(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleView<float, Layout> scale,
                              const QuantOptions& opt, float fmax, Stream stream) {
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  if (!fitsOneGrid(in.rows, kThreads))
    return Status::error(StatusCode::kInvalidShape, "rmsNormQuant", "M", "too many rows for one launch", in.rows);
  return dispatchRuleAndGroup(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    const DeviceError e =
        launchKernelPdl(opt.programmaticLaunch,
                        rmsNormQuantKernel<In, Format, decltype(rule), decltype(group)::value, TRANSPOSE_SCALE,
                                           kThreads, kMaxVecs>,
                        dim3(static_cast<unsigned>(in.rows)), dim3(kThreads), 0, stream, in, q, scale, fmax, opt.eps);
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice("rmsNormQuant", e);
  });
}

#endif  // FP8SCALE_HAS_DEVICE

template <class Format, class In, class Layout>
Status checkRmsNormQuant(const char* fn, const RmsNormQuantInput<In>& in, const Fp8Matrix<Format>& q,
                         const ScaleView<float, Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkQuantOptions<Format>(fn, opt, fmax); !s) return s;
  if (in.cols > RmsNormPolicy<In>::kMaxCols)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "row too long for one block", in.cols,
                         RmsNormPolicy<In>::kMaxCols);
  if (!(in.normEps >= 0.0f)) return Status::error(StatusCode::kInvalidValue, fn, "normEps", "must be >= 0");
  if (q.rows != in.rows || q.cols != in.cols)
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the input's (M, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols);
  const QuantArgs a = quantArgs(in.x, in.rows, in.cols, in.ldx, static_cast<int>(sizeof(In)), q, scale,
                                opt.groupSize);
  if (Status s = checkQuantArgs(fn, a, 16, kVecElems<In>); !s) return s;
  if (in.rows == 0 || in.cols == 0) return Status::ok();
  if (in.weight == nullptr) return Status::error(StatusCode::kNullPointer, fn, "weight", "null weight with M > 0");
  if (Status s = checkAligned(fn, "weight", in.weight, 16); !s) return s;
  const index_t inBytes = static_cast<index_t>(sizeof(In));
  if (Status s = checkOptionalRows(fn, "residual", "ldResidual", in.residual, in.ldResidual, in.cols, inBytes); !s)
    return s;
  if (Status s = checkOptionalRows(fn, "normOut", "ldNormOut", in.normOut, in.ldNormOut, in.cols, inBytes); !s)
    return s;
  return Status::ok();
}

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// RMSNorm quant on `stream`: q[M, K], scales (M, K / groupSize) in `Layout`
/// (RowMajor: TRANSPOSE_SCALE false; ColMajor: true, padding zeroed),
/// residual updated in place, normOut written when given.
/// Alignment: x, residual, weight, normOut and their row strides 16 bytes;
/// q and q.ld to one vector of fp8 (8 bytes for 16-bit inputs, 4 for fp32).
/// Errors as groupQuant(), plus kInvalidShape ('K' above RmsNormPolicy::kMaxCols),
/// kNullPointer ('weight'), kLdTooSmall / kMisaligned for residual and normOut.
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> rmsNormQuant(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                                     ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                     Stream stream) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  using Policy = RmsNormPolicy<In>;
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant("rmsNormQuant", in, q, scale, opt, fmax); !s) return s;
  QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.rows == 0 || in.cols == 0) {
    if (Status s = detail::clearEmptyScalePadding("rmsNormQuant", scale, stream); !s) return s;
    return out;
  }
  const index_t vecs = in.cols / detail::kVecElems<In>;
  Status launched;
  if (vecs > static_cast<index_t>(Policy::kWideThreads) * Policy::kWideVecs)
    launched = detail::launchRmsNormQuantWith<Format, Policy::kLargeThreads, Policy::kLargeVecs>(in, q, scale, opt, fmax,
                                                                                                stream);
  else
    launched = detail::launchRmsNormQuantWith<Format, Policy::kWideThreads, Policy::kWideVecs>(in, q, scale, opt, fmax,
                                                                                              stream);
  if (!launched) return launched;
  return out;
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
