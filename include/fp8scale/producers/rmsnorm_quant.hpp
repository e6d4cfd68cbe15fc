// fp8scale: (residual add) + RMSNorm + per-group fp8 quantization, with a
// compile-time TRANSPOSE_SCALE (the attention / MoE input site).
//
// For each row m of x[M, K]:
//   h = x + residual (fp32; without a residual h = x); residual = round(h)
//   (in place, the input type);
//   y = h * rsqrt(mean(h^2) + normEps) * weight   (fp32, h not re-rounded)
//   q, scale = group quant of y (fp32, never rounded to bf16 first);
//   optionally normOut = round(y) (the "emit_bf16" output).
// One block per row, of the warps that hold the row; from
// RmsNormPolicy::kRowsMinRows rows on, for rows of more than
// RmsNormPolicy::kShortRowVecs vectors, on CUDA with h parked in shared
// memory between the norm's reduction and the quantization, and on AMD one
// wave of blocks looping over the rows with the next row's loads in flight,
// h held in registers.
#pragma once

#include <cmath>
#include <cstdint>

#include "../spec/rmsnorm_quant.hpp"
#include "common.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

/// The block shapes of RMSNorm quant and when each runs (rmsNormQuantLaunch;
/// measured on the H200: docs/performance.md, "Tuning choices"):
///   - below kRowsMinRows rows, and for rows of at most kShortRowVecs vectors
///     at every M: a block per row of the whole warps that hold it, one
///     vector a thread (the shortest chain of loads, reduction and stores);
///   - from kRowsMinRows rows, longer rows: on CUDA the staged kernel (a
///     block of 512 x 2 vectors per row, h in shared memory, 3 blocks an
///     SM); on AMD, and for short rows past one grid, the row loop (256 x 4,
///     one wave of blocks looping over the rows);
///   - rows of more than 1024 vectors, up to kMaxCols: a block per row of
///     512 x 8 vectors.
template <class In>
struct RmsNormPolicy {
  // Rows of up to kWideThreads x kWideVecs vectors (K = 8192 bf16): the
  // block-per-row and staged shapes below hold one such row a block.
  static constexpr int kWideThreads = 1024;
  static constexpr int kWideVecs = 1;
  // The row loop: 256 x 4 holds the same rows in blocks of two an SM, one
  // wave of them looping (AMD's large-M kernel; docs/performance.md).
  static constexpr int kRowsThreads = 256;
  static constexpr int kRowsVecs = 4;
  static constexpr int kRowsMinBlocksPerSm = 2;
  static constexpr int kRowsResidentWaves = 1;
  // From this many rows the longer rows leave the block per row (0.74-0.76x
  // the copy there) for the staged kernel or the row loop.
  static constexpr index_t kRowsMinRows = 1024;
  // Up to here a row-sized block per row at every M (as fast as the staged
  // kernel at M >= 2048 at K = 5120; docs/performance.md).
  static constexpr index_t kShortRowVecs = 640;
  // The staged kernel: 512 x 2 vectors, h in shared memory, 3 blocks an SM
  // (0.92-0.93x the copy at M = 8192-16384; docs/performance.md).
  static constexpr int kStagedThreads = 512;
  static constexpr int kStagedVecs = 2;
  static constexpr int kStagedMinBlocksPerSm = 3;
#if defined(FP8SCALE_PLATFORM_HIP)
  // Measured on the H200 only. Its 33 KB of shared memory a block would let
  // one such block run per CU on gfx942 (64 KB of LDS; clang refuses the
  // 3-block occupancy target): AMD keeps the row loop from kRowsMinRows on
  // for rows of more than kShortRowVecs vectors (the staged kernel is not
  // instantiated there). Shorter rows take the row-sized block per row at
  // every M on AMD too, on the H200's numbers alone.
  static constexpr bool kRowsStaged = false;
#else
  static constexpr bool kRowsStaged = true;
#endif
  // Rows past kWideThreads x kWideVecs vectors, up to kMaxCols (32768 bf16,
  // the longest the checks accept): a block per row of 512 x 8.
  static constexpr int kLargeThreads = 512;
  static constexpr int kLargeVecs = 8;
  static constexpr index_t kMaxCols = static_cast<index_t>(kLargeThreads) * kLargeVecs * detail::kVecElems<In>;
  static_assert(kMaxCols == detail::kRmsNormMaxCols<In>, "the row length the argument checks allow");
  static_assert(kRowsThreads * kRowsVecs == kWideThreads * kWideVecs &&
                    kStagedThreads * kStagedVecs == kWideThreads * kWideVecs,
                "the wide shapes hold the same rows");
};

/// The kernels rmsNormQuant chooses between (RmsNormPolicy says when).
enum class RmsNormKernel {
  kBlockPerRow,  ///< rmsNormQuantKernel: a block per row of the whole warps that hold it, a vector a thread
  kStaged,       ///< rmsNormQuantStagedKernel (CUDA): a block per row of kStagedThreads x kStagedVecs, h in shared memory
  kRowLoop,      ///< rmsNormQuantRowsKernel: kRowsThreads x kRowsVecs blocks looping over the rows
  kLongRows,     ///< rmsNormQuantKernel, a block per row of kLargeThreads x kLargeVecs (rows of > 1024 vectors)
};

/// rmsNormQuant's launch: the kernel and the threads of its blocks.
struct RmsNormLaunch {
  RmsNormKernel kernel;
  index_t threads;
};

namespace detail {

/// The block of a row of `vecs` vectors, one a thread: whole warps, at most
/// kThreads threads (launchRmsNormQuantBlocks's `threads`).
template <int kThreads>
constexpr index_t rowBlockThreads(index_t vecs) {
  const index_t threads = alignUp(vecs, kWarpSize);
  return threads < kThreads ? threads : kThreads;
}

/// The launch rmsNormQuant makes for `rows` rows (M == 0: the padding row's
/// block alone, as a block per row) of `cols` columns of
/// `In` (a multiple of the 16-byte vector, at most RmsNormPolicy::kMaxCols),
/// by RmsNormPolicy: rows of more than kWideThreads x kWideVecs vectors take
/// kLongRows; from kRowsMinRows rows on, rows of more than kShortRowVecs
/// vectors, and short rows whose block per row (with a padding block) would
/// not fit one grid (HIP: 2^32 - 1 threads), take kStaged on CUDA and
/// kRowLoop on AMD; every other launch is kBlockPerRow in rowBlockThreads.
/// Pure host arithmetic: host builds plan as a CUDA build does (the warp
/// size and grid limits are the platform's, as for fitsOneGrid: one program
/// plans with one platform's).
template <class In>
constexpr RmsNormLaunch rmsNormQuantLaunch(index_t rows, index_t cols) {
  using Policy = RmsNormPolicy<In>;
  const index_t vecs = cols / kVecElems<In>;
  const index_t rowThreads = rowBlockThreads<Policy::kWideThreads>(vecs);
  if (vecs > static_cast<index_t>(Policy::kWideThreads) * Policy::kWideVecs)
    return {RmsNormKernel::kLongRows, Policy::kLargeThreads};
  if (rows >= Policy::kRowsMinRows && (vecs > Policy::kShortRowVecs || !fitsOneGrid(rows + 1, rowThreads))) {
    if (Policy::kRowsStaged) return {RmsNormKernel::kStaged, Policy::kStagedThreads};
    return {RmsNormKernel::kRowLoop, Policy::kRowsThreads};
  }
  return {RmsNormKernel::kBlockPerRow, rowThreads};
}

#if defined(FP8SCALE_HAS_DEVICE)

/// First half of the row body: h = x (+ residual, written back rounded) as
/// fp32, and for each of this thread's vectors the sum of its h^2 (partial;
/// h and partial 0 for vectors past the row). h[i] holds vector
/// v = i * kThreads + t of the row; `xAt(i, out)` supplies x of that vector as
/// fp32 (rounded to In) and `residualAt(i, out)` the residual's (called only
/// with a residual).
template <class In, int kThreads, int kMaxVecs, class XAt, class ResidualAt>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormGather(const RmsNormQuantInput<In>& in, index_t m, const XAt& xAt,
                                                        const ResidualAt& residualAt,
                                                        float (&h)[kMaxVecs][kVecElems<In>],
                                                        float (&partial)[kMaxVecs]) {
  constexpr int kVE = kVecElems<In>;
  const int vecs = static_cast<int>(in.cols / kVE);
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + t;
    partial[i] = 0.0f;
    if (v < vecs) {
      xAt(i, h[i]);  // x(m, v)
      if (in.residual != nullptr) {
        float rv[kVE];
        residualAt(i, rv);  // residual(m, v)
#pragma unroll
        for (int j = 0; j < kVE; ++j) h[i][j] += rv[j];
        storeVec(in.residual + m * in.ldResidual + v * kVE, h[i]);
      }
#pragma unroll
      for (int j = 0; j < kVE; ++j) partial[i] += h[i][j] * h[i][j];
    } else {
#pragma unroll
      for (int j = 0; j < kVE; ++j) h[i][j] = 0.0f;
    }
  }
}

/// rsqrt(mean(h^2) + normEps) of the row from this thread's partials
/// (rowSum, a block barrier; `parity` as rowSum takes it).
template <int kThreads, int kMaxVecs, class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float rmsNormInverse(const RmsNormQuantInput<In>& in,
                                                          const float (&partial)[kMaxVecs], int& parity) {
  const float total = rowSum<kThreads, kMaxVecs>(partial, parity);
  return rsqrtf(total / static_cast<float>(in.cols) + in.normEps);
}

/// y = h * inv * w (`weightAt(i, w)` supplies the weight of this thread's
/// vector i as fp32), normOut, fp8 and scales of row m; as rmsNormFinish
/// below, which computes inv first.
template <class In, class Format, class Rule, int kGroup, int kThreads, int kMaxVecs, class WeightAt, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormApply(const RmsNormQuantInput<In>& in, index_t m,
                                                       float (&h)[kMaxVecs][kVecElems<In>], float inv,
                                                       const WeightAt& weightAt, Fp8Matrix<Format> q,
                                                       ScaleOutput<Layout> scale, float fmax, float eps,
                                                       bool scalesEvictLast) {
  constexpr int kVE = kVecElems<In>;
  constexpr int kLanes = kGroup / kVE;  // threads per group in one pass
  const int vecs = static_cast<int>(in.cols / kVE);
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + t;
    const bool valid = v < vecs;
    float w[kVE];
    if (valid) {
      weightAt(i, w);
    } else {
#pragma unroll
      for (int j = 0; j < kVE; ++j) w[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kVE; ++j) h[i][j] = h[i][j] * inv * w[j];
    if (valid && in.normOut != nullptr) storeVec(in.normOut + m * in.ldNormOut + v * kVE, h[i]);
    std::uint8_t* const dst = valid ? &q(m, static_cast<index_t>(v) * kVE) : nullptr;  // (M, K) slice
    const float s = quantizeGroupSlice<Format, Rule, kLanes, kVE>(h[i], dst, fmax, eps, valid);
    if (valid) {
      const index_t g = static_cast<index_t>(v) * kVE / kGroup;
      if (t % kLanes == 0) storeScale(scale, m, g, s, scalesEvictLast);  // (M, G)
    }
  }
}

/// Second half: the row's sum of squares (rowSum: the same bits for every
/// block shape; `parity` as rowSum takes it), y = h * rsqrt(mean + normEps) *
/// w (`weightAt(i, w)` supplies the weight of this thread's vector i as
/// fp32), normOut, fp8 and scales of row m. Lanes past the row's end (h = 0) run
/// the arithmetic and the group reduction too, storing nothing: the shuffles
/// then sit in no divergent branch (which costs warp-collective
/// bookkeeping); validity is uniform over a group's kLanes lanes, since vecs
/// is a multiple of kLanes. Every thread of the block must call it (it
/// contains a block barrier).
template <class In, class Format, class Rule, int kGroup, int kThreads, int kMaxVecs, class WeightAt, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormFinish(const RmsNormQuantInput<In>& in, index_t m,
                                                        float (&h)[kMaxVecs][kVecElems<In>],
                                                        const float (&partial)[kMaxVecs], int& parity,
                                                        const WeightAt& weightAt, Fp8Matrix<Format> q,
                                                        ScaleOutput<Layout> scale, float fmax, float eps,
                                                        bool scalesEvictLast) {
  const float inv = rmsNormInverse<kThreads, kMaxVecs>(in, partial, parity);
  rmsNormApply<In, Format, Rule, kGroup, kThreads, kMaxVecs>(
      in, m, h, inv, weightAt, q, scale, fmax, eps, scalesEvictLast);
}

/// This thread's raw weight vectors (v = i * kThreads + t, v < vecs).
template <class In, int kThreads, int kMaxVecs>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void loadWeightRaw(const RmsNormQuantInput<In>& in, Bytes16 (&wRaw)[kMaxVecs]) {
  const int vecs = static_cast<int>(in.cols / kVecElems<In>);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + static_cast<int>(threadIdx.x);
    if (v < vecs) wRaw[i] = loadRaw(in.weight + v * kVecElems<In>);  // weight(v)
  }
}

/// This thread's raw vectors of row m: x, and the residual when there is
/// one (v = i * kThreads + t, v < vecs).
template <class In, int kThreads, int kMaxVecs>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void loadRowRaw(const RmsNormQuantInput<In>& in, index_t m,
                                                     Bytes16 (&xRaw)[kMaxVecs], Bytes16 (&rRaw)[kMaxVecs]) {
  constexpr int kVE = kVecElems<In>;
  const int vecs = static_cast<int>(in.cols / kVE);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int v = i * kThreads + static_cast<int>(threadIdx.x);
    if (v < vecs) {
      xRaw[i] = loadRaw(in.x + m * in.ldx + v * kVE);                                           // x(m, v)
      if (in.residual != nullptr) rRaw[i] = loadRaw(in.residual + m * in.ldResidual + v * kVE);  // residual(m, v)
    }
  }
}

/// The row body of RMSNorm quant for row `m`, with the row's input values
/// supplied by `loadX(v, out)`: out[0, kVecElems) = x(m, v * kVecElems + j) as
/// fp32 (already rounded to In). The fused allreduce passes its rank-ordered
/// sum; in.x itself is not read here. The weight is fetched first, as raw
/// bytes, so that its latency hides behind the reduction. `parity` as rowSum
/// takes it (one variable per block, kept across the block's rows). Every
/// thread of the block must call it (it contains a block barrier).
template <class In, class Format, class Rule, int kGroup, int kThreads, int kMaxVecs, class LoadX, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void rmsNormQuantRowFrom(const RmsNormQuantInput<In>& in, index_t m,
                                                              const LoadX& loadX, Fp8Matrix<Format> q,
                                                              ScaleOutput<Layout> scale, float fmax, float eps,
                                                              bool scalesEvictLast, int& parity) {
  constexpr int kVE = kVecElems<In>;
  const int t = static_cast<int>(threadIdx.x);
  Bytes16 wRaw[kMaxVecs];
  loadWeightRaw<In, kThreads, kMaxVecs>(in, wRaw);
  float h[kMaxVecs][kVE], partial[kMaxVecs];
  rmsNormGather<In, kThreads, kMaxVecs>(
      in, m, [&](int i, float* out) { loadX(i * kThreads + t, out); },
      [&](int i, float* out) { loadVec(in.residual + m * in.ldResidual + (i * kThreads + t) * kVE, out); }, h,
      partial);
  rmsNormFinish<In, Format, Rule, kGroup, kThreads, kMaxVecs>(
      in, m, h, partial, parity, [&](int i, float* w) { unpackVec<In>(wRaw[i], w); }, q, scale, fmax, eps,
      scalesEvictLast);
}

/// Row m of a launch over `scale`'s rows past its last: for the padding row
/// (m == M, when the view has padding slots: paddedRowTiles with tiles of
/// one row) the block writes every column's padding slots, a thread per
/// column. Block-uniform; the block must then do nothing else.
template <class T, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void writePaddingRow(const ScaleView<T, Layout>& scale, index_t m) {
  if (isPaddingTile(scale, m, 1))
    for (index_t g = threadIdx.x; g < scale.cols(); g += blockDim.x) writeScalePadding(scale, g, 0, 1);
}

/// One block per row; when the view has padding slots (kPadding) one more
/// block, m = M, writes them (writePaddingRow). Without padding slots the
/// kernel carries none of that code (the small-M kernel: see groupTile's
/// kPadding). kMaxVecs = 1 takes blocks of fewer than kThreads threads too
/// (whole warps holding the row: rowSum).
template <class In, class Format, class Rule, int kGroup, class Layout, int kThreads, int kMaxVecs,
          bool kPadding>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads)
    rmsNormQuantKernel(RmsNormQuantInput<In> in, Fp8Matrix<Format> q,
                       ScaleOutput<Layout> scale, float fmax, float eps,
                       bool scalesEvictLast) {
  static_assert(Layout::kPadsRows || !kPadding, "the layout has no padding rows");
  const index_t m = blockIdx.x;
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  if constexpr (kPadding) {  // without padding slots the grid has no block past the rows
    if (m >= in.rows) return writePaddingRow(scale, m);
  }
  const auto loadX = [&](int v, float* out) { loadVec(in.x + m * in.ldx + v * kVecElems<In>, out); };  // x(m, v)
  int parity = 0;
  rmsNormQuantRowFrom<In, Format, Rule, kGroup, kThreads, kMaxVecs>(in, m, loadX, q, scale, fmax, eps,
                                                                    scalesEvictLast, parity);
}

/// One block per row, as rmsNormQuantKernel, with h parked in shared memory
/// through the row's reduction instead of held in registers: each thread
/// stores its own slots and reads back only those (no barrier of its own,
/// no bank conflicts: [i][j][t]). Fewer registers live through the barrier
/// let kMinBlocks blocks run per SM (32 KB of shared memory a block for bf16
/// rows of 1024 vectors); measured against the row loop and the
/// alternatives: docs/performance.md, "Tuning choices". Same bits as
/// rmsNormQuantKernel and rmsNormQuantRowsKernel (rmsNormGather, rowSum,
/// rmsNormApply).
template <class In, class Format, class Rule, int kGroup, class Layout, int kThreads, int kMaxVecs,
          int kMinBlocks>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads, kMinBlocks)
    rmsNormQuantStagedKernel(RmsNormQuantInput<In> in, Fp8Matrix<Format> q,
                             ScaleOutput<Layout> scale, float fmax, float eps,
                             bool scalesEvictLast) {
  constexpr int kVE = kVecElems<In>;
  __shared__ float staged[kMaxVecs][kVE][kThreads];  // h of vector i * kThreads + t: [i][j][t]
  const index_t m = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  if (m >= in.rows) return writePaddingRow(scale, m);
  // The slice's raw loads first, so that all are in flight: the gather's
  // in-place residual stores would otherwise order them.
  Bytes16 xRaw[kMaxVecs], rRaw[kMaxVecs];
  loadRowRaw<In, kThreads, kMaxVecs>(in, m, xRaw, rRaw);
  float h[kMaxVecs][kVE], partial[kMaxVecs];
  rmsNormGather<In, kThreads, kMaxVecs>(
      in, m, [&](int i, float* out) { unpackVec<In>(xRaw[i], out); },
      [&](int i, float* out) { unpackVec<In>(rRaw[i], out); }, h, partial);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i)
#pragma unroll
    for (int j = 0; j < kVE; ++j) staged[i][j][t] = h[i][j];
  int parity = 0;
  const float inv = rmsNormInverse<kThreads, kMaxVecs>(in, partial, parity);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i)
#pragma unroll
    for (int j = 0; j < kVE; ++j) h[i][j] = staged[i][j][t];
  rmsNormApply<In, Format, Rule, kGroup, kThreads, kMaxVecs>(
      in, m, h, inv, [&](int i, float* w) { loadVec(in.weight + (i * kThreads + t) * kVE, w); }, q, scale, fmax, eps,
      scalesEvictLast);
}

/// A block per row, and the padding row's block when the view has padding
/// slots (paddedRowTiles), of `threads` threads, running
/// kernelOf(Rule{}, std::integral_constant<int, kGroup>{}, padding) for the
/// call's rule and group size, padding std::true_type when the view has
/// padding slots (column-major only) and std::false_type otherwise.
template <class In, class Format, class Layout, class KernelOf>
Status launchRowBlocks(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                       const QuantOptions& opt, float fmax, Stream stream, index_t threads, KernelOf kernelOf) {
  const index_t blocks = paddedRowTiles(scale, 1);  // the rows, and the padding row
  if (!fitsOneGrid(blocks, threads))
    return Status::error(StatusCode::kInvalidShape, "rmsNormQuant", "M", "too many rows for one launch", in.rows);
  if (blocks == 0) return Status::ok();
  return dispatchRuleAndGroup<Layout::kExponentBytes>(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    auto kernel = kernelOf(rule, group, std::false_type{});
    if constexpr (Layout::kPadsRows) {
      if (scale.hasPaddingRows()) kernel = kernelOf(rule, group, std::true_type{});
    }
    const DeviceError e = launchKernelPdl(opt.programmaticLaunch, kernel, dim3(static_cast<unsigned>(blocks)),
                                          dim3(static_cast<unsigned>(threads)), 0, stream, in, q, scale, fmax,
                                          opt.eps, storesScalesEvictLast(opt.scaleStore));
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice("rmsNormQuant", e);
  });
}

/// rmsNormQuantKernel<kThreads, kMaxVecs>, a block per row, in blocks of
/// `threads` threads: kThreads, or for kMaxVecs = 1 the whole warps that
/// hold the row (rmsNormQuantLaunch's threads, rowBlockThreads). The row
/// must fit, K / kVecElems <= threads * kMaxVecs: the plan guarantees it for
/// the launcher's calls (host test RmsNormLaunchPlan.EveryBlockHoldsItsRow).
template <class Format, int kThreads, int kMaxVecs, class In, class Layout>
Status launchRmsNormQuantBlocks(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                                const QuantOptions& opt, float fmax, Stream stream, index_t threads = kThreads) {
  return launchRowBlocks(in, q, scale, opt, fmax, stream, threads, [](auto rule, auto group, auto padding) {
    return rmsNormQuantKernel<In, Format, decltype(rule), decltype(group)::value,
                              Layout, kThreads, kMaxVecs, decltype(padding)::value>;
  });
}

/// rmsNormQuantStagedKernel<kThreads, kMaxVecs, kMinBlocks>, a block per
/// row of kThreads threads (the row must fit in kThreads * kMaxVecs vectors).
template <class Format, int kThreads, int kMaxVecs, int kMinBlocks, class In, class Layout>
Status launchRmsNormQuantStaged(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                                const QuantOptions& opt, float fmax, Stream stream) {
  // One kernel either way: the large-M kernel keeps its padding code (no
  // measurable cost there).
  return launchRowBlocks(in, q, scale, opt, fmax, stream, kThreads, [](auto rule, auto group, auto /*padding*/) {
    return rmsNormQuantStagedKernel<In, Format, decltype(rule), decltype(group)::value,
                                    Layout, kThreads, kMaxVecs, kMinBlocks>;
  });
}

/// RMSNorm quant for many rows: block b quantizes rows b, b + gridDim.x, ...,
/// each row's x and residual fetched as raw bytes before the previous row's
/// reduction, normalization and stores, so that they are in flight through
/// them. The weight is copied once into shared memory, each thread's own
/// vectors to its own slots (so no barrier), and read from there where it is
/// applied: holding it in registers across rows would spill, and reading it
/// from global memory puts an L2 round trip (the streamed rows evict it from
/// L1) on every row's path after the reduction. Its row loop keeps more
/// registers live than rmsNormQuantKernel (RmsNormPolicy picks the shape).
/// The block whose next row is M writes the padding slots (writePaddingRow).
template <class In, class Format, class Rule, int kGroup, class Layout, int kThreads, int kMaxVecs,
          int kMinBlocks>
FP8SCALE_GLOBAL void __launch_bounds__(kThreads, kMinBlocks)
    rmsNormQuantRowsKernel(RmsNormQuantInput<In> in, Fp8Matrix<Format> q,
                           ScaleOutput<Layout> scale, float fmax, float eps,
                           bool scalesEvictLast) {
  constexpr int kVE = kVecElems<In>;
  __shared__ Bytes16 weight[kMaxVecs][kThreads];  // [i][t]: weight of vector i * kThreads + t
  const int vecs = static_cast<int>(in.cols / kVE);
  const int t = static_cast<int>(threadIdx.x);
  index_t m = blockIdx.x;
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  Bytes16 xRaw[kMaxVecs], rRaw[kMaxVecs];
  const auto fetch = [&](index_t row) { loadRowRaw<In, kThreads, kMaxVecs>(in, row, xRaw, rRaw); };
  fetch(m);
  {
    Bytes16 wRaw[kMaxVecs];
    loadWeightRaw<In, kThreads, kMaxVecs>(in, wRaw);
#pragma unroll
    for (int i = 0; i < kMaxVecs; ++i)
      if (i * kThreads + t < vecs) weight[i][t] = wRaw[i];
  }
  int parity = 0;
  for (;;) {
    float h[kMaxVecs][kVE], partial[kMaxVecs];
    rmsNormGather<In, kThreads, kMaxVecs>(
        in, m, [&](int i, float* out) { unpackVec<In>(xRaw[i], out); },
        [&](int i, float* out) { unpackVec<In>(rRaw[i], out); }, h, partial);
    const index_t next = m + gridDim.x;  // block-uniform
    if (next < in.rows) fetch(next);
    rmsNormFinish<In, Format, Rule, kGroup, kThreads, kMaxVecs>(
        in, m, h, partial, parity, [&](int i, float* w) { unpackVec<In>(weight[i][t], w); }, q, scale, fmax, eps,
        scalesEvictLast);
    m = next;
    if (m >= in.rows) break;
  }
  // After the loop, where the row's registers are free (inside it the
  // padding code made AMD spill scalar registers): the block whose next row
  // is M writes the padding slots.
  writePaddingRow(scale, m);
}

/// Launches rmsNormQuantRowsKernel on min(M, residentWaves x the blocks the
/// device runs at once) blocks of kThreads threads, kMaxVecs vectors each.
template <class Format, int kThreads, int kMaxVecs, int kMinBlocks, class In, class Layout>
Status launchRmsNormQuantRows(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                              const QuantOptions& opt, float fmax, Stream stream, int residentWaves) {
  return dispatchRuleAndGroup<Layout::kExponentBytes>(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    const auto kernel = rmsNormQuantRowsKernel<In, Format, decltype(rule), decltype(group)::value, Layout,
                                               kThreads, kMaxVecs, kMinBlocks>;
    int resident = 0;
    const DeviceError queried = residentBlocks(&resident, kernel, kThreads);
    if (queried != kDeviceSuccess) return Status::fromDevice("rmsNormQuant", queried);
    const index_t cap = static_cast<index_t>(resident) * residentWaves;
    const index_t blocks = cap > 0 && in.rows > cap ? cap : in.rows;
    if (!fitsOneGrid(blocks, kThreads))
      return Status::error(StatusCode::kInvalidShape, "rmsNormQuant", "M", "too many rows for one launch", in.rows);
    const DeviceError e = launchKernelPdl(opt.programmaticLaunch, kernel, dim3(static_cast<unsigned>(blocks)),
                                          dim3(kThreads), 0, stream, in, q, scale, fmax, opt.eps,
                                          storesScalesEvictLast(opt.scaleStore));
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice("rmsNormQuant", e);
  });
}

/// rmsNormQuantRowsKernel in RmsNormPolicy<In>'s rows shape: rmsNormQuant's
/// large-M kernel on AMD; on CUDA, where the staged block per row takes
/// that range, the tests launch it directly to hold it to the launcher.
template <class Format, class In, class Layout>
Status launchRmsNormQuantRowLoop(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                                 const QuantOptions& opt, float fmax, Stream stream) {
  using Policy = RmsNormPolicy<In>;
  return launchRmsNormQuantRows<Format, Policy::kRowsThreads, Policy::kRowsVecs, Policy::kRowsMinBlocksPerSm>(
      in, q, scale, opt, fmax, stream, Policy::kRowsResidentWaves);
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// RMSNorm quant on `stream`: q[M, K], scales (M, K / groupSize) in `Layout`
/// (RowMajor: TRANSPOSE_SCALE false; ColMajor: true, padding zeroed; the
/// exponent layouts as groupQuant() writes them), residual updated in place,
/// normOut written when given.
/// Alignment: x, residual, weight, normOut and their row strides 16 bytes;
/// q and q.ld to one vector of fp8 (8 bytes for 16-bit inputs, 4 for fp32).
/// Errors as groupQuant(), plus kInvalidShape ('K' above RmsNormPolicy::kMaxCols),
/// kInvalidValue ('normEps' negative or NaN), 'weight' (kNullPointer; its K
/// elements past the address space: kInvalidShape; kMisaligned), and
/// kLdTooSmall / kInvalidShape / kMisaligned for residual and normOut
/// (detail::checkRmsNormQuant; docs/bad_input.md).
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> rmsNormQuant(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                                     ScaleOutput<Layout> scale, const QuantOptions& opt,
                                                     Stream stream) {
  using Policy = RmsNormPolicy<In>;
  float fmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant("rmsNormQuant", in, q, scale, opt, fmax); !s) return s;
  const QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (in.cols == 0) return out;  // no groups, no padding
  // A block per row (and the padding block) must fit one grid: HIP bounds a
  // grid's threads by 2^32 - 1, so from about 16.7M short rows on AMD the
  // row loop, whose grid is capped, takes them (rmsNormQuantLaunch).
  const RmsNormLaunch plan = detail::rmsNormQuantLaunch<In>(in.rows, in.cols);
  Status launched;
  switch (plan.kernel) {
    case RmsNormKernel::kLongRows:
      launched = detail::launchRmsNormQuantBlocks<Format, Policy::kLargeThreads, Policy::kLargeVecs>(in, q, scale, opt,
                                                                                                    fmax, stream);
      break;
    case RmsNormKernel::kStaged:   // CUDA (Policy::kRowsStaged)
    case RmsNormKernel::kRowLoop:  // AMD: the plan names one of the two, each platform builds only its own
      if constexpr (Policy::kRowsStaged)
        launched = detail::launchRmsNormQuantStaged<Format, Policy::kStagedThreads, Policy::kStagedVecs,
                                                    Policy::kStagedMinBlocksPerSm>(in, q, scale, opt, fmax, stream);
      else
        launched = detail::launchRmsNormQuantRowLoop<Format>(in, q, scale, opt, fmax, stream);
      break;
    case RmsNormKernel::kBlockPerRow:
      launched = detail::launchRmsNormQuantBlocks<Format, Policy::kWideThreads, Policy::kWideVecs>(
          in, q, scale, opt, fmax, stream, plan.threads);
      break;
  }
  return {launched, out};
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_RMSNORM_QUANT_INSTANCES)
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_RMSNORM_QUANT_ROW_LOOP_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
