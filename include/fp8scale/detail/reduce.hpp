// fp8scale: the reductions producers need, on the vendor's own primitives:
// CUB on NVIDIA (warp32), rocPRIM on AMD (wave64). Picked at compile time
// from platform.hpp's FP8SCALE_PLATFORM_* macros.
//
//   groupAllMax<kLanes>(v)  max over a logical warp of kLanes consecutive lanes
//                           (one quantization group), NaN ignored (fmaxf),
//                           result in every lane of that logical warp.
//   rowSum<kThreads, kVecs>(partials)  a row's sum of per-vector partials in
//                           an order independent of the block shape.
#pragma once

#include "../platform.hpp"

#if defined(FP8SCALE_PLATFORM_CUDA)
#include <cub/warp/warp_reduce.cuh>
#elif defined(FP8SCALE_PLATFORM_HIP)
#include <rocprim/warp/warp_reduce.hpp>
#endif

#if defined(FP8SCALE_HAS_DEVICE)
namespace fp8scale {
namespace detail {

/// fmaxf as a reduction operator: NaN operands are ignored, as in amax.
struct MaxIgnoreNaN {
  FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// The hardware warp width of the device pass (64 on gfx9, 32 on NVIDIA).
#if defined(FP8SCALE_PLATFORM_HIP)
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif

/// Max over each aligned run of kLanes lanes (a power of two <= the warp
/// size), broadcast to all kLanes lanes. All lanes of the run must call it.
template <int kLanes>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float groupAllMax(float v) {
  static_assert(kLanes >= 1 && kLanes <= kWarpSize && (kLanes & (kLanes - 1)) == 0,
                "a group spans a power-of-two run of lanes within one warp");
  if constexpr (kLanes == 1) {
    return v;
  } else {
#if defined(FP8SCALE_PLATFORM_CUDA)
    // The shuffle-based CUB reduction keeps no shared state for power-of-two
    // logical warps; its TempStorage is still declared, per the CUB contract.
    using WarpReduce = cub::WarpReduce<float, kLanes>;
    __shared__ typename WarpReduce::TempStorage storage;
    const float laneZero = WarpReduce(storage).Reduce(v, MaxIgnoreNaN{});
    const unsigned lane = threadIdx.x % 32u;
    const unsigned mask = kLanes == 32 ? 0xFFFFFFFFu : ((1u << kLanes) - 1u) << (lane & ~(kLanes - 1u));
    return cub::ShuffleIndex<kLanes>(laneZero, 0, mask);
#else
    using WarpReduce = rocprim::warp_reduce<float, kLanes, /*UseAllReduce=*/true>;
    __shared__ typename WarpReduce::storage_type storage;
    float out;
    WarpReduce().reduce(v, out, storage, MaxIgnoreNaN{});
    return out;
#endif
  }
}

/// The sum of a row's per-vector partials, in an order fixed by the row
/// alone: partial[i] of thread t belongs to vector v = i * kThreads + t, and
/// the result is (w0 + w1) + w2 + ... over the row's runs of kWarpSize
/// consecutive vectors, each run w summed by the vendor's warp reduction. The
/// same row thus gives the same bits whatever the block shape (1024 x 1 or
/// 256 x 4), so a row quantizes alike at any M and in the fused allreduce.
/// Returned to every thread: each adds the runs itself (the same sequence in
/// every thread), so one block barrier suffices. The run sums alternate
/// between two buffers by `parity` (flipped here; start it at 0 and pass the
/// same variable for every row the block sums): a warp that runs ahead into
/// the next row writes the other buffer, and reaches this row's buffer again
/// only after the next row's barrier, which every thread passes after its
/// reads here. Every thread of the block must call it. kThreads is a
/// multiple of the warp size.
template <int kThreads, int kVecs>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float rowSum(const float (&partial)[kVecs], int& parity) {
  static_assert(kThreads % kWarpSize == 0, "whole warps");
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kRuns = kWarps * kVecs;  // runs of kWarpSize vectors in the row
  __shared__ float runSums[2][kRuns];
  float* runs = runSums[parity];
  parity ^= 1;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
#if defined(FP8SCALE_PLATFORM_CUDA)
  using WarpReduce = cub::WarpReduce<float>;
  __shared__ typename WarpReduce::TempStorage storage[kWarps];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const float run = WarpReduce(storage[warp]).Sum(partial[i]);  // valid in lane 0
    if (lane == 0) runs[i * kWarps + warp] = run;                   // run of vectors (i * kThreads + warp * 32, ...)
  }
#else
  using WarpReduce = rocprim::warp_reduce<float, kWarpSize>;
  __shared__ typename WarpReduce::storage_type storage[kWarps];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float run;
    WarpReduce().reduce(partial[i], run, storage[warp]);  // valid in lane 0
    if (lane == 0) runs[i * kWarps + warp] = run;
  }
#endif
  __syncthreads();
  float sum = runs[0];
#pragma unroll 8
  for (int r = 1; r < kRuns; ++r) sum += runs[r];
  return sum;
}

}  // namespace detail
}  // namespace fp8scale
#endif  // FP8SCALE_HAS_DEVICE
