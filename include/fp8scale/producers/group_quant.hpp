// fp8scale: per-token-group fp8 quantization with a compile-time
// TRANSPOSE_SCALE.
//
// x[M, K] (any row stride), or x[M, H, D] flattened to [M, H * D] with any
// token and head strides (the MLA o_proj input), is quantized in groups of
// groupSize columns into q[M, K] (fp8, row stride ldq) and one scale per
// (row, group) written through a ScaleView: RowMajor{ld} when TRANSPOSE_SCALE
// is false, ColMajor{ld} (the consumer's [G][ld] bytes, padding slots zeroed)
// when it is true. One kernel body serves both; it indexes only through the
// view. Numerics: README "Numerics"; bit-identical to reference::groupQuant.
//
// Work mapping: a thread owns 32 contiguous input bytes of one group (two
// 16-byte loads: 16 bf16/fp16 or 8 fp32 values), so a group of 128 bf16 is 8
// lanes and a 256-thread block holds 32 groups (lane l holding vectors l and
// l + 8 of the group instead, so that each load instruction reads whole
// sectors, measured 4-6% slower on the H200 at M >= 8192: two 8-byte fp8
// stores a thread instead of one of 16), arranged as a tile of
// kTileRows x kTileGroups (row, group) pairs. The tile is row-major-friendly
// (8 groups of one row: one 32-byte sector of row-major scales) or
// column-major-friendly (8 rows of one group: one sector of [G][ld] scales),
// chosen by TRANSPOSE_SCALE, so scale stores are whole sectors either way.
// Grids with fewer blocks than the device has SMs (small M) run 128-thread
// blocks of smaller slices instead, spreading the tensor over more SMs and
// each group's work over more lanes: one 16-byte vector a thread for group
// quant (8 groups of 128 bf16 a block), 4 values a thread for SiLU-clamp (4
// groups of 128 a block, a group over a whole warp; GroupTilePolicy).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common.hpp"

namespace fp8scale {

/// The input of group quant: element (m, k) with k = h * D + d lives at
/// x[m * tokenStride + h * headStride + d]. A plain matrix is H = 1. With
/// H > 1 the strides are free (the input is only read): [M, H, D] row-major
/// (tokenStride = H * D, headStride = D) and the transposed [H, M, D] of a
/// batched attention output (tokenStride = D, headStride = M * D) are both
/// legal; both must be multiples of the 16-byte vector in bytes.
template <class In>
struct GroupQuantInput {
  const In* x = nullptr;
  index_t rows = 0;         ///< M (tokens)
  index_t heads = 1;        ///< H
  index_t headDim = 0;      ///< D; K = H * D
  index_t tokenStride = 0;  ///< elements between rows
  index_t headStride = 0;   ///< elements between heads of one row

  /// x[M, K] with row stride ldx.
  static GroupQuantInput matrix(const In* x, index_t M, index_t K, index_t ldx) { return {x, M, 1, K, ldx, K}; }
  /// x[M, H, D] with the given token and head strides (elements).
  static GroupQuantInput headMajor(const In* x, index_t M, index_t H, index_t D, index_t tokenStride,
                                   index_t headStride) {
    return {x, M, H, D, tokenStride, headStride};
  }
  FP8SCALE_HOST_DEVICE constexpr index_t cols() const { return heads * headDim; }
};

/// Tuning of the group-local producers (group quant, SiLU-clamp quant).
template <class In>
struct GroupTilePolicy {
  static constexpr int kThreads = 256;
  static constexpr int kLoadsPerThread = 2;
  static constexpr int kElems = kLoadsPerThread * detail::kVecElems<In>;  // values per thread
  /// fp32 scales per 32-byte sector: the tile edge along the scale layout's
  /// contiguous dimension.
  static constexpr int kSectorScales = 8;
  /// Group quant: grids up to kLoopFreeMaxWaves x what the device runs at
  /// once run a block per row tile (40 registers); larger grids are capped
  /// at kGroupQuantWaves x the resident blocks of a kernel whose blocks loop
  /// over row tiles with the next tile's raw bytes in flight (groupTile,
  /// ring depth kGroupQuantDepth, 54 registers), which evens out the last
  /// wave. SiLU-clamp: always a block per row tile.
  /// H200, K = 7168 / I = 2048, fraction of the copy bandwidth at M = 2048 /
  /// 8192 / 65536 (tune/ entries of benchmarks/results/
  /// h200_bench_producers_ab.json, one run):
  ///   group quant row-major: loop 1.22 / 0.93 / 0.94, a block per tile
  ///     1.08 / 0.95 / 0.95; column-major: loop 1.14 / 0.93 / 0.96, a block
  ///     per tile 1.03 / 0.93 / 0.95; two waves, or rings of 2-4 tiles: no
  ///     better. Below that (M <= 512) a block per tile is 0.1-0.3 us faster
  ///     (M = 512: 3.18 vs 3.52 us).
  ///   SiLU-clamp (57-63 registers looping, 40 not): a block per tile 0.84 /
  ///     0.90 / 1.01, loop 0.83 / 0.88 / 0.97.
  static constexpr int kLoopFreeMaxWaves = 2;
  /// Blocks of kSmallGridThreads threads of kSmallGridElems values (one
  /// 16-byte vector; SiLU-clamp: kSiluSmallGridElems below) a thread when a
  /// grid of kThreads-thread blocks would leave SMs without a block (small
  /// M; on the H200 M <= 72 for group quant at K = 7168, M <= 256 / 168 for
  /// SiLU-clamp at I = 2048 / 3072 column-major, 260 / 172 row-major): the
  /// tile's loads spread over 4x the SMs, and each group's arithmetic
  /// (SiLU-clamp's two MUFU operations a value, the amax chain) over twice
  /// the lanes. H200, bf16, groups of 128, row-major:
  ///   - tune/ entries of benchmarks/results/h200_bench_producers.json (one
  ///     run), 256 threads of 16 values -> 64 of 16 -> 128 of 8 at M = 1 /
  ///     8 / 64: SiLU-clamp 1.83 -> 1.81 -> 1.57, 2.11 -> 1.85 -> 1.63,
  ///     2.19 -> 1.97 -> 1.77 us (I = 2048), 2.05 -> 1.81 -> 1.57, 2.12 ->
  ///     1.88 -> 1.61, 2.23 -> 2.00 -> 1.86 us (I = 3072); group quant 1.48
  ///     -> 1.44 -> 1.42, 1.55 -> 1.50 -> 1.46, 1.75 -> 1.74 -> 1.72 us.
  ///     64 threads of 8: SiLU-clamp 0-4% slower than 128 of 8, group quant
  ///     at M = 64 1.92 us.
  ///   - A/B of the producers, 64 threads of 16 -> 128 of 8, two builds in
  ///     alternating runs (benchmarks/results/h200_small_grid_slices.txt,
  ///     means of 3 rounds' medians): SiLU-clamp 5-14% faster at every
  ///     benchmarked M <= 128 in both layouts and with PDL (row-major M = 1:
  ///     1.80 -> 1.55 us); group quant 1-4% faster at M <= 8 and within 2%
  ///     above (one entry 2.2% slower); M = 512 (not a small grid) unchanged.
  /// Grids that fill the SMs keep 16 values a thread: 8-value slices were
  /// slower there when measured (benchmarks/results/HISTORY.md, "Earlier
  /// rounds"; the looping kernel: h200_round5.txt, part 1). fp16 behaves as
  /// bf16; fp32 input (4 values a thread, a whole warp per group of 128) was
  /// not measured.
  static constexpr int kSmallGridThreads = 128;
  static constexpr int kSmallGridElems = detail::kVecElems<In>;
  static_assert(kSmallGridThreads <= kThreads, "the kernels' __launch_bounds__ is kThreads");
  /// SiLU-clamp's small grids take kSiluSmallGridElems values a thread
  /// instead: half a 16-byte vector of bf16 / fp16 (an 8-byte load each of
  /// gate and up; fp32's one vector is 4 values already), a group of 128 over
  /// a whole warp. Its time on small grids is one lane's chain of two MUFU
  /// operations a value, which this halves. H200, bf16, I = 2048 / 3072,
  /// tune/ entries e4/d0/t128 against e8/d0/t128
  /// (benchmarks/results/h200_round10.txt, parts 1-2; medians of 5
  /// interleaved repetitions), row-major: M = 1 1.54 -> 1.35 / 1.55 -> 1.39
  /// us, M = 16 1.63 -> 1.45 / 1.64 -> 1.50, M = 64 1.76 -> 1.62 / 1.85 ->
  /// 1.80, M = 256 2.27 -> 2.22 / 2.67 -> 2.59 (column-major alike): faster
  /// at every M a small grid covers; at M = 512 (a full grid, 16 values a
  /// thread: 2.97 / 3.57 us) 3.04 -> 3.21 / 3.58 -> 4.44. Group quant
  /// keeps one vector (its chain is one multiply a value): 4 values were
  /// 1.37 -> 1.37 us at M = 1 and 1.70 -> 1.86 at M = 64.
  static constexpr int kSiluSmallGridElems = 4;
  static constexpr int kGroupQuantWaves = 1;
  static constexpr int kGroupQuantDepth = 1;
  static_assert(kGroupQuantDepth > 0, "the capped-grid kernel loops");
};

namespace detail {
/// Below this many (row, group) slices a launch never queries occupancy (the
/// looping kernel's cap): the grid is far smaller than two waves of the
/// device (H200: 132 SMs x 6 blocks x 32 slices a wave). Small grids ask for
/// the SM count only (kSmallGridQueryBlocks).
constexpr index_t kGroupTileCapMinSlices = 16384;
/// Grids of at least this many blocks never ask for the SM count (no device
/// has this many SMs; the small-grid block size is for grids below it).
/// Smaller launches (decode) do: cudaGetDevice / hipGetDevice and a
/// mutex-guarded lookup on the host, and a device error pending from earlier
/// work can surface there rather than at the launch.
constexpr index_t kSmallGridQueryBlocks = 1024;
}  // namespace detail

namespace detail {

/// The smallest power of two >= n, capped at cap (a power of two).
inline int powerOfTwoAtLeast(index_t n, int cap) {
  int p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

/// Picks the (rows x groups) tile of one block of `slots` group slices: the
/// scale layout's contiguous dimension `sector` wide when the shape allows,
/// narrower along a dimension the tensor does not fill (M = 1 gets one row of
/// `slots` groups, not `sector` rows of which one is used).
template <bool TRANSPOSE_SCALE>
inline void chooseTile(int slots, int sector, index_t rows, index_t groups, int& tileRows, int& tileGroups) {
  const int fitRows = powerOfTwoAtLeast(rows, slots);
  const int fitGroups = powerOfTwoAtLeast(groups, slots);
  const int edge = sector < slots ? sector : slots;
  if (TRANSPOSE_SCALE) {  // rows are contiguous in [G][ld] scale memory
    tileRows = edge < fitRows ? edge : fitRows;
    tileGroups = slots / tileRows;
    if (tileGroups > fitGroups) {
      tileGroups = fitGroups;
      tileRows = slots / tileGroups;
    }
  } else {  // groups are contiguous in [M][ld] scale memory
    tileGroups = edge < fitGroups ? edge : fitGroups;
    tileRows = slots / tileGroups;
    if (tileRows > fitRows) {
      tileRows = fitRows;
      tileGroups = slots / tileRows;
    }
  }
}

/// Blocks along the row-tile axis of a group-tile grid with `groupTiles`
/// blocks along the other: one per row tile while the grid has at most
/// `targetBlocks` blocks (or targetBlocks <= 0); otherwise about
/// targetBlocks / groupTiles blocks, evened out so that every block loops over
/// the same number of row tiles (or one fewer).
inline index_t rowTileBlocks(index_t rowTiles, index_t groupTiles, index_t targetBlocks) {
  if (targetBlocks <= 0 || rowTiles * groupTiles <= targetBlocks) return rowTiles;
  const index_t cap = targetBlocks / groupTiles > 1 ? targetBlocks / groupTiles : 1;
  const index_t steps = (rowTiles + cap - 1) / cap;
  return (rowTiles + steps - 1) / steps;
}

#if defined(FP8SCALE_HAS_DEVICE)

/// The raw bytes of one thread's slice of kElems inputs, held as loaded
/// until they are converted: kElems / kVecElems 16-byte vectors (4 registers
/// each), or one 8-byte half vector for a slice of kVecElems / 2 inputs (4
/// bf16 / fp16 values; fp32 slices are whole vectors, an fp8 store being at
/// least 4 bytes).
template <class In, int kElems>
struct RawSlice {
  static constexpr int kBytes = kElems * static_cast<int>(sizeof(In));
  static_assert(kBytes % 16 == 0 || (kBytes == 8 && sizeof(In) == 2),
                "a slice is whole 16-byte vectors or half a vector of 16-bit inputs");
  static constexpr int kPieceElems = kElems < kVecElems<In> ? kElems : kVecElems<In>;
  using Piece = std::conditional_t<(kBytes < 16), Bytes8, Bytes16>;
  Piece b[kElems / kPieceElems];
};

/// Issues the loads of the kElems inputs at `src` (aligned to the slice's
/// piece: 16 bytes, or 8 for a half vector).
template <class In, int kElems>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE RawSlice<In, kElems> loadSlice(const In* src) {
  using Slice = RawSlice<In, kElems>;
  Slice r;
#pragma unroll
  for (int i = 0; i < kElems / Slice::kPieceElems; ++i)
    r.b[i] = loadRaw<typename Slice::Piece>(src + i * Slice::kPieceElems);
  return r;
}

/// The slice's kElems inputs as fp32, in memory order.
template <class In, int kElems>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void unpackSlice(const RawSlice<In, kElems>& r, float* v) {
  using Slice = RawSlice<In, kElems>;
#pragma unroll
  for (int i = 0; i < kElems / Slice::kPieceElems; ++i) unpackVec<In>(r.b[i], v + i * Slice::kPieceElems);
}

/// Group quant's input access: fetch() issues the loads of slice
/// (m, k .. k + kElems) of x (a slice never straddles a head); values()
/// converts them to fp32.
template <class In>
struct PlainLoad {
  GroupQuantInput<In> in;
  template <int kElems>
  using Raw = RawSlice<In, kElems>;

  template <int kElems>
  FP8SCALE_DEVICE FP8SCALE_FORCEINLINE Raw<kElems> fetch(index_t m, index_t k) const {
    // Head of column k; K < 2^31 is checked on the host, so 32-bit division.
    const index_t h = in.heads == 1 ? 0
                                    : static_cast<index_t>(static_cast<std::uint32_t>(k) /
                                                           static_cast<std::uint32_t>(in.headDim));
    const In* src = in.x + m * in.tokenStride + h * in.headStride + (k - h * in.headDim);  // x(m, h, d)
    return loadSlice<In, kElems>(src);
  }

  template <int kElems>
  FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void values(const Raw<kElems>& r, float (&v)[kElems]) const {
    unpackSlice<In, kElems>(r, v);
  }
};

/// The tiled body shared by group quant and SiLU-clamp quant. `load` has
/// fetch(m, k) (the raw loads of columns [k, k + kElems) of row m) and
/// values(raw, v) (their fp32 values). Block (blockIdx.x, blockIdx.y) owns
/// groups [y * tileGroups, ...) of the row tiles x, x + gridDim.x, ...: a 2-D
/// grid, so no thread divides to find its tile. When the grid holds fewer row
/// tiles than the tensor (large M: groupTileGrid caps it near what the device
/// runs at once), each thread keeps the raw bytes of its next kDepth tiles
/// in flight while it quantizes the current one, so its loads overlap the
/// reduction and the stores. kDepth = 0: one row tile per block, no loop
/// (the grid must not be capped). (Two slices a thread converted to fp32 up front
/// measured 6-12% slower on the H200: 59-63 registers halve the resident warps.)
/// scalesEvictLast: storeScale's L2 policy (ScaleStorePolicy resolved).
/// kScalePadding (false: the view has no padding slots): with kDepth = 0
/// the grid has one more column of blocks (blockIdx.x = gridDim.x - 1),
/// block y writing the padding of group tile y's columns (zeroScalePadding,
/// its threads mapped to the slots as a tile's are to its scales); with
/// kDepth > 0 (a capped grid, where extra blocks would wait for slots and
/// lengthen the tail) the last row's groups do (ownsScalePadding).
template <class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, bool kScalePadding, int kElems, int kDepth,
          class Load>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void groupTile(const Load& load, index_t rows, index_t groups,
                                                    Fp8Matrix<Format> q,
                                                    ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale,
                                                    float fmax, float eps, int tileRows, int tileGroups,
                                                    bool scalesEvictLast) {
  constexpr int kLanes = kGroup / kElems;  // threads per group
  static_assert(kGroup % kElems == 0, "a group is a whole number of thread slices");
  static_assert(TRANSPOSE_SCALE || !kScalePadding, "row-major views have no padding slots");
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;

  // Tile coordinates; the scale layout's contiguous dimension is fastest.
  // tileRows and tileGroups are powers of two (chooseTile): mask and shift.
  const int r = TRANSPOSE_SCALE ? slot & (tileRows - 1) : slot >> __popc(tileGroups - 1);
  const int c = TRANSPOSE_SCALE ? slot >> __popc(tileRows - 1) : slot & (tileGroups - 1);
  index_t m = static_cast<index_t>(blockIdx.x) * tileRows + r;
  const index_t g = static_cast<index_t>(blockIdx.y) * tileGroups + c;
  const index_t rowStep = static_cast<index_t>(gridDim.x) * tileRows;
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  if (m >= rows || g >= groups) {  // the whole group's lanes leave together
    if constexpr (kScalePadding && kDepth == 0) {
      // The padding column of blocks (launchGroupTile): every thread of it is past the rows.
      if (blockIdx.x == gridDim.x - 1 && g < groups)
        zeroScalePadding(scale, g, static_cast<index_t>(r) * kLanes + lane, static_cast<index_t>(tileRows) * kLanes);
    }
    return;
  }

  if constexpr (kDepth == 0) {  // one row tile per block: the grid is not capped
    const index_t k = g * kGroup + lane * kElems;
    float v[kElems];
    load.values(load.template fetch<kElems>(m, k), v);  // (M, K) slice
    const float s = quantizeGroupSlice<Format, Rule, kLanes, kElems>(v, &q(m, k), fmax, eps);
    if (lane == 0) storeScale(scale, m, g, s, scalesEvictLast);  // (M, G)
    return;
  }

  // A ring of kDepth row tiles' raw loads: slot j is refilled with the tile
  // kDepth steps ahead as soon as its values are out, before they are
  // quantized and stored (uniform over the group's lanes).
  const index_t k = g * kGroup + lane * kElems;
  using Raw = decltype(load.template fetch<kElems>(m, k));
  Raw ring[kDepth > 0 ? kDepth : 1];
#pragma unroll
  for (int j = 0; j < kDepth; ++j)
    if (m + j * rowStep < rows) ring[j] = load.template fetch<kElems>(m + j * rowStep, k);  // (M, K) slice
  for (;; m += kDepth * rowStep) {
#pragma unroll
    for (int j = 0; j < kDepth; ++j) {
      const index_t mj = m + j * rowStep;
      if (mj >= rows) return;
      float v[kElems];
      load.values(ring[j], v);
      const index_t ahead = mj + kDepth * rowStep;
      if (ahead < rows) ring[j] = load.template fetch<kElems>(ahead, k);

      // Reduce, scale, convert, store
      const bool pads = ownsScalePadding<kScalePadding>(scale, mj);
      const float s = quantizeGroupSlice<Format, Rule, kLanes, kElems>(v, &q(mj, k), fmax, eps);
      if (pads) zeroScalePadding(scale, g, lane, kLanes);
      if (lane == 0) storeScale(scale, mj, g, s, scalesEvictLast);  // (M, G)
    }
  }
}

/// groupTile over x with kElems values a thread (GroupTilePolicy: kElems,
/// or kSmallGridElems for small grids).
template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, bool kScalePadding, int kDepth,
          int kElems>
FP8SCALE_GLOBAL void __launch_bounds__(GroupTilePolicy<In>::kThreads)
    groupQuantKernel(GroupQuantInput<In> in, Fp8Matrix<Format> q,
                     ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale, float fmax, float eps, int tileRows,
                     int tileGroups, bool scalesEvictLast) {
  groupTile<Format, Rule, kGroup, TRANSPOSE_SCALE, kScalePadding, kElems, kDepth>(
      PlainLoad<In>{in}, in.rows, in.cols() / kGroup, q, scale, fmax, eps, tileRows, tileGroups, scalesEvictLast);
}

/// groupQuantKernel for a rule, group size and kScalePadding, in the form
/// launchGroupTile takes, for kElems values a thread (the launcher sizes each
/// grid with the kElems it names the kernel by, so a slice width is written
/// once per path): looping<kElems>() (ring depth kGroupQuantDepth, for capped
/// grids) and loopFree<kElems>() (a block per row tile; the small-grid kernel
/// too, with kSmallGridElems = GroupTilePolicy::kSmallGridElems).
template <class In, class Format, bool TRANSPOSE_SCALE>
struct GroupQuantKernelFor {
  template <class Rule, int kGroup, bool kScalePadding>
  struct Of {
    static constexpr int kSmallGridElems = GroupTilePolicy<In>::kSmallGridElems;
    template <int kElems>
    static auto looping() {
      return &groupQuantKernel<In, Format, Rule, kGroup, TRANSPOSE_SCALE, kScalePadding,
                               GroupTilePolicy<In>::kGroupQuantDepth, kElems>;
    }
    template <int kElems>
    static auto loopFree() {
      return &groupQuantKernel<In, Format, Rule, kGroup, TRANSPOSE_SCALE, kScalePadding, 0, kElems>;
    }
  };
};

/// Whether launchGroupTile runs a grid of `blocks` blocks of
/// GroupTilePolicy::kThreads threads as a small grid on a device of `sms`
/// SMs: some SMs would get no block.
constexpr bool isSmallGroupTileGrid(index_t blocks, int sms) { return blocks < sms; }

/// Grid and tile of a group-tile launch of `threads`-thread blocks of
/// `elems` values a thread: (row-tile blocks, group tiles), the row-tile axis
/// capped by rowTileBlocks() at `targetBlocks` (<= 0: no cap);
/// kInvalidShape past the grid limits.
template <class In, bool TRANSPOSE_SCALE>
inline Status groupTileGrid(const char* fn, index_t rows, index_t groups, int groupSize, int threads, int elems,
                            index_t targetBlocks, dim3& grid, int& tileRows, int& tileGroups) {
  using Policy = GroupTilePolicy<In>;
  const int slots = threads / (groupSize / elems);
  chooseTile<TRANSPOSE_SCALE>(slots, Policy::kSectorScales, rows, groups, tileRows, tileGroups);
  const index_t rowTiles = (rows + tileRows - 1) / tileRows;
  const index_t groupTiles = (groups + tileGroups - 1) / tileGroups;
  if (groupTiles > kMaxGridY)
    return Status::error(StatusCode::kInvalidShape, fn, "groups", "too many groups per row for one launch", groups,
                         kMaxGridY * tileGroups);
  const index_t blocksX = rowTileBlocks(rowTiles, groupTiles, targetBlocks);
  if (!fitsOneGrid(blocksX, threads))
    return Status::error(StatusCode::kInvalidShape, fn, "M", "too many rows for one launch", rows);
  grid = dim3(static_cast<unsigned>(blocksX), static_cast<unsigned>(groupTiles));
  return Status::ok();
}

/// The launch shared by the group-tile producers, of KernelFor's kernels
/// with (in, q, scale, fmax, eps, tileRows, tileGroups, scalesEvictLast):
/// `rows` x `groups` groups, TRANSPOSE_SCALE = the view's layout. The rule x
/// group-size x padding dispatch picks KernelFor<Rule, kGroup, kScalePadding>
/// with kScalePadding = scaleHasPadding(scale), so the kernel always suits
/// the view (a padded launch of a loop-free kernel gets groupTile's padding
/// column of blocks); then grid, tile and kernel. A grid of at most
/// GroupTilePolicy::kLoopFreeMaxWaves x the blocks the device runs at once
/// of KernelFor's loopFree<kElems>() kernel (or any grid when `residentWaves`
/// <= 0) runs that kernel, a block per row tile; a larger one runs
/// looping<kElems>() on `residentWaves` x its resident blocks (occupancy
/// queried once per kernel and device), each block looping over row tiles. A
/// small grid (isSmallGroupTileGrid; SM count cached per device) runs
/// loopFree<KernelFor's kSmallGridElems>() in
/// GroupTilePolicy::kSmallGridThreads-thread blocks, with the tile that many
/// slots hold. The values a thread given to each kernel are the ones its
/// grid is sized with.
template <class In, template <class, int, bool> class KernelFor, class Input, class Format, class Layout>
Status launchGroupTile(const char* fn, const Input& in, index_t rows, index_t groups, Fp8Matrix<Format> q,
                       ScaleView<float, Layout> scale, float fmax, const QuantOptions& opt, Stream stream,
                       int residentWaves) {
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  return dispatchRuleAndGroup(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    return dispatchScalePadding(scale, [&](auto padding) {
      using Kernels = KernelFor<decltype(rule), decltype(group)::value, decltype(padding)::value>;
      using Policy = GroupTilePolicy<In>;
      constexpr int kThreads = Policy::kThreads;
      int threads = kThreads;
      dim3 grid;
      int tileRows = 0, tileGroups = 0;
      if (Status s = groupTileGrid<In, TRANSPOSE_SCALE>(fn, rows, groups, opt.groupSize, threads, Policy::kElems, 0,
                                                        grid, tileRows, tileGroups);
          !s)
        return s;
      auto kernel = Kernels::template loopFree<Policy::kElems>();
      const index_t blocks = static_cast<index_t>(grid.x) * grid.y;
      bool smallGrid = false;  // fewer blocks than SMs: smaller blocks, more SMs
      bool looping = false;    // a capped grid of the looping kernel
      if (blocks < kSmallGridQueryBlocks) {
        int sms = 0, device = 0;
        if (const DeviceError e = cachedSmCount(&sms, &device); e != kDeviceSuccess) return Status::fromDevice(fn, e);
        smallGrid = isSmallGroupTileGrid(blocks, sms);
      }
      if (smallGrid) {
        threads = Policy::kSmallGridThreads;
        kernel = Kernels::template loopFree<Kernels::kSmallGridElems>();
        if (Status s = groupTileGrid<In, TRANSPOSE_SCALE>(fn, rows, groups, opt.groupSize, threads,
                                                          Kernels::kSmallGridElems, 0, grid, tileRows, tileGroups);
            !s)
          return s;
      } else if (residentWaves > 0 && rows * groups > kGroupTileCapMinSlices) {
        int resident = 0;
        DeviceError e = residentBlocks(&resident, kernel, kThreads);
        if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
        if (blocks > static_cast<index_t>(resident) * Policy::kLoopFreeMaxWaves) {
          kernel = Kernels::template looping<Policy::kElems>();
          looping = true;
          e = residentBlocks(&resident, kernel, kThreads);
          if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
          if (Status s = groupTileGrid<In, TRANSPOSE_SCALE>(fn, rows, groups, opt.groupSize, threads, Policy::kElems,
                                                            static_cast<index_t>(resident) * residentWaves, grid,
                                                            tileRows, tileGroups);
              !s)
            return s;
        }
      }
      if (decltype(padding)::value && !looping) {  // the padding column of blocks (groupTile)
        if (!fitsOneGrid(static_cast<index_t>(grid.x) + 1, threads))
          return Status::error(StatusCode::kInvalidShape, fn, "M", "too many rows for one launch", rows);
        grid.x += 1;
      }
      const DeviceError e =
          launchKernelPdl(opt.programmaticLaunch, kernel, grid, dim3(threads), 0, stream, in, q, scale, fmax,
                          opt.eps, tileRows, tileGroups, storesScalesEvictLast(opt.scaleStore));
      return e == kDeviceSuccess ? Status::ok() : Status::fromDevice(fn, e);
    });
  });
}

/// What groupQuant() and siluClampQuant() do once their arguments are
/// checked: the returned tensor (the producer's own buffers), M == 0 or no
/// groups (the column-major padding cleared, nothing launched), else the
/// group-tile launch of KernelFor's kernels with (in, q, scale, fmax).
template <class In, template <class, int, bool> class KernelFor, class Input, class Format, class Layout>
Result<QuantizedTensor<Format, Layout>> runGroupTileProducer(const char* fn, const Input& in, index_t rows,
                                                             index_t groups, Fp8Matrix<Format> q,
                                                             ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                             float fmax, int residentWaves, Stream stream) {
  QuantizedTensor<Format, Layout> out{q, scale, opt.groupSize};
  if (rows == 0 || groups == 0) {
    if (Status s = clearEmptyScalePadding(fn, scale, stream); !s) return s;
    return out;
  }
  const Status launched =
      launchGroupTile<In, KernelFor>(fn, in, rows, groups, q, scale, fmax, opt, stream, residentWaves);
  if (!launched) return launched;
  return out;
}

#endif  // FP8SCALE_HAS_DEVICE

/// The kernel finds a column's head with 32-bit division.
constexpr index_t kMaxHeadMajorCols = 2147483647;

/// Argument checks of group quant (host side, also used by tests).
template <class Format, class In, class Layout>
Status checkGroupQuant(const char* fn, const GroupQuantInput<In>& in, const Fp8Matrix<Format>& q,
                       const ScaleView<float, Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkProducerOptions<Format>(fn, opt, fmax); !s) return s;
  if (in.heads < 1) return Status::error(StatusCode::kInvalidShape, fn, "heads", "must be >= 1", in.heads);
  if (in.headDim < 0) return Status::error(StatusCode::kInvalidShape, fn, "headDim", "extent is negative", in.headDim);
  QuantArgs a = quantArgs(in.x, in.rows, in.cols(), in.tokenStride, static_cast<int>(sizeof(In)), q, scale,
                          opt.groupSize);
  if (in.heads > 1) {
    if (isSupportedGroupSize(opt.groupSize) && in.headDim % opt.groupSize != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "headDim", "a group may not straddle two heads", in.headDim,
                           opt.groupSize);
    if (in.tokenStride < 0 || in.headStride < 0)
      return Status::error(StatusCode::kInvalidShape, fn, in.tokenStride < 0 ? "tokenStride" : "headStride",
                           "stride is negative", in.tokenStride < 0 ? in.tokenStride : in.headStride);
    if (in.rows > 0 && (in.headStride * a.inputBytes) % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "headStride",
                           "head stride in bytes is not a multiple of the 16-byte vector load", in.headStride, 16);
    if (in.rows > 0 && (in.tokenStride * a.inputBytes) % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "tokenStride",
                           "token stride in bytes is not a multiple of the 16-byte vector load", in.tokenStride, 16);
    a.ldx = a.cols;  // checked above; with free strides, rows may interleave
    if (in.cols() > kMaxHeadMajorCols)
      return Status::error(StatusCode::kInvalidShape, fn, "K", "H * D of a head-major input must be < 2^31",
                           in.cols(), kMaxHeadMajorCols);
  }
  if (q.rows != in.rows || q.cols != in.cols())
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from the input's (M, K)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.cols());
  return checkQuantArgs(fn, a, 16, GroupTilePolicy<In>::kElems);
}

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// Quantizes `in` into `q` and `scale` on `stream`.
///
/// @tparam Format  E4M3FN or E4M3FNUZ
/// @tparam Layout  RowMajor (TRANSPOSE_SCALE = false) or ColMajor
///                 (TRANSPOSE_SCALE = true: [G][ld] bytes, padding zeroed)
/// @tparam In      float, BFloat16 or Float16
/// @param in     x[M, K] or x[M, H, D]; x, row and head strides 16-byte aligned
/// @param q      fp8 output [M, K], row stride q.ld; pointer and ld aligned to
///               the widest per-thread store (16 bytes for 16-bit inputs, 8
///               for fp32), at every M
/// @param scale  (M, K / groupSize) view of device memory
/// @return the QuantizedTensor {q, scale}: the producer's own buffers, no copy.
/// Errors (nothing is launched): kUnsupportedGroupSize, kInvalidShape (K % group,
/// extents), kLdTooSmall, kNullPointer, kMisaligned, kInvalidValue (fmax, eps, rule, scaleStore),
/// kDeviceError (launch). M == 0 launches no kernel and succeeds; a column-major
/// view with ld > 0 is then all padding and is cleared with one memset.
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> groupQuant(const GroupQuantInput<In>& in, Fp8Matrix<Format> q,
                                                   ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                   Stream stream) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  float fmax = 0.0f;
  if (Status s = detail::checkGroupQuant("groupQuant", in, q, scale, opt, fmax); !s) return s;
  return detail::runGroupTileProducer<In, detail::GroupQuantKernelFor<In, Format, TRANSPOSE_SCALE>::template Of>(
      "groupQuant", in, in.rows, in.cols() / opt.groupSize, q, scale, opt, fmax,
      GroupTilePolicy<In>::kGroupQuantWaves, stream);
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
