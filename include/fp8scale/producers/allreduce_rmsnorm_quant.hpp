// fp8scale: fused allreduce + residual add + RMSNorm + per-group fp8
// quantization, with a compile-time TRANSPOSE_SCALE (the tensor-parallel
// attention / MoE input site).
//
// Every rank p holds a partial x_p[M, K]. Per row m, every rank computes
//   x   = round_In(((x_0 + x_1) + x_2) + ... + x_{W-1})   (fp32, rank order)
// and then exactly what rmsNormQuant() does with that x, on its own outputs:
//   h = x + residual (fp32); residual = round_In(h) (in place);
//   y = h * rsqrt(mean(h^2) + normEps) * weight; q, scale = group quant of y;
//   optionally normOut = round_In(y).
// The row body is rmsNormQuant's own (detail::rmsNormQuantRowFrom), fed the
// rank-ordered sum instead of a load, so for the same x the bits equal
// rmsNormQuant()'s on the same device. The fixed order makes the sum
// independent of the algorithm: one-stage, two-stage and the gathered
// fallback (NCCL / RCCL all-gather + gatheredRmsNormQuant) give the same
// bits. reference::allreduceRmsNormQuant (reference/allreduce_fused.hpp) is
// the host specification.
//
// Launchers:
//   allreduceRmsNormQuant(comm, in, q, scale, opt, stream[, algorithm])
//     the custom path; in.x is this rank's partial, inside a buffer
//     registered with `comm`.
//   gatheredRmsNormQuant(in, world, rankStride, stage, q, scale, opt, stream)
//     the local half of the fallback: in.x points at W partials, rank p's at
//     in.x + p * rankStride (what an all-gather leaves); no communication.
//   allreduceSum(comm, x, rows, cols, ldx, out, ldOut, stream[, algorithm])
//     the allreduce alone: out = round_In(rank-ordered sum).
// Device faults of the custom path (a peer that never arrives, a peer with
// another shape) are read with comm.checkErrors(); see allreduce/signal.hpp.
// Rows of up to RmsNormPolicy's wide shape (K <= 8192 for 16-bit inputs,
// 4096 for fp32) run as one kernel; longer rows as the allreduce kernel into
// a staging buffer followed by rmsNormQuant() (allreduceStagesRows()).
// The NCCL / RCCL fallback object is in allreduce/nccl_fallback.hpp.
#pragma once

#include <cstdint>

#include "../allreduce/communicator.hpp"
#include "../allreduce/signal.hpp"
#include "rmsnorm_quant.hpp"

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

/// The fused kernel (rows that fit RmsNormPolicy's wide block shape: one
/// vector per thread). Each block takes rows blockIdx.x, + blocks, ...
template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kThreads,
          AllreduceKernelAlgo kAlgo>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads)
    allreduceRmsNormQuantKernel(AllreduceSources<In> src, BarrierArgs bar, RmsNormQuantInput<In> in,
                                Fp8Matrix<Format> q, ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale,
                                float fmax, float eps, bool scalesEvictLast) {
  constexpr bool kBarriers = kAlgo != AllreduceKernelAlgo::kGathered;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  std::uint32_t epoch = 0;
  if (!allreducePrologue<In, kThreads, kAlgo>(src, bar, in.rows, in.cols, &failed, epoch)) return;

  // Epilogue: RMSNorm quant of each of the block's rows on the reduced x.
  // The block whose next row is M writes the padding slots (writePaddingRow).
  int parity = 0;  // rowSum's buffer, alternating over the block's rows
  index_t m = blockIdx.x;
  for (; m < in.rows; m += src.blocks) {
    if constexpr (kAlgo == AllreduceKernelAlgo::kTwoStage) {
      const auto loadX = [&](int v, float* out) { loadReduced(src, bar.world, in.cols, m, v, out); };
      rmsNormQuantRowFrom<In, Format, Rule, kGroup, kThreads, 1>(in, m, loadX, q, scale, fmax, eps, scalesEvictLast,
                                                                 parity);
    } else {
      const auto loadX = [&](int v, float* out) { sumRanks<kAlgo>(src, bar.world, m, v, out); };
      rmsNormQuantRowFrom<In, Format, Rule, kGroup, kThreads, 1>(in, m, loadX, q, scale, fmax, eps, scalesEvictLast,
                                                                 parity);
    }
  }
  writePaddingRow(scale, m);

  // End (one-stage): no rank returns while a peer may still read its partial.
  // Two-stage needs none: partials are read before the mid barrier only, and
  // a scratch is rewritten only after the next call's start barrier, which
  // every rank reaches only when its previous call is complete.
  if constexpr (kAlgo == AllreduceKernelAlgo::kOneStage)
    (void)blockBarrier(bar, AllreducePhase::kEnd, epoch, &failed);
  if constexpr (kBarriers) finishCall(bar, epoch, src.blocks);
  (void)epoch;
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

/// Whether rows of `cols` elements take the long-row block shape of
/// RmsNormPolicy (K > 8192 for 16-bit inputs, K > 4096 for fp32). Those
/// rows are not fused into one kernel (the long-row body already holds 128
/// registers a thread): the allreduce kernel writes the reduced rows to a
/// staging buffer (this rank's scratch; the caller's `stage` on the gathered
/// path) and rmsNormQuant() runs on it. Same bits, one launch more.
template <class In>
constexpr bool allreduceStagesRows(index_t cols) {
  return cols / kVecElems<In> > static_cast<index_t>(RmsNormPolicy<In>::kWideThreads) * RmsNormPolicy<In>::kWideVecs;
}

/// Checks shared by the custom launchers: the algorithm's preconditions and
/// the buffer capacity. `fused`: the fused call (long rows are staged in the
/// scratch buffer, also by one-stage).
template <class In>
Status checkAllreduceShape(const char* fn, AllreduceAlgorithm algo, int world, index_t rows, index_t cols,
                           std::size_t bufferBytes, bool fused) {
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
  if ((algo == AllreduceAlgorithm::kTwoStage || (fused && allreduceStagesRows<In>(cols))) &&
      rows * cols * static_cast<index_t>(sizeof(In)) > static_cast<index_t>(bufferBytes))
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

/// The fused kernel for rows of the wide block shape.
template <class Format, AllreduceKernelAlgo kAlgo, class In, class Layout>
Status launchAllreduceRmsNormQuantFused(const char* fn, const AllreduceCommunicator* comm,
                                        const AllreduceSources<In>& src, int world, const RmsNormQuantInput<In>& in,
                                        Fp8Matrix<Format> q, ScaleView<float, Layout> scale, const QuantOptions& opt,
                                        float fmax, Stream stream) {
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  constexpr int kThreads = RmsNormPolicy<In>::kWideThreads;
  static_assert(RmsNormPolicy<In>::kWideVecs == 1, "the fused kernel holds one vector a thread");
  return dispatchRuleAndGroup(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    const auto kernel =
        allreduceRmsNormQuantKernel<In, Format, decltype(rule), decltype(group)::value, TRANSPOSE_SCALE, kThreads, kAlgo>;
    int grid = 0;
    BarrierArgs bar{};
    if constexpr (kAlgo == AllreduceKernelAlgo::kGathered) {
      if (!fitsOneGrid(in.rows, kThreads))
        return Status::error(StatusCode::kInvalidShape, fn, "M", "too many rows for one launch", in.rows);
      grid = static_cast<int>(in.rows);
      bar.world = world;
    } else {
      if (Status s = allreduceGrid(fn, *comm, kernel, kThreads, in.rows, grid); !s) return s;
      bar = comm->barrierArgs(allreduceTag((kAllreduceOpFused << 8) | static_cast<std::uint64_t>(kAlgo),
                                           static_cast<std::uint64_t>(in.rows), static_cast<std::uint64_t>(in.cols),
                                           static_cast<std::uint64_t>(in.ldx),
                                           sizeof(In) | (static_cast<std::uint64_t>(grid) << 8) |
                                               (static_cast<std::uint64_t>(kThreads) << 24)));
    }
    AllreduceSources<In> args = src;
    args.blocks = grid;
    const DeviceError e = launchKernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, stream, args, bar,
                                       in, q, scale, fmax, opt.eps,
                                       storesScalesEvictLast(opt.scaleStore));
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice(fn, e);
  });
}

/// Both row shapes: fused for wide rows; allreduce into `stage` + the
/// rmsNormQuant launcher for long rows.
template <class Format, AllreduceKernelAlgo kAlgo, class In, class Layout>
Status launchAllreduceRmsNormQuant(const char* fn, const AllreduceCommunicator* comm, const AllreduceSources<In>& src,
                                   int world, In* stage, const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                   ScaleView<float, Layout> scale, const QuantOptions& opt, float fmax,
                                   Stream stream) {
  if (!allreduceStagesRows<In>(in.cols))
    return launchAllreduceRmsNormQuantFused<Format, kAlgo>(fn, comm, src, world, in, q, scale, opt, fmax, stream);
  if (Status s = launchAllreduceSum<kAlgo>(fn, comm, src, world, in.rows, in.cols, stage, in.cols, kAllreduceOpFused,
                                           stream);
      !s)
    return s;
  RmsNormQuantInput<In> local = in;
  local.x = stage;
  local.ldx = in.cols;
  QuantOptions plain = opt;
  plain.programmaticLaunch = false;
  return rmsNormQuant<Format>(local, q, scale, plain, stream).status();
}

}  // namespace detail

/// The custom path on `stream`: this rank's part of the allreduce of the W
/// partials (in.x: this rank's, [M, K] with row stride in.ldx, inside a
/// buffer registered with `comm`), then RMSNorm quant of the reduced rows
/// into this rank's q[M, K], scales (M, K / groupSize) in `Layout` (RowMajor:
/// TRANSPOSE_SCALE false; ColMajor: true, padding zeroed), residual (in
/// place) and normOut, exactly as rmsNormQuant() on the reduced input.
/// Every rank calls it with the same M, K, ldx, options and algorithm, on
/// its own stream; the kernels of all ranks must run concurrently.
/// `algorithm`: kAuto applies chooseAllreduceAlgorithm().
/// Errors (nothing launched): as rmsNormQuant(); kInvalidValue ('x') when
/// in.x is not registered; kInvalidShape ('K') when two-stage cannot split K,
/// ('M') when a two-stage message exceeds the buffer; kUnsupportedDevice when
/// the grids cannot be co-resident. Faults during the call (a peer that does
/// not arrive, a peer with another shape): comm.checkErrors().
/// M == 0 communicates with no rank: a column-major view's padding slots are
/// written by rmsNormQuant's padding row on this rank's stream, and nothing
/// is launched without them. opt.programmaticLaunch is ignored (a spin-waiting
/// grid is not launched ahead of its stream's previous kernel).
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> allreduceRmsNormQuant(const AllreduceCommunicator& comm,
                                                              const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                                              ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                              Stream stream,
                                                              AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  const char* fn = "allreduceRmsNormQuant";
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant(fn, in, q, scale, opt, fmax); !s) return s;
  const AllreduceAlgorithm algo = chooseAllreduceAlgorithm(algorithm, comm.world(), in.rows, in.cols,
                                                           static_cast<int>(sizeof(In)),
                                                           comm.options().oneStageMaxBytes);
  if (Status s = detail::checkAllreduceShape<In>(fn, algo, comm.world(), in.rows, in.cols, comm.bufferBytes(), true);
      !s)
    return s;
  QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.rows == 0 || in.cols == 0) {  // nothing to reduce: the padding row alone, as rmsNormQuant writes it
    QuantOptions plain = opt;
    plain.programmaticLaunch = false;
    if (Status s = rmsNormQuant<Format>(in, q, scale, plain, stream).status(); !s) return s;
    return out;
  }
  detail::AllreduceSources<In> src;
  if (Status s = detail::allreduceSources(fn, comm, in.x, in.rows, in.cols, in.ldx, src); !s) return s;
  In* stage = static_cast<In*>(comm.scratch(comm.rank()));
  const Status launched =
      algo == AllreduceAlgorithm::kTwoStage
          ? detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kTwoStage>(
                fn, &comm, src, comm.world(), stage, in, q, scale, opt, fmax, stream)
          : detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kOneStage>(
                fn, &comm, src, comm.world(), stage, in, q, scale, opt, fmax, stream);
  if (!launched) return launched;
  return out;
}

/// The fallback's local step on `stream`: in.x points at `world` partials,
/// rank p's [M, K] (row stride in.ldx) at in.x + p * rankStride (an
/// all-gather's output: rankStride = M * ldx); sums them in rank order and
/// runs the same epilogue as allreduceRmsNormQuant. No communication, no
/// barriers, any world >= 1. `stage`: [M, K] contiguous scratch that the
/// reduced rows pass through when K takes RmsNormPolicy's long-row shape
/// (K / kVecElems > kWideThreads * kWideVecs: K > 8192 for 16-bit inputs,
/// K > 4096 for fp32); ignored (may be null) otherwise.
/// Errors: as rmsNormQuant(); kInvalidValue ('world' < 1); kInvalidShape
/// ('rankStride' < (M - 1) * ldx + K); kMisaligned ('rankStride' not a
/// multiple of 16 bytes, 'stage' not 16-byte aligned); kNullPointer ('stage'
/// missing for long rows).
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> gatheredRmsNormQuant(const RmsNormQuantInput<In>& in, int world,
                                                             index_t rankStride, In* stage, Fp8Matrix<Format> q,
                                                             ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                             Stream stream) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  const char* fn = "gatheredRmsNormQuant";
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant(fn, in, q, scale, opt, fmax); !s) return s;
  if (world < 1) return Status::error(StatusCode::kInvalidValue, fn, "world", "must be >= 1", world);
  if (in.rows > 0 && rankStride < (in.rows - 1) * in.ldx + in.cols)
    return Status::error(StatusCode::kInvalidShape, fn, "rankStride", "partials of two ranks overlap", rankStride,
                         (in.rows - 1) * in.ldx + in.cols);
  if ((rankStride * static_cast<index_t>(sizeof(In))) % 16 != 0)
    return Status::error(StatusCode::kMisaligned, fn, "rankStride", "not a multiple of 16 bytes", rankStride, 16);
  if (in.rows > 0 && detail::allreduceStagesRows<In>(in.cols)) {
    if (stage == nullptr)
      return Status::error(StatusCode::kNullPointer, fn, "stage", "long rows need a staging buffer [M, K]", in.cols);
    if (Status s = detail::checkAligned(fn, "stage", stage, 16); !s) return s;
  }
  QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.rows == 0 || in.cols == 0) {  // nothing to reduce: the padding row alone, as rmsNormQuant writes it
    QuantOptions plain = opt;
    plain.programmaticLaunch = false;
    if (Status s = rmsNormQuant<Format>(in, q, scale, plain, stream).status(); !s) return s;
    return out;
  }
  detail::AllreduceSources<In> src;
  src.x[0] = in.x;
  src.ldx = in.ldx;
  src.rankStride = rankStride;
  const Status launched = detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kGathered>(
      fn, nullptr, src, world, stage, in, q, scale, opt, fmax, stream);
  if (!launched) return launched;
  return out;
}

/// The allreduce alone on `stream`: out[M, K] (row stride ldOut, this
/// rank's) = round_In of the rank-ordered fp32 sum of the partials (x: this
/// rank's, registered, row stride ldx). Same algorithms, barriers and
/// faults as allreduceRmsNormQuant. x, out and both row strides 16-byte
/// aligned. Errors: kInvalidShape (negative extents, K not a multiple of
/// the vector), kLdTooSmall, kNullPointer, kMisaligned, kInvalidValue ('x'
/// not registered), kUnsupportedDevice.
template <class In>
Status allreduceSum(const AllreduceCommunicator& comm, const In* x, index_t rows, index_t cols, index_t ldx, In* out,
                    index_t ldOut, Stream stream, AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto) {
  const char* fn = "allreduceSum";
  if (rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", rows);
  if (cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", cols);
  if (ldx < cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "row stride is smaller than K", ldx, cols);
  if (ldOut < cols)
    return Status::error(StatusCode::kLdTooSmall, fn, "ldOut", "row stride is smaller than K", ldOut, cols);
  const AllreduceAlgorithm algo = chooseAllreduceAlgorithm(algorithm, comm.world(), rows, cols,
                                                           static_cast<int>(sizeof(In)), comm.options().oneStageMaxBytes);
  if (Status s = detail::checkAllreduceShape<In>(fn, algo, comm.world(), rows, cols, comm.bufferBytes(), false); !s)
    return s;
  if (rows == 0 || cols == 0) return Status::ok();
  if (x == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x", "null input with M > 0");
  if (out == nullptr) return Status::error(StatusCode::kNullPointer, fn, "out", "null output with M > 0");
  if (Status s = detail::checkAligned(fn, "x", x, 16); !s) return s;
  if (Status s = detail::checkAligned(fn, "out", out, 16); !s) return s;
  if ((ldx * static_cast<index_t>(sizeof(In))) % 16 != 0 || (ldOut * static_cast<index_t>(sizeof(In))) % 16 != 0)
    return Status::error(StatusCode::kMisaligned, fn, "ldx", "row strides must be multiples of 16 bytes", ldx, 16);
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

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
