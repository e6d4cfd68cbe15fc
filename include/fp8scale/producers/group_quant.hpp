// fp8scale: per-token-group fp8 quantization with a compile-time
// TRANSPOSE_SCALE.
//
// x[M, K] (any row stride), or x[M, H, D] flattened to [M, H * D] with any
// token and head strides (the MLA o_proj input), is quantized in groups of
// groupSize columns into q[M, K] (fp8, row stride ldq) and one scale per
// (row, group) written through a ScaleView: RowMajor{ld} when TRANSPOSE_SCALE
// is false, ColMajor{ld} (the consumer's [G][ld] bytes, padding slots zeroed)
// when it is true, or the UE8M0 exponent bytes of PackedUe8m0 /
// Swizzled128x4. One kernel body serves every layout; it indexes only
// through the view's mapping. Numerics: docs/numerics.md; bit-identical to reference::groupQuant.
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

#include "../spec/group_quant.hpp"
#include "common.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

/// Tuning of the group-local producers (group quant, SiLU-clamp quant).
template <class In>
struct GroupTilePolicy {
  static constexpr int kThreads = 256;
  /// Two 16-byte loads a thread (16 bf16 values), the second slice's loads in
  /// flight while the first is quantized (groupTile); SiLU-clamp with 4
  /// values a thread on full grids measured slower (docs/performance.md,
  /// "Tuning choices").
  static constexpr int kLoadsPerThread = 2;
  static constexpr int kElems = kLoadsPerThread * detail::kVecElems<In>;  // values per thread
  static_assert(kElems == detail::kGroupTileStoreBytes<In>, "the store width the argument checks align q to");
  /// fp32 scales per 32-byte sector: the tile edge along the scale layout's
  /// contiguous dimension.
  static constexpr int kSectorScales = 8;
  /// Group quant: grids up to this many waves of the device run a block per
  /// row tile; larger ones run kGroupQuantWaves waves of blocks that loop over
  /// row tiles, the next tile's loads in flight (the last wave evens out).
  /// SiLU-clamp always runs a block per row tile. Measured: docs/performance.md,
  /// "Tuning choices".
  static constexpr int kLoopFreeMaxWaves = 2;
  static constexpr int kGroupQuantWaves = 1;
  /// Grids of kThreads-thread blocks that would leave SMs without a block
  /// (small M) run kSmallGridThreads-thread blocks of kSmallGridElems values
  /// a thread instead: the loads spread over 4x the SMs, each group's
  /// arithmetic over twice the lanes (docs/performance.md, "Tuning choices").
  static constexpr int kSmallGridThreads = 128;
  static constexpr int kSmallGridElems = detail::kVecElems<In>;
  static_assert(kSmallGridThreads <= kThreads, "the kernels' __launch_bounds__ is kThreads");
  /// SiLU-clamp's small grids: 4 values a thread (half a vector of bf16 /
  /// fp16), a group of 128 over a whole warp, halving each lane's chain of
  /// two MUFU operations a value (docs/performance.md, "Tuning choices").
  static constexpr int kSiluSmallGridElems = 4;
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
constexpr int powerOfTwoAtLeast(index_t n, int cap) {
  int p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

/// Picks the (rows x groups) tile of one block of `slots` group slices: the
/// scale layout's contiguous dimension (rows when `rowsFastest`, i.e.
/// column-major scales; groups otherwise) `sector` wide when the shape
/// allows, narrower along a dimension the tensor does not fill (M = 1 gets
/// one row of `slots` groups, not `sector` rows of which one is used).
constexpr void chooseTile(bool rowsFastest, int slots, int sector, index_t rows, index_t groups, int& tileRows,
                          int& tileGroups) {
  const int fitFast = powerOfTwoAtLeast(rowsFastest ? rows : groups, slots);
  const int fitSlow = powerOfTwoAtLeast(rowsFastest ? groups : rows, slots);
  const int edge = sector < slots ? sector : slots;
  int fast = edge < fitFast ? edge : fitFast;
  int slow = slots / fast;
  if (slow > fitSlow) {
    slow = fitSlow;
    fast = slots / slow;
  }
  tileRows = rowsFastest ? fast : slow;
  tileGroups = rowsFastest ? slow : fast;
}

/// Blocks along the row-tile axis of a group-tile grid with `groupTiles`
/// blocks along the other: one per row tile while the grid has at most
/// `targetBlocks` blocks (or targetBlocks <= 0); otherwise about
/// targetBlocks / groupTiles blocks, evened out so that every block loops over
/// the same number of row tiles (or one fewer).
constexpr index_t rowTileBlocks(index_t rowTiles, index_t groupTiles, index_t targetBlocks) {
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
/// grid, so no thread divides to find its tile. kLoop false: one row tile a
/// block (the grid covers every tile). kLoop true (large M: the grid is
/// capped near what the device runs at once): each block loops over its row
/// tiles, each thread holding the raw bytes of its next tile in flight while
/// it quantizes the current one, so its loads overlap the reduction and the
/// stores. (Two slices a thread converted to fp32 up front measured 6-12%
/// slower on the H200: 59-63 registers halve the resident warps.) Padding
/// rows of a view (column-major rows [M, ld), the exponent layouts' rounded
/// up rows): the row tile past the rows (paddedRowTiles) writes them, each
/// of its (row, lane) threads a slot of its column as a tile's threads are
/// mapped to its scales; with kLoop the block whose loop reaches that tile
/// does. kPadding: the kernel carries that code (the launch's view has
/// padding rows, or a kernel for a layout with padding rows loops); kernels
/// for views without padding rows carry none of it, since
/// its presence alone cost 1-11% at M <= 512 on the H200 (SiLU-clamp quant,
/// column-major, M = 1: 1.17 against 1.05 us a call). scalesEvictLast:
/// storeScale's L2 policy (ScaleStorePolicy resolved).
template <class Format, class Rule, int kGroup, int kElems, bool kLoop, bool kPadding, class Load, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void groupTile(const Load& load, index_t rows, index_t groups,
                                                    Fp8Matrix<Format> q, ScaleOutput<Layout> scale, float fmax,
                                                    float eps, int tileRows, int tileGroups, bool scalesEvictLast) {
  constexpr int kLanes = kGroup / kElems;  // threads per group
  static_assert(kGroup % kElems == 0, "a group is a whole number of thread slices");
  static_assert(Layout::kPadsRows || !kPadding, "the layout has no padding rows");
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;

  // Tile coordinates; the scale layout's contiguous dimension is fastest.
  // tileRows and tileGroups are powers of two (chooseTile): mask and shift.
  constexpr bool kRowsFastest = Layout::kMnMajor;  // rows are contiguous in [G][ld]
  const int r = kRowsFastest ? slot & (tileRows - 1) : slot >> __popc(tileGroups - 1);
  const int c = kRowsFastest ? slot >> __popc(tileRows - 1) : slot & (tileGroups - 1);
  index_t m = static_cast<index_t>(blockIdx.x) * tileRows + r;
  const index_t g = static_cast<index_t>(blockIdx.y) * tileGroups + c;
  const index_t rowStep = static_cast<index_t>(gridDim.x) * tileRows;
  // Past the rows: the padding tile writes its columns' padding slots. With
  // kLoop a thread past the rows of a data tile (the last, partial one)
  // writes its slots of the tile it would visit next, row + rowStep: the
  // padding tile when the grid has one block along the rows, where no
  // thread of that row would reach it otherwise (with more blocks the
  // padding tile's block visits it in full).
  const auto pastRows = [&](index_t row) {
    if (kLoop && row - r < rows) row += rowStep;
    if (g < groups && isPaddingTile(scale, row - r, tileRows))
      writeScalePadding(scale, g, static_cast<index_t>(r) * kLanes + lane, static_cast<index_t>(tileRows) * kLanes);
  };
  gridDependencyWait();  // PDL: the previous kernel's writes are visible from here
  allowDependentLaunch();
  if (m >= rows || g >= groups) {  // the whole group's lanes leave together
    if constexpr (kPadding) pastRows(m);
    return;
  }

  const index_t k = g * kGroup + lane * kElems;
  if constexpr (!kLoop) {  // one row tile per block: the grid is not capped
    float v[kElems];
    load.values(load.template fetch<kElems>(m, k), v);  // (M, K) slice
    const float s = quantizeGroupSlice<Format, Rule, kLanes, kElems>(v, &q(m, k), fmax, eps);
    if (lane == 0) storeScale(scale, m, g, s, scalesEvictLast);  // (M, G)
    return;
  }

  // The next row tile's raw loads are issued as soon as this tile's values
  // are out, before they are quantized and stored (uniform over the group's
  // lanes).
  auto raw = load.template fetch<kElems>(m, k);  // (M, K) slice
  for (;; m += rowStep) {
    if (m >= rows) {
      if constexpr (kPadding) pastRows(m);
      return;
    }
    float v[kElems];
    load.values(raw, v);
    if (m + rowStep < rows) raw = load.template fetch<kElems>(m + rowStep, k);  // (M, K) slice
    const float s = quantizeGroupSlice<Format, Rule, kLanes, kElems>(v, &q(m, k), fmax, eps);
    if (lane == 0) storeScale(scale, m, g, s, scalesEvictLast);  // (M, G)
  }
}

/// groupTile over x with kElems values a thread (GroupTilePolicy: kElems,
/// or kSmallGridElems for small grids), writing the scales through the
/// `Layout` mapping (ScaleLayoutFor<TRANSPOSE_SCALE> in the design's terms).
template <class In, class Format, class Rule, int kGroup, class Layout, int kElems, bool kLoop, bool kPadding>
FP8SCALE_GLOBAL void __launch_bounds__(GroupTilePolicy<In>::kThreads)
    groupQuantKernel(GroupQuantInput<In> in, Fp8Matrix<Format> q,
                     ScaleOutput<Layout> scale, float fmax, float eps, int tileRows,
                     int tileGroups, bool scalesEvictLast) {
  groupTile<Format, Rule, kGroup, kElems, kLoop, kPadding>(PlainLoad<In>{in}, in.rows, in.cols() / kGroup, q, scale,
                                                           fmax, eps, tileRows, tileGroups, scalesEvictLast);
}

/// Group quant's kernels for a rule and group size, as launchGroupTile names
/// them: kernel<kElems, kLoop, kPadding>(); group quant loops on capped grids
/// (kLoops).
template <class In, class Format, class Layout>
struct GroupQuantKernelFor {
  template <class Rule, int kGroup>
  struct Of {
    static constexpr int kSmallGridElems = GroupTilePolicy<In>::kSmallGridElems;
    static constexpr bool kLoops = true;
    template <int kElems, bool kLoop, bool kPadding>
    static auto kernel() {
      return &groupQuantKernel<In, Format, Rule, kGroup, Layout, kElems, kLoop, kPadding>;
    }
  };
};

#endif  // FP8SCALE_HAS_DEVICE

/// The grid of a group-tile launch: (gridX row-tile blocks, gridY group
/// tiles) of tileRows x tileGroups groups a block; `status` kInvalidShape
/// (naming 'groups' or 'M') past the grid limits.
struct GroupTileGrid {
  index_t gridX = 0;
  index_t gridY = 0;
  int tileRows = 0;
  int tileGroups = 0;
  Status status;
};

/// The grid of `threads`-thread blocks of `elems` values a thread over
/// `rows` x `groups` groups of `groupSize`, the scale layout's contiguous
/// dimension fastest in the tile (rowsFastest: column-major), the row-tile
/// axis capped by rowTileBlocks() at `targetBlocks` (<= 0: no cap), plus
/// `paddingTiles` row tiles past the rows (paddedRowTiles).
constexpr GroupTileGrid groupTileGrid(const char* fn, bool rowsFastest, index_t rows, index_t groups, int groupSize,
                                      int threads, int elems, index_t targetBlocks, index_t paddingTiles,
                                      int sectorScales) {
  GroupTileGrid t;
  const int slots = threads / (groupSize / elems);
  chooseTile(rowsFastest, slots, sectorScales, rows, groups, t.tileRows, t.tileGroups);
  const index_t rowTiles = (rows + t.tileRows - 1) / t.tileRows;
  t.gridY = (groups + t.tileGroups - 1) / t.tileGroups;
  if (t.gridY > kMaxGridY) {
    t.status = Status::error(StatusCode::kInvalidShape, fn, "groups", "too many groups per row for one launch", groups,
                             kMaxGridY * t.tileGroups);
    return t;
  }
  t.gridX = rowTileBlocks(rowTiles, t.gridY, targetBlocks) + paddingTiles;
  if (!fitsOneGrid(t.gridX, threads))
    t.status = Status::error(StatusCode::kInvalidShape, fn, "M", "too many rows for one launch", rows);
  return t;
}

/// The kernels a group-tile producer launches (GroupTilePolicy says when).
enum class GroupTileKernel : std::uint8_t {
  kNone,       ///< nothing to launch: no groups, or no rows and no padding slots
  kTile,       ///< a block per row tile: kThreads threads of kElems values
  kSmallGrid,  ///< a block per row tile: kSmallGridThreads threads of the producer's small-grid width
  kLoop,       ///< kThreads-thread blocks of kElems values looping over row tiles (a capped grid)
};

/// A group-tile launch: the kernel, its block and grid.
struct GroupTileLaunch {
  GroupTileKernel kernel = GroupTileKernel::kNone;
  int threads = 0;
  int elems = 0;
  GroupTileGrid grid;
};

/// The launch of a group-tile producer over `rows` x `groups` groups of
/// `groupSize` (both validated), tiled rows-fastest when `rowsFastest` (MN-major scales),
/// with padding rows when `padded`. `smallGridElems`: the producer's
/// small-grid width; `loopWaves` > 0: the producer loops on grids of more
/// than GroupTilePolicy::kLoopFreeMaxWaves x what the device runs at once,
/// capped at loopWaves x that. `facts` answers sms() (the device's SMs) and
/// resident(loop) (blocks of the tile / looping kernel the device runs at
/// once), asked only when the choice needs them (small grids: the SM count;
/// grids of more than kGroupTileCapMinSlices groups of a looping producer:
/// occupancy). Pure arithmetic over those answers: the host tests plan with
/// facts of their own.
template <class In, class Facts>
constexpr GroupTileLaunch planGroupTile(const char* fn, index_t rows, index_t groups, int groupSize, bool rowsFastest,
                                        bool padded, int smallGridElems, int loopWaves, const Facts& facts) {
  using Policy = GroupTilePolicy<In>;
  const index_t paddingTiles = padded ? 1 : 0;
  GroupTileLaunch launch;
  if (groups == 0 || (rows == 0 && !padded)) return launch;
  const auto grid = [&](int threads, int elems, index_t targetBlocks, index_t padding) {
    return groupTileGrid(fn, rowsFastest, rows, groups, groupSize, threads, elems, targetBlocks, padding,
                         Policy::kSectorScales);
  };
  launch = {GroupTileKernel::kTile, Policy::kThreads, Policy::kElems,
            grid(Policy::kThreads, Policy::kElems, 0, paddingTiles)};
  if (!launch.grid.status) return launch;
  const index_t blocks = (launch.grid.gridX - paddingTiles) * launch.grid.gridY;
  if (blocks < kSmallGridQueryBlocks && blocks < facts.sms()) {  // fewer blocks than SMs
    launch = {GroupTileKernel::kSmallGrid, Policy::kSmallGridThreads, smallGridElems,
              grid(Policy::kSmallGridThreads, smallGridElems, 0, paddingTiles)};
  } else if (loopWaves > 0 && rows * groups > kGroupTileCapMinSlices &&
             blocks > static_cast<index_t>(facts.resident(false)) * Policy::kLoopFreeMaxWaves) {
    // The looping blocks reach the padding tile themselves: no extra tile.
    launch = {GroupTileKernel::kLoop, Policy::kThreads, Policy::kElems,
              grid(Policy::kThreads, Policy::kElems, static_cast<index_t>(facts.resident(true)) * loopWaves, 0)};
  }
  return launch;
}

#if defined(FP8SCALE_HAS_DEVICE)

/// planGroupTile's device facts, queried from the runtime (both cached per
/// device); the first error is kept in `error`.
template <class In, class Kernel>
struct GroupTileDeviceFacts {
  Kernel tile;
  Kernel loop;  ///< null for producers that do not loop
  mutable DeviceError error = kDeviceSuccess;
  int sms() const {
    int n = 0, device = 0;
    if (error == kDeviceSuccess) error = cachedSmCount(&n, &device);
    return n;
  }
  int resident(bool looping) const {
    int n = 0;
    if (error == kDeviceSuccess) error = residentBlocks(&n, looping ? loop : tile, GroupTilePolicy<In>::kThreads);
    return n;
  }
};

/// The launch shared by the group-tile producers: planGroupTile's plan over
/// `rows` x `groups` groups, mapped to KernelFor<Rule, kGroup>'s kernels
/// (kernel<kElems, kLoop, kPadding>(), each launched with the values a thread
/// its grid was sized with; kPadding when the view has padding slots, and for
/// every column-major looping kernel, whose blocks reach the padding tile)
/// with (in, q, scale, fmax, eps, tileRows, tileGroups, scalesEvictLast).
/// Nothing is launched for an empty plan.
template <class In, template <class, int> class KernelFor, class Input, class Format, class Layout>
Status launchGroupTile(const char* fn, const Input& in, index_t rows, index_t groups, Fp8Matrix<Format> q,
                       ScaleOutput<Layout> scale, float fmax, const QuantOptions& opt, Stream stream,
                       int loopWaves) {
  return dispatchRuleAndGroup<Layout::kExponentBytes>(opt.rule, opt.groupSize, [&](auto rule, auto group) {
    using Kernels = KernelFor<decltype(rule), decltype(group)::value>;
    using Policy = GroupTilePolicy<In>;
    using Kernel = decltype(Kernels::template kernel<Policy::kElems, false, false>());
    const bool padded = scale.hasPaddingRows();
    const auto blockPerTile = [&](auto elems) -> Kernel {  // the kernel of a block per row tile
      constexpr int kElems = decltype(elems)::value;
      if constexpr (Layout::kPadsRows) {
        if (padded) return Kernels::template kernel<kElems, false, true>();
      }
      return Kernels::template kernel<kElems, false, false>();
    };
    GroupTileDeviceFacts<In, Kernel> facts{blockPerTile(std::integral_constant<int, Policy::kElems>{}), nullptr};
    if constexpr (Kernels::kLoops) facts.loop = Kernels::template kernel<Policy::kElems, true, Layout::kPadsRows>();
    const GroupTileLaunch plan = planGroupTile<In>(fn, rows, groups, opt.groupSize, Layout::kMnMajor, padded,
                                                   Kernels::kSmallGridElems, Kernels::kLoops ? loopWaves : 0, facts);
    if (facts.error != kDeviceSuccess) return Status::fromDevice(fn, facts.error);
    if (!plan.grid.status) return plan.grid.status;
    Kernel kernel = facts.tile;
    switch (plan.kernel) {
      case GroupTileKernel::kNone: return Status::ok();
      case GroupTileKernel::kTile: break;
      case GroupTileKernel::kSmallGrid:
        kernel = blockPerTile(std::integral_constant<int, Kernels::kSmallGridElems>{});
        break;
      case GroupTileKernel::kLoop: kernel = facts.loop; break;
    }
    const dim3 grid(static_cast<unsigned>(plan.grid.gridX), static_cast<unsigned>(plan.grid.gridY));
    const DeviceError e =
        launchKernelPdl(opt.programmaticLaunch, kernel, grid, dim3(plan.threads), 0, stream, in, q, scale, fmax,
                        opt.eps, plan.grid.tileRows, plan.grid.tileGroups, storesScalesEvictLast(opt.scaleStore));
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice(fn, e);
  });
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// Quantizes `in` into `q` and `scale` on `stream`.
///
/// @tparam Format  E4M3FN or E4M3FNUZ
/// @tparam Layout  RowMajor (TRANSPOSE_SCALE = false) or ColMajor
///                 (TRANSPOSE_SCALE = true: [G][ld] bytes, padding zeroed);
///                 or an exponent layout, PackedUe8m0 (DeepGEMM's int32
///                 words on SM100) or Swizzled128x4 (the 128 x 4 tiles of
///                 Blackwell block-scaled MMA), of std::uint8_t views: the
///                 UE8M0 byte of each scale and every padding byte 0, with
///                 opt.rule kUE8M0 (the same bytes as RowMajor emission
///                 followed by materialize, in one launch)
/// @tparam In      float, BFloat16 or Float16
/// @param in     x[M, K] or x[M, H, D]; x, row and head strides 16-byte aligned
/// @param q      fp8 output [M, K], row stride q.ld; pointer and ld aligned to
///               the widest per-thread store (16 bytes for 16-bit inputs, 8
///               for fp32), at every M
/// @param scale  (M, K / groupSize) view of device memory
/// @return the QuantizedTensor {q, scale}: the producer's own buffers, no copy.
/// Errors (nothing is launched): kUnsupportedGroupSize, kInvalidShape (K % group,
/// extents), kLdTooSmall, kNullPointer, kMisaligned, kInvalidValue (fmax, eps,
/// rule: unknown, or not kUE8M0 for an exponent layout; scaleStore),
/// kDeviceError (launch). M == 0 is valid: a column-major view with ld > 0 is
/// then all padding, which the producer's padding tile writes (the only work
/// launched); otherwise nothing is launched.
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> groupQuant(const GroupQuantInput<In>& in, Fp8Matrix<Format> q,
                                                   ScaleOutput<Layout> scale, const QuantOptions& opt,
                                                   Stream stream) {
  float fmax = 0.0f;
  if (Status s = detail::checkGroupQuant("groupQuant", in, q, scale, opt, fmax); !s) return s;
  return {detail::launchGroupTile<In, detail::GroupQuantKernelFor<In, Format, Layout>::template Of>(
              "groupQuant", in, in.rows, in.cols() / opt.groupSize, q, scale, fmax, opt, stream,
              GroupTilePolicy<In>::kGroupQuantWaves),
          QuantizedTensor<Format, Layout>{q, scale, opt.groupSize}};
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_GROUP_QUANT_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
