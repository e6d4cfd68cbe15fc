// fp8scale: the allreduce transport of the custom path: the rank-ordered sum
// of W partials over peer memory (one-stage: every rank reads every peer's
// row; two-stage: reduce-scatter into the ranks' scratch, then gather),
// the barriers around it, and allreduceSum(), the allreduce alone.
//
// Per row m and vector v, every rank computes
//   round_In(((x_0 + x_1) + x_2) + ... + x_{W-1})   (fp32, rank order)
// so the result is independent of the algorithm. The fused producer
// (producers/allreduce_rmsnorm_quant.hpp) runs its epilogue on these sums;
// the communicator and the barriers are in communicator.hpp and signal.hpp.
#pragma once

#include <cstdint>

#include "../detail/checks.hpp"
#include "../detail/vec.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"
#include "../status.hpp"
#include "communicator.hpp"
#include "signal.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

namespace detail {

/// Which variant a kernel runs. kGathered: no barriers, partials in one
/// buffer at a rank stride (the fallback's local step).
enum class AllreduceKernelAlgo : int { kGathered = 0, kOneStage = 1, kTwoStage = 2 };

/// Where a kernel finds the partials and the two-stage scratch, as this
/// rank addresses them. W comes from BarrierArgs::world and K from the
/// kernel's other arguments (one copy of each in scalar registers).
template <class In>
struct AllreduceSources {
  /// Rank p's partial [M, K], row stride ldx (kGathered: x[0] only).
  const In* x[kAllreduceMaxRanks] = {};
  /// Two-stage: scratch[p] = rank p's reduced chunks [M, K], row stride K.
  const AllreduceRankTable* table = nullptr;
  index_t ldx = 0;
  /// kGathered: elements from one rank's partial to the next.
  index_t rankStride = 0;
  /// The grid's size (an argument: gridDim is a device library call on AMD
  /// builds without ROCm's libraries, as in tests/isa).
  int blocks = 0;
};

/// Operation ids hashed into the barrier tag.
constexpr std::uint64_t kAllreduceOpFused = 1;
constexpr std::uint64_t kAllreduceOpSum = 2;

#if defined(FP8SCALE_HAS_DEVICE)

/// Tuning of the rank-ordered sum. NVIDIA: the loop over the pointer table
/// is unrolled completely, so that all W loads are in flight together and
/// the table entries stay kernel parameters (a run-time index would copy the
/// table to local memory). AMD: the 8 table pointers and 8 unrolled
/// conversions exceed the 102 scalar registers of gfx942 / gfx950 for fp16
/// input (scalar spills); a loop unrolled by two indexes the kernel argument
/// segment directly instead.
struct AllreducePolicy {
#if defined(FP8SCALE_PLATFORM_HIP)
  static constexpr bool kUnrollAllRanks = false;
#else
  static constexpr bool kUnrollAllRanks = true;
#endif
};

/// out[0, kVecElems) = round_In(x_0(m, v) + ... + x_{W-1}(m, v)) as fp32, the
/// ranks added in order 0..W-1 in fp32 (x_0 first, not 0 + x_0: -0 stays -0).
template <AllreduceKernelAlgo kAlgo, class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void sumRanks(const AllreduceSources<In>& src, int world, index_t m, int v,
                                                  float* out) {
  constexpr int kVE = kVecElems<In>;
  const index_t off = m * src.ldx + static_cast<index_t>(v) * kVE;  // (m, v)
  loadVec(src.x[0] + off, out);
  if constexpr (kAlgo == AllreduceKernelAlgo::kGathered) {
    for (int p = 1; p < world; ++p) {
      float t[kVE];
      loadVec(src.x[0] + p * src.rankStride + off, t);  // [W][rankStride]
#pragma unroll
      for (int j = 0; j < kVE; ++j) out[j] += t[j];
    }
  } else if constexpr (AllreducePolicy::kUnrollAllRanks) {
#pragma unroll
    for (int p = 1; p < kAllreduceMaxRanks; ++p) {
      if (p < world) {
        float t[kVE];
        loadVec(src.x[p] + off, t);
#pragma unroll
        for (int j = 0; j < kVE; ++j) out[j] += t[j];
      }
    }
  } else {
#pragma unroll 2
    for (int p = 1; p < world; ++p) {
      float t[kVE];
      loadVec(src.x[p] + off, t);
#pragma unroll
      for (int j = 0; j < kVE; ++j) out[j] += t[j];
    }
  }
  roundVec<In>(out);
}

/// Rank `owner`'s scratch buffer (a load from the rank table).
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE In* scratchOf(const AllreduceSources<In>& src, int owner) {
  return static_cast<In*>(src.table->scratch[owner]);
}

/// Two-stage, first half: this rank sums its column chunk of each of the
/// block's rows into its scratch (rounded to In). The chunk is
/// [rank * chunkVecs, (rank + 1) * chunkVecs) vectors.
template <class In, int kThreads>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void reduceScatterRows(const AllreduceSources<In>& src, int world, int rank,
                                                           index_t rows, index_t cols) {
  constexpr int kVE = kVecElems<In>;
  const int chunkVecs = static_cast<int>(cols / kVE) / world;
  In* dst = scratchOf(src, rank);
  for (index_t m = blockIdx.x; m < rows; m += src.blocks)
    for (int c = static_cast<int>(threadIdx.x); c < chunkVecs; c += kThreads) {
      const int v = rank * chunkVecs + c;
      float acc[kVE];
      sumRanks<AllreduceKernelAlgo::kOneStage>(src, world, m, v, acc);
      storeVec(dst + m * cols + static_cast<index_t>(v) * kVE, acc);  // scratch(m, v)
    }
}

/// Loads the reduced vector (m, v) from the scratch of the rank that owns
/// its column chunk.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void loadReduced(const AllreduceSources<In>& src, int world, index_t cols,
                                                      index_t m, int v, float* out) {
  constexpr int kVE = kVecElems<In>;
  const int chunkVecs = static_cast<int>(cols / kVE) / world;
  loadVec(scratchOf(src, v / chunkVecs) + m * cols + static_cast<index_t>(v) * kVE, out);  // scratch(m, v)
}

/// The part every allreduce kernel starts with: the start barrier (every
/// rank's partial is written: its kernel began after it) and, for two-stage,
/// the reduce-scatter and the mid barrier (every chunk of the block's rows is
/// in its owner's scratch). Returns false, after finishCall, when a barrier
/// failed: the block must return. `epoch` receives the call's epoch.
template <class In, int kThreads, AllreduceKernelAlgo kAlgo>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE bool allreducePrologue(const AllreduceSources<In>& src, const BarrierArgs& bar,
                                                            index_t rows, index_t cols, int* failed,
                                                            std::uint32_t& epoch) {
  epoch = 0;
  if constexpr (kAlgo != AllreduceKernelAlgo::kGathered) {
    epoch = callEpoch(bar);
    if (!blockBarrier(bar, AllreducePhase::kStart, epoch, failed)) {
      finishCall(bar, epoch, src.blocks);
      return false;
    }
  }
  if constexpr (kAlgo == AllreduceKernelAlgo::kTwoStage) {
    reduceScatterRows<In, kThreads>(src, bar.world, bar.rank, rows, cols);
    if (!blockBarrier(bar, AllreducePhase::kMid, epoch, failed)) {
      finishCall(bar, epoch, src.blocks);
      return false;
    }
  }
  return true;
}

/// The allreduce alone: out(m, :) = the reduced row m (kGathered: no
/// barriers). Two-stage may write into this rank's own scratch (the
/// long-row path does): the rank's own chunk is there already and is not
/// rewritten, since peers may be reading it.
template <class In, int kThreads, AllreduceKernelAlgo kAlgo>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads)
    allreduceSumKernel(AllreduceSources<In> src, BarrierArgs bar, index_t rows, index_t cols, In* out,
                       index_t ldOut) {
  constexpr bool kBarriers = kAlgo != AllreduceKernelAlgo::kGathered;
  constexpr int kVE = kVecElems<In>;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  std::uint32_t epoch = 0;
  if (!allreducePrologue<In, kThreads, kAlgo>(src, bar, rows, cols, &failed, epoch)) return;
  const int vecs = static_cast<int>(cols / kVE);
  const int chunkVecs = vecs / bar.world;
  const bool intoOwnScratch =
      kAlgo == AllreduceKernelAlgo::kTwoStage && out == scratchOf(src, bar.rank) && ldOut == cols;
  for (index_t m = blockIdx.x; m < rows; m += src.blocks)
    for (int v = static_cast<int>(threadIdx.x); v < vecs; v += kThreads) {
      In* dst = out + m * ldOut + static_cast<index_t>(v) * kVE;  // out(m, v)
      if constexpr (kAlgo == AllreduceKernelAlgo::kTwoStage) {
        const int owner = v / chunkVecs;
        if (intoOwnScratch && owner == bar.rank) continue;
        *reinterpret_cast<Bytes16*>(dst) =
            *reinterpret_cast<const Bytes16*>(scratchOf(src, owner) + m * cols + v * kVE);  // scratch(m, v)
      } else {
        float acc[kVE];
        sumRanks<kAlgo>(src, bar.world, m, v, acc);
        storeVec(dst, acc);
      }
    }
  if constexpr (kAlgo == AllreduceKernelAlgo::kOneStage)
    (void)blockBarrier(bar, AllreducePhase::kEnd, epoch, &failed);
  if constexpr (kBarriers) finishCall(bar, epoch, src.blocks);
  (void)epoch;
  (void)chunkVecs;
}

/// Threads of the allreduce-only kernel.
constexpr int kAllreduceSumThreads = 512;

#endif  // FP8SCALE_HAS_DEVICE

/// Checks shared by the custom launchers: the algorithm's preconditions and
/// the buffer capacity. `staged`: the call also passes the reduced rows
/// through the scratch buffer (the long rows of the fused producer, with
/// either algorithm: allreduceStagesRows).
template <class In>
Status checkAllreduceShape(const char* fn, AllreduceAlgorithm algo, int world, index_t rows, index_t cols,
                           std::size_t bufferBytes, bool staged) {
  constexpr index_t kVE = kVecElems<In>;
  if (algo != AllreduceAlgorithm::kOneStage && algo != AllreduceAlgorithm::kTwoStage)
    return Status::error(StatusCode::kInvalidValue, fn, "algorithm", "unknown algorithm", static_cast<int>(algo));
  if (cols % kVE != 0)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "not a multiple of the 16-byte vector", cols, kVE);
  if (algo == AllreduceAlgorithm::kTwoStage) {
    if (cols % (kVE * world) != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "K",
                           "two-stage needs K to split into world chunks of whole 16-byte vectors", cols,
                           kVE * world);
  }
  const index_t messageBytes = spanMul(spanMul(rows, cols), static_cast<index_t>(sizeof(In)));  // -1: > 2^48
  if ((algo == AllreduceAlgorithm::kTwoStage || staged) &&
      (messageBytes < 0 || messageBytes > static_cast<index_t>(bufferBytes)))
    return Status::error(StatusCode::kInvalidShape, fn, "M",
                         "message larger than the communicator's scratch buffer (use the fallback)", rows,
                         static_cast<std::int64_t>(bufferBytes));
  return Status::ok();
}

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

namespace detail {

/// Fills the partial pointers of `comm`'s ranks for an input at x (rows
/// of ldx elements); kInvalidValue naming 'x' when x is not registered.
template <class In>
Status allreduceSources(const char* fn, const AllreduceCommunicator& comm, const In* x, index_t rows, index_t cols,
                        index_t ldx, AllreduceSources<In>& src) {
  const std::size_t bytes = rows == 0 ? 0 : static_cast<std::size_t>((rows - 1) * ldx + cols) * sizeof(In);
  const void* perRank[kAllreduceMaxRanks];
  if (!comm.findRegistered(x, bytes, perRank))
    return Status::error(StatusCode::kInvalidValue, fn, "x",
                         "not inside a buffer registered with the communicator (stagingBuffer(), registerBuffers())",
                         static_cast<std::int64_t>(bytes));
  for (int p = 0; p < kAllreduceMaxRanks; ++p) {
    src.x[p] = static_cast<const In*>(perRank[p]);
  }
  src.table = comm.rankTable();
  src.ldx = ldx;
  src.rankStride = 0;
  return Status::ok();
}

/// Grid of a custom-path call of `rows` rows with `kernel`: min(rows,
/// co-residency limit), at least 1. kUnsupportedDevice when the ranks
/// sharing the device cannot all be resident.
template <class Kernel>
Status allreduceGrid(const char* fn, const AllreduceCommunicator& comm, Kernel kernel, int threads, index_t rows,
                     int& grid) {
  int limit = 0;
  if (Status s = comm.gridLimit(fn, kernel, threads, limit); !s) return s;
  if (limit <= 0)
    return Status::error(StatusCode::kUnsupportedDevice, fn, "ranksPerDevice",
                         "the ranks' grids cannot be co-resident on this device (spin-waits would deadlock)",
                         comm.ranksPerDevice());
  grid = static_cast<int>(rows < limit ? rows : limit);
  if (grid < 1) grid = 1;
  return Status::ok();
}

/// Launches allreduceSumKernel<kAlgo>: out = the reduced rows. `comm` is
/// null for kGathered (grid = M, no barriers); `op` goes into the tag.
template <AllreduceKernelAlgo kAlgo, class In>
Status launchAllreduceSum(const char* fn, const AllreduceCommunicator* comm, const AllreduceSources<In>& src,
                          int world, index_t rows, index_t cols, In* out, index_t ldOut, std::uint64_t op,
                          Stream stream) {
  constexpr int kThreads = kAllreduceSumThreads;
  const auto kernel = allreduceSumKernel<In, kThreads, kAlgo>;
  int grid = 0;
  BarrierArgs bar{};
  if constexpr (kAlgo == AllreduceKernelAlgo::kGathered) {
    if (!fitsOneGrid(rows, kThreads))
      return Status::error(StatusCode::kInvalidShape, fn, "M", "too many rows for one launch", rows);
    grid = static_cast<int>(rows);
    bar.world = world;
  } else {
    if (Status s = allreduceGrid(fn, *comm, kernel, kThreads, rows, grid); !s) return s;
    bar = comm->barrierArgs(allreduceTag((op << 8) | static_cast<std::uint64_t>(kAlgo), static_cast<std::uint64_t>(rows),
                                         static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(src.ldx),
                                         sizeof(In) | (static_cast<std::uint64_t>(grid) << 8) |
                                             (static_cast<std::uint64_t>(kThreads) << 24)));
  }
  AllreduceSources<In> args = src;
  args.blocks = grid;
  const DeviceError e = launchKernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, stream, args, bar,
                                     rows, cols, out, ldOut);
  return e == kDeviceSuccess ? Status::ok() : Status::fromDevice(fn, e);
}

}  // namespace detail

/// The allreduce alone on `stream`: out[M, K] (row stride ldOut, this
/// rank's) = round_In of the rank-ordered fp32 sum of the partials (x: this
/// rank's, registered, row stride ldx). Same algorithms, barriers and
/// faults as allreduceRmsNormQuant. x, out and both row strides 16-byte
/// aligned. Errors: kInvalidShape (negative extents; 'x' / 'out' spans
/// beyond 2^48 bytes or the address space; K not a multiple of the vector;
/// 'M': a two-stage message larger than the scratch buffer), kLdTooSmall,
/// kNullPointer, kMisaligned ('x', 'out', 'ldx', 'ldOut'), kInvalidValue
/// ('x' not registered), kUnsupportedDevice.
template <class In>
Status allreduceSum(const AllreduceCommunicator& comm, const In* x, index_t rows, index_t cols, index_t ldx, In* out,
                    index_t ldOut, Stream stream, AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto) {
  const char* fn = "allreduceSum";
  if (rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", rows);
  if (cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", cols);
  if (ldx < cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "row stride is smaller than K", ldx, cols);
  if (ldOut < cols)
    return Status::error(StatusCode::kLdTooSmall, fn, "ldOut", "row stride is smaller than K", ldOut, cols);
  // The spans first: they bound M * K, which the algorithm choice multiplies.
  const index_t inBytes = static_cast<index_t>(sizeof(In));
  if (Status s = detail::checkSpan(fn, "x", x, detail::stridedSpan(rows, cols, ldx), inBytes); !s) return s;
  if (Status s = detail::checkSpan(fn, "out", out, detail::stridedSpan(rows, cols, ldOut), inBytes); !s) return s;
  const AllreduceAlgorithm algo = chooseAllreduceAlgorithm(algorithm, comm.world(), rows, cols,
                                                           static_cast<int>(sizeof(In)), comm.options().oneStageMaxBytes);
  if (Status s = detail::checkAllreduceShape<In>(fn, algo, comm.world(), rows, cols, comm.bufferBytes(), false); !s)
    return s;
  if (rows == 0 || cols == 0) return Status::ok();
  if (x == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x", "null input with M > 0");
  if (out == nullptr) return Status::error(StatusCode::kNullPointer, fn, "out", "null output with M > 0");
  if (Status s = detail::checkAligned(fn, "x", x, 16); !s) return s;
  if (Status s = detail::checkAligned(fn, "out", out, 16); !s) return s;
  if (!detail::isWholeVectors(ldx, inBytes, 16))
    return Status::error(StatusCode::kMisaligned, fn, "ldx", "row stride in bytes is not a multiple of 16", ldx, 16);
  if (!detail::isWholeVectors(ldOut, inBytes, 16))
    return Status::error(StatusCode::kMisaligned, fn, "ldOut", "row stride in bytes is not a multiple of 16", ldOut,
                         16);
  detail::AllreduceSources<In> src;
  if (Status s = detail::allreduceSources(fn, comm, x, rows, cols, ldx, src); !s) return s;
  if (algo == AllreduceAlgorithm::kTwoStage)
    return detail::launchAllreduceSum<detail::AllreduceKernelAlgo::kTwoStage>(fn, &comm, src, comm.world(), rows, cols,
                                                                             out, ldOut,
                                                                             detail::kAllreduceOpSum, stream);
  return detail::launchAllreduceSum<detail::AllreduceKernelAlgo::kOneStage>(fn, &comm, src, comm.world(), rows, cols,
                                                                           out, ldOut,
                                                                           detail::kAllreduceOpSum, stream);
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_ALLREDUCE_SUM_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
