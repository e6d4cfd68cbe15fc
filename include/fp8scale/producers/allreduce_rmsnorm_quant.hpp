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
// allreduceSum and the transport both paths share are in
// allreduce/allreduce_sum.hpp. Device faults of the custom path (a peer that
// never arrives, a peer with another shape) are read with
// comm.checkErrors(); see allreduce/signal.hpp.
// Rows of up to RmsNormPolicy's wide shape (K <= 8192 for 16-bit inputs,
// 4096 for fp32) run as one kernel; longer rows as the allreduce kernel into
// a staging buffer followed by rmsNormQuant() (allreduceStagesRows()).
// The NCCL / RCCL fallback object is in allreduce_rmsnorm_quant_nccl.hpp.
#pragma once

#include <cstdint>

#include "../allreduce/allreduce_sum.hpp"
#include "rmsnorm_quant.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

namespace detail {

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

#if defined(FP8SCALE_HAS_DEVICE)

/// The fused kernel (rows that fit RmsNormPolicy's wide block shape: one
/// vector per thread). Each block takes rows blockIdx.x, + blocks, ...
template <class In, class Format, class Rule, int kGroup, class Layout, int kThreads,
          AllreduceKernelAlgo kAlgo>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads)
    allreduceRmsNormQuantKernel(AllreduceSources<In> src, BarrierArgs bar, RmsNormQuantInput<In> in,
                                Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
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

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

namespace detail {

/// The fused kernel for rows of the wide block shape.
template <class Format, AllreduceKernelAlgo kAlgo, class In, class Layout>
Status launchAllreduceRmsNormQuantFused(const char* fn, const AllreduceCommunicator* comm,
                                        const AllreduceSources<In>& src, int world, const RmsNormQuantInput<In>& in,
                                        Fp8Matrix<Format> q, ScaleOutput<Layout> scale, const QuantOptions& opt,
                                        float fmax, Stream stream) {
  constexpr int kThreads = RmsNormPolicy<In>::kWideThreads;
  static_assert(RmsNormPolicy<In>::kWideVecs == 1, "the fused kernel holds one vector a thread");
  return dispatchRuleAndGroup<Layout::kExponentBytes>(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    const auto kernel =
        allreduceRmsNormQuantKernel<In, Format, decltype(rule), decltype(group)::value, Layout, kThreads, kAlgo>;
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

/// rmsNormQuant() of reduced (or no) rows, without programmatic launch: a
/// spin-waiting grid is not launched ahead of its stream's previous kernel.
template <class Format, class In, class Layout>
Status localRmsNormQuant(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                         QuantOptions opt, Stream stream) {
  opt.programmaticLaunch = false;
  return rmsNormQuant<Format>(in, q, scale, opt, stream).status();
}

/// Both row shapes: fused for wide rows; allreduce into `stage` + the
/// rmsNormQuant launcher for long rows.
template <class Format, AllreduceKernelAlgo kAlgo, class In, class Layout>
Status launchAllreduceRmsNormQuant(const char* fn, const AllreduceCommunicator* comm, const AllreduceSources<In>& src,
                                   int world, In* stage, const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                   ScaleOutput<Layout> scale, const QuantOptions& opt, float fmax,
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
  return localRmsNormQuant(local, q, scale, opt, stream);
}

}  // namespace detail

/// The custom path on `stream`: this rank's part of the allreduce of the W
/// partials (in.x: this rank's, [M, K] with row stride in.ldx, inside a
/// buffer registered with `comm`), then RMSNorm quant of the reduced rows
/// into this rank's q[M, K], scales (M, K / groupSize) in `Layout` (RowMajor:
/// TRANSPOSE_SCALE false; ColMajor: true, padding zeroed; the exponent
/// layouts as groupQuant() writes them), residual (in place) and normOut, exactly as rmsNormQuant() on the reduced input.
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
                                                              ScaleOutput<Layout> scale, const QuantOptions& opt,
                                                              Stream stream,
                                                              AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto) {
  const char* fn = "allreduceRmsNormQuant";
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant(fn, in, q, scale, opt, fmax); !s) return s;
  const AllreduceAlgorithm algo = chooseAllreduceAlgorithm(algorithm, comm.world(), in.rows, in.cols,
                                                           static_cast<int>(sizeof(In)),
                                                           comm.options().oneStageMaxBytes);
  if (Status s = detail::checkAllreduceShape<In>(fn, algo, comm.world(), in.rows, in.cols, comm.bufferBytes(),
                                                      detail::allreduceStagesRows<In>(in.cols));
      !s)
    return s;
  const QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.rows == 0 || in.cols == 0)  // nothing to reduce: the padding row alone, as rmsNormQuant writes it
    return {detail::localRmsNormQuant(in, q, scale, opt, stream), out};
  detail::AllreduceSources<In> src;
  if (Status s = detail::allreduceSources(fn, comm, in.x, in.rows, in.cols, in.ldx, src); !s) return s;
  In* stage = static_cast<In*>(comm.scratch(comm.rank()));
  const Status launched =
      algo == AllreduceAlgorithm::kTwoStage
          ? detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kTwoStage>(
                fn, &comm, src, comm.world(), stage, in, q, scale, opt, fmax, stream)
          : detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kOneStage>(
                fn, &comm, src, comm.world(), stage, in, q, scale, opt, fmax, stream);
  return {launched, out};
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
/// ('rankStride' < (M - 1) * ldx + K, or the W partials spanning more than
/// 2^48 bytes or past the end of the address space; 'stage' likewise);
/// kMisaligned ('rankStride' not a multiple of 16 bytes, 'stage' not
/// 16-byte aligned); kNullPointer ('stage' missing for long rows).
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> gatheredRmsNormQuant(const RmsNormQuantInput<In>& in, int world,
                                                             index_t rankStride, In* stage, Fp8Matrix<Format> q,
                                                             ScaleOutput<Layout> scale, const QuantOptions& opt,
                                                             Stream stream) {
  const char* fn = "gatheredRmsNormQuant";
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant(fn, in, q, scale, opt, fmax); !s) return s;
  if (world < 1) return Status::error(StatusCode::kInvalidValue, fn, "world", "must be >= 1", world);
  if (in.rows > 0 && rankStride < (in.rows - 1) * in.ldx + in.cols)
    return Status::error(StatusCode::kInvalidShape, fn, "rankStride", "partials of two ranks overlap", rankStride,
                         (in.rows - 1) * in.ldx + in.cols);
  const index_t inBytes = static_cast<index_t>(sizeof(In));
  if (in.rows > 0 && !detail::isWholeVectors(rankStride, inBytes, 16))
    return Status::error(StatusCode::kMisaligned, fn, "rankStride", "not a multiple of 16 bytes", rankStride, 16);
  // All W partials: x spans (W - 1) * rankStride past rank 0's rows.
  if (in.rows > 0 && in.cols > 0) {
    const index_t span = detail::spanAdd(detail::spanMul(world - 1, rankStride),
                                         detail::stridedSpan(in.rows, in.cols, in.ldx));
    if (Status s = detail::checkSpan(fn, "rankStride", in.x, span, inBytes); !s) return s;
  }
  if (in.rows > 0 && detail::allreduceStagesRows<In>(in.cols)) {
    if (stage == nullptr)
      return Status::error(StatusCode::kNullPointer, fn, "stage", "long rows need a staging buffer [M, K]", in.cols);
    if (Status s = detail::checkSpan(fn, "stage", stage, detail::spanMul(in.rows, in.cols), inBytes); !s) return s;
    if (Status s = detail::checkAligned(fn, "stage", stage, 16); !s) return s;
  }
  const QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.rows == 0 || in.cols == 0)  // nothing to reduce: the padding row alone, as rmsNormQuant writes it
    return {detail::localRmsNormQuant(in, q, scale, opt, stream), out};
  detail::AllreduceSources<In> src;
  src.x[0] = in.x;
  src.ldx = in.ldx;
  src.rankStride = rankStride;
  return {detail::launchAllreduceRmsNormQuant<Format, detail::AllreduceKernelAlgo::kGathered>(
              fn, nullptr, src, world, stage, in, q, scale, opt, fmax, stream),
          out};
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_ALLREDUCE_RMSNORM_QUANT_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
