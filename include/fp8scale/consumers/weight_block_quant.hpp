// fp8scale consumers: 128x128 block fp8 quantization of GEMM weights.
//
// A weight W[N, K] (row-major, the nn.Linear layout: N output features, K
// input features) is cut into 128 x 128 blocks; each block gets one fp32
// scale from its amax with the library's scale rules (scale_math.hpp: the
// same amax, eps floor, s = amax / fmax and 1 / s as the activation
// producers), and its values become fp8 bytes q[N, K].
//
// The scales are written in the layout cuBLASLt reads for
// CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F on the operand that holds W
// (cuBLAS documentation, section 3.1.4.5.1 "Scaling factors layouts",
// https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts): K-major,
// that is the K blocks of one N block are contiguous, with the stride between
// N blocks padded to a multiple of 4:
//
//   scale(nb, kb) at nb * ld + kb,   nb < ceil(N / 128),  kb < K / 128,
//   ld = align(K / 128, 4)  (cuBLAS's "L_4"),  slots [K / 128, ld) written 0.
//
// In this library's terms that is a RowMajor{ld} ScaleView of
// (ceil(N / 128), K / 128) blocks. K must be a multiple of 128 (the
// activation groups of the block-scaled GEMM are 1 x 128 as well); a partial
// last N block (N % 128 != 0) takes its amax over the rows it has.
//
// Kept out of fp8scale.hpp: include this header where weights are prepared.
// It needs no BLAS library; the GEMM wrapper is cublaslt_block_gemm.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../detail/reduce.hpp"
#include "../detail/vec.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../spec/weight_block_quant.hpp"
#include "../status.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

/// Tuning of the weight quantizer: one block of kThreads threads per 128 x 128
/// tile; each thread owns 16-byte vectors of the tile, consecutive threads
/// along a row, so every load is one coalesced 128-bit access.
struct WeightQuantPolicy {
  static constexpr int kThreads = 256;
  /// Threads that reduce together before the cross-group step: 32 on every
  /// target (a logical warp of 32 lanes also exists on wave64 AMD).
  static constexpr int kReduceLanes = 32;
};

namespace detail {

/// Calls f(Rule{}) for a validated runtime rule.
template <class F>
inline Status dispatchWeightRule(ScaleRule rule, F&& f) {
  return rule == ScaleRule::kUE8M0 ? f(ScaleUE8M0{}) : f(ScaleFp32{});
}

#if defined(FP8SCALE_HAS_DEVICE)

/// One 128 x 128 tile (nb, kb) = blockIdx.x split over the K blocks: amax of
/// the tile, its scale through the view, fp8 bytes of every present row.
template <class In, class Format, class Rule>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void weightBlockTile(const WeightQuantInput<In>& in, const Fp8Matrix<Format>& q,
                                                          const ScaleView<float, RowMajor>& scale, float fmax,
                                                          float eps) {
  constexpr int kThreads = WeightQuantPolicy::kThreads;
  constexpr int kLanes = WeightQuantPolicy::kReduceLanes;
  constexpr int kVec = kVecElems<In>;                            // values per 16-byte load
  constexpr int kVecsPerRow = kWeightBlock / kVec;               // 16 (bf16), 32 (fp32)
  constexpr int kRowsPerPass = kThreads / kVecsPerRow;           // 16 (bf16), 8 (fp32)
  constexpr int kPasses = kWeightBlock / kRowsPerPass;           // 8 (bf16), 16 (fp32)
  static_assert(kThreads % kVecsPerRow == 0 && kWeightBlock % kRowsPerPass == 0, "a tile is whole passes");

  const index_t kBlocks = scale.cols();
  const index_t nb = static_cast<index_t>(blockIdx.x) / kBlocks;
  const index_t kb = static_cast<index_t>(blockIdx.x) - nb * kBlocks;
  const int chunk = static_cast<int>(threadIdx.x) % kVecsPerRow;
  const int row0 = static_cast<int>(threadIdx.x) / kVecsPerRow;
  const index_t k = kb * kWeightBlock + chunk * kVec;

  // Load: rows past N (a partial last N block) hold nothing and add nothing.
  float v[kPasses][kVec];
  float amax = 0.0f;
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    const index_t n = nb * kWeightBlock + row0 + p * kRowsPerPass;
    if (n < in.rows) {
      loadVec(in.w + n * in.ld + k, v[p]);  // W(n, k .. k + kVec)
#pragma unroll
      for (int i = 0; i < kVec; ++i) amax = amaxStep(amax, v[p][i]);
    }
  }

  // Reduce: 32-lane groups (CUB / rocPRIM), then across the groups.
  __shared__ float groupMax[kThreads / kLanes];
  amax = groupAllMax<kLanes>(amax);
  if (threadIdx.x % kLanes == 0) groupMax[threadIdx.x / kLanes] = amax;
  __syncthreads();
  amax = groupMax[0];
#pragma unroll
  for (int j = 1; j < kThreads / kLanes; ++j) amax = fmaxf(amax, groupMax[j]);

  // Scale, convert, store
  const float s = scaleFromAmax<Rule>(amax, fmax, eps);
  const float inv = inverseScale(s);
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    const index_t n = nb * kWeightBlock + row0 + p * kRowsPerPass;
    if (n < in.rows) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[p][i] = v[p][i] * inv;
      storeFp8<Format, kVec>(&q(n, k), v[p]);  // q(n, k .. k + kVec)
    }
  }
  if (threadIdx.x == 0) scale(nb, kb) = s;  // (N / 128, K / 128)
  if (kb == kBlocks - 1) {
    // The padding slots [K / 128, ld) of this N block's row, past the view's columns.
    for (index_t c = kBlocks + threadIdx.x; c < scale.ld(); c += kThreads)
      scale.data()[scale.layout().offset(nb, c)] = 0.0f;
  }
}

template <class In, class Format, class Rule>
FP8SCALE_GLOBAL void __launch_bounds__(WeightQuantPolicy::kThreads)
    weightBlockQuantKernel(WeightQuantInput<In> in, Fp8Matrix<Format> q, ScaleView<float, RowMajor> scale, float fmax,
                           float eps) {
  weightBlockTile<In, Format, Rule>(in, q, scale, fmax, eps);
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// Quantizes W[N, K] into 128 x 128 blocks on `stream`.
///
/// @tparam Format  E4M3FN (what cuBLASLt reads) or E4M3FNUZ
/// @tparam In      float, BFloat16 or Float16
/// @param in     W[N, K], K % 128 == 0; w and its row stride 16-byte aligned
/// @param q      fp8 output [N, K], row stride q.ld bytes; q and q.ld aligned to
///               one fp8 store (8 bytes for 16-bit inputs, 4 for fp32)
/// @param scale  (ceil(N / 128), K / 128) RowMajor view of device memory, ld >=
///               K / 128 (cuBLASLt needs ld == align(K / 128, 4): see
///               weightScaleView()); padding slots [K / 128, ld) are written 0
/// @return the BlockQuantizedWeight {q, scale} over the caller's buffers.
/// Errors (nothing is launched): kInvalidShape ('N', 'K' % 128, 'q', 'scale'
/// extents; 'w', 'q' spans beyond 2^48 bytes or the address space), kLdTooSmall ('ld', 'q.ld', 'scale'), kNullPointer, kMisaligned
/// ('w', 'ld', 'q', 'q.ld', 'scale'), kInvalidValue ('fmax', 'eps', 'rule'),
/// kDeviceError (launch). An empty weight launches nothing and succeeds.
template <class Format, class In>
Result<BlockQuantizedWeight<Format>> weightBlockQuant(const WeightQuantInput<In>& in, Fp8Matrix<Format> q,
                                                      ScaleView<float, RowMajor> scale, const WeightQuantOptions& opt,
                                                      Stream stream) {
  constexpr int kVec = detail::kVecElems<In>;
  float fmax = 0.0f;
  if (Status s = detail::checkWeightBlockQuant("weightBlockQuant", in, q, scale, opt, fmax, 16, kVec); !s) return s;
  const BlockQuantizedWeight<Format> out{q, scale};
  if (in.rows == 0 || in.cols == 0) return out;
  const index_t blocks = scale.rows() * scale.cols();
  if (!fitsOneGrid(blocks, WeightQuantPolicy::kThreads))
    return Status::error(StatusCode::kInvalidShape, "weightBlockQuant", "N", "too many blocks for one launch", in.rows);
  const Status launched = detail::dispatchWeightRule(opt.rule, [&](auto rule) {
    const DeviceError e =
        launchKernel(detail::weightBlockQuantKernel<In, Format, decltype(rule)>, dim3(static_cast<unsigned>(blocks)),
                     dim3(WeightQuantPolicy::kThreads), 0, stream, in, q, scale, fmax, opt.eps);
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice("weightBlockQuant", e);
  });
  if (!launched) return launched;
  return out;
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_WEIGHT_BLOCK_QUANT_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
