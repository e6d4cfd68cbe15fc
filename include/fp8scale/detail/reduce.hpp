// fp8scale: the reductions producers need, on the vendor's own primitives:
// CUB on NVIDIA (warp32), rocPRIM on AMD (wave64). Picked at compile time
// from platform.hpp's FP8SCALE_PLATFORM_* macros.
//
//   groupAllMax<kLanes>(v)  max over a logical warp of kLanes consecutive lanes
//                           (one quantization group), NaN ignored (fmaxf),
//                           result in every lane of that logical warp.
//   rowSum<kThreads, kVecs>(partials, parity)  a row's sum of per-vector
//                           partials in an order independent of the block
//                           shape.
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

// kWarpSize (platform.hpp): 64 on gfx9, 32 on NVIDIA.

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
/// alone: partial[i] of thread t belongs to vector v = i * kThreads + t; each
/// run of kWarpSize consecutive vectors is summed by the vendor's warp
/// reduction, and the run sums (zero past the row's end) by the vendor's
/// warp reduction again, lane r holding run r (and, for rows of more than
/// kWarpSize runs, runs r + kWarpSize, r + 2 kWarpSize, ... added to it in
/// that order). The same row thus gives the same bits whatever the block
/// shape (1024 x 1 or 256 x 4: 32 run slots each on NVIDIA, 16 runs of 64
/// on AMD's wave64; slots past the row hold +0), so a row quantizes alike
/// at any M and in the fused allreduce. Returned to every thread: every warp
/// reduces the run sums itself after one block barrier (a handful of
/// instructions a warp), so no second barrier hands a total around. The run
/// sums alternate between two buffers by `parity` (flipped here; start it at
/// 0 and pass the same variable for every row the block sums): a warp that
/// runs ahead into the next row writes the other buffer, and reaches this
/// row's buffer again only after the next row's barrier, which every thread
/// passes after its reads here. Every thread of the block must call it.
/// kThreads is a multiple of the warp size. A block of fewer threads than
/// kThreads (whole warps, kVecs = 1: a block sized to a shorter row) holds
/// fewer runs; the slots of the warps it lacks are read as +0, what those
/// warps would have summed.
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
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;  // kWarps, or fewer (kVecs = 1)
  // Run r, summed by warp r % kWarps of the block; +0 if the block lacks that warp.
  const auto runSum = [&](int r) { return r % kWarps < warps ? runs[r] : 0.0f; };
#if defined(FP8SCALE_PLATFORM_CUDA)
  using WarpReduce = cub::WarpReduce<float>;
  __shared__ typename WarpReduce::TempStorage storage[kWarps];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const float run = WarpReduce(storage[warp]).Sum(partial[i]);  // valid in lane 0
    if (lane == 0) runs[i * kWarps + warp] = run;                   // run of vectors (i * kThreads + warp * 32, ...)
  }
  __syncthreads();
  float mine = lane < kRuns ? runSum(lane) : 0.0f;
#pragma unroll
  for (int r = lane + kWarpSize; r < kRuns; r += kWarpSize) mine += runSum(r);
  // storage[warp] again: CUB's shuffle reduction of full warps keeps nothing
  // in it (its TempStorage is empty), so no __syncwarp is needed between.
  const float laneZero = WarpReduce(storage[warp]).Sum(mine);  // valid in lane 0
  return cub::ShuffleIndex<kWarpSize>(laneZero, 0, 0xFFFFFFFFu);
#else
  using WarpReduce = rocprim::warp_reduce<float, kWarpSize>;
  __shared__ typename WarpReduce::storage_type storage[kWarps];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float run;
    WarpReduce().reduce(partial[i], run, storage[warp]);  // valid in lane 0
    if (lane == 0) runs[i * kWarps + warp] = run;
  }
  __syncthreads();
  float mine = lane < kRuns ? runSum(lane) : 0.0f;
#pragma unroll
  for (int r = lane + kWarpSize; r < kRuns; r += kWarpSize) mine += runSum(r);
  using AllReduce = rocprim::warp_reduce<float, kWarpSize, /*UseAllReduce=*/true>;
  __shared__ typename AllReduce::storage_type allStorage[kWarps];
  float total;
  AllReduce().reduce(mine, total, allStorage[warp]);
  return total;
#endif
}

}  // namespace detail
}  // namespace fp8scale
#endif  // FP8SCALE_HAS_DEVICE
