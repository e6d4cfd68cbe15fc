// fp8scale: the reductions producers need, on the vendor's own primitives:
// CUB on NVIDIA (warp32), rocPRIM on AMD (wave64). Picked at compile time
// from platform.hpp's FP8SCALE_PLATFORM_* macros.
//
//   groupAllMax<kLanes>(v)  max over a logical warp of kLanes consecutive lanes
//                           (one quantization group), NaN ignored (fmaxf),
//                           result in every lane of that logical warp.
//   blockSum<kThreads>(v)   sum over the block, result in every thread.
#pragma once

#include "../platform.hpp"

#if defined(FP8SCALE_PLATFORM_CUDA)
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
#elif defined(FP8SCALE_PLATFORM_HIP)
#include <rocprim/block/block_reduce.hpp>
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

/// Sum over a 1-D block of kThreads threads, returned to every thread.
/// Contains a block barrier: every thread of the block must call it.
template <int kThreads>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float blockSum(float v) {
  __shared__ float total;
#if defined(FP8SCALE_PLATFORM_CUDA)
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  const float sum = BlockReduce(storage).Sum(v);
#else
  using BlockReduce = rocprim::block_reduce<float, kThreads>;
  __shared__ typename BlockReduce::storage_type storage;
  float sum;
  BlockReduce().reduce(v, sum, storage);
#endif
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  const float result = total;
  __syncthreads();  // `total` may be reused by the next call
  return result;
}

}  // namespace detail
}  // namespace fp8scale
#endif  // FP8SCALE_HAS_DEVICE
