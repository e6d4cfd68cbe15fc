// Launch limits of platform.hpp (host build: the CUDA limits).
#include <gtest/gtest.h>

#include "fp8scale/platform.hpp"
#include "fp8scale/producers/group_quant.hpp"
#include "fp8scale/producers/rmsnorm_quant.hpp"

namespace fp8scale {
namespace {

static_assert(fitsOneGrid(1, 1024) && fitsOneGrid(kMaxGridBlocks, 256), "");
static_assert(!fitsOneGrid(kMaxGridBlocks + 1, 1), "more blocks than a grid holds");

TEST(Platform, GridLimitsCountBlocksAndThreads) {
  EXPECT_TRUE(fitsOneGrid(0, 256));
  EXPECT_TRUE(fitsOneGrid(16777215, 256));
  EXPECT_FALSE(fitsOneGrid(index_t{1} << 31, 256));
  EXPECT_EQ(kMaxGridThreads, kMaxGridBlocks * 1024) << "CUDA bounds blocks, not threads";
}

}  // namespace
}  // namespace fp8scale

// The group-tile launch picks a (rows x groups) tile per block; the kernel
// finds a thread's (row, group) with a mask and a shift, so both edges must be
// powers of two whose product is the block's slot count, for every shape.
// Slot counts below 8 are the small-grid blocks of 32-lane groups (128
// threads: 4 slots; SiLU-clamp's groups of 128 at 4 values a thread, fp32
// groups of 128) and the benchmarks' 32-thread entries (2 and 1).
TEST(GroupTile, TilesArePowersOfTwoThatFillTheBlock) {
  auto isPow2 = [](int v) { return v > 0 && (v & (v - 1)) == 0; };
  for (int slots : {1, 2, 4, 8, 16, 32, 64, 128})
    for (fp8scale::index_t rows : {1, 2, 3, 5, 8, 9, 100, 65536})
      for (fp8scale::index_t groups : {1, 2, 3, 7, 16, 56, 128, 1000}) {
        int tr = 0, tg = 0;
        fp8scale::detail::chooseTile(true, slots, 8, rows, groups, tr, tg);
        EXPECT_TRUE(isPow2(tr) && isPow2(tg) && tr * tg == slots) << slots << " " << rows << " " << groups;
        if (rows >= 8 && slots >= 8) {  // column-major: >= 8 rows = whole 32-byte sectors of scales
          EXPECT_GE(tr, 8);
          if (groups * 8 >= slots) {
            EXPECT_EQ(tr, 8) << "enough groups: the tile is one sector tall";
          }
        }
        if (slots < 8 && rows >= slots) {
          EXPECT_EQ(tr, slots) << "fewer slots than a sector: all of them along the rows";
        }
        fp8scale::detail::chooseTile(false, slots, 8, rows, groups, tr, tg);
        EXPECT_TRUE(isPow2(tr) && isPow2(tg) && tr * tg == slots) << slots << " " << rows << " " << groups;
        if (rows == 1) {
          EXPECT_EQ(tr, 1) << "one row: the whole block spans groups";
        }
      }
}

// Large group-tile grids are capped near what the device runs at once, each
// block then looping over its row tiles: every row tile must still be covered
// exactly once (blocks x steps >= tiles, fewer steps would leave tiles out),
// the loads even (no block does more than one step beyond another) and the
// grid within the cap.
TEST(GroupTile, RowTileBlocksCoverEveryTileEvenly) {
  using fp8scale::index_t;
  using fp8scale::detail::rowTileBlocks;
  EXPECT_EQ(rowTileBlocks(100, 7, 0), 100) << "no cap: a block per row tile";
  EXPECT_EQ(rowTileBlocks(100, 7, 700), 100) << "fits: a block per row tile";
  EXPECT_EQ(rowTileBlocks(2048, 7, 2112), 293) << "M = 8192 row-major tiles on 132 x 8 x 2 blocks: 7 steps";
  EXPECT_EQ(rowTileBlocks(5, 1000, 10), 1) << "more group tiles than the cap: one row-tile block";
  for (index_t tiles : {1, 2, 3, 31, 32, 33, 1000, 2048, 16384, 74899})
    for (index_t groupTiles : {1, 4, 7, 14, 56})
      for (index_t target : {1, 132, 1056, 2112}) {
        const index_t blocks = rowTileBlocks(tiles, groupTiles, target);
        ASSERT_GE(blocks, 1);
        ASSERT_LE(blocks, tiles);
        const index_t steps = (tiles + blocks - 1) / blocks;  // the kernel's loop count of block 0
        EXPECT_GE(blocks * steps, tiles);
        EXPECT_LT((blocks - 1) * steps, tiles) << "the last block has work";
        if (tiles * groupTiles > target && target >= groupTiles) {
          EXPECT_LE(blocks * groupTiles, target) << tiles << " " << groupTiles << " " << target;
        }
      }
}

// rmsNormQuant's launch plan (host build: CUDA's). Rows of up to
// kShortRowVecs vectors take a block per row sized to the row at every M;
// longer rows of up to 1024 vectors do below kRowsMinRows and take the
// staged kernel from there; rows past 1024 vectors the long-row shape.
TEST(RmsNormLaunchPlan, BlocksFollowTheRowAndThePolicy) {
  using fp8scale::BFloat16;
  using fp8scale::index_t;
  using fp8scale::RmsNormKernel;
  using fp8scale::detail::rmsNormQuantLaunch;
  using Policy = fp8scale::RmsNormPolicy<BFloat16>;
  const auto expectPlan = [](fp8scale::RmsNormLaunch got, RmsNormKernel kernel, index_t threads, const char* what) {
    EXPECT_EQ(got.kernel, kernel) << what;
    EXPECT_EQ(got.threads, threads) << what;
  };
  static_assert(Policy::kRowsStaged, "a host build plans as CUDA does");
  for (index_t M : {index_t{1}, index_t{64}, index_t{1023}, index_t{1024}, index_t{65536}, index_t{1} << 24}) {
    SCOPED_TRACE(M);
    expectPlan(rmsNormQuantLaunch<BFloat16>(M, 2048), RmsNormKernel::kBlockPerRow, 256, "K = 2048: 256 vectors");
    expectPlan(rmsNormQuantLaunch<BFloat16>(M, 2176), RmsNormKernel::kBlockPerRow, 288,
               "K = 2176: 272 vectors, whole warps");
    expectPlan(rmsNormQuantLaunch<BFloat16>(M, 5120), RmsNormKernel::kBlockPerRow, 640,
               "K = 5120: 640 vectors, the longest short row");
    expectPlan(rmsNormQuantLaunch<float>(M, 2304), RmsNormKernel::kBlockPerRow, 576, "fp32 K = 2304: 576 vectors");
    expectPlan(rmsNormQuantLaunch<BFloat16>(M, 16384), RmsNormKernel::kLongRows, Policy::kLargeThreads,
               "K = 16384: 2048 vectors");
  }
  for (index_t K : {6144, 7168, 8192}) {
    SCOPED_TRACE(K);
    expectPlan(rmsNormQuantLaunch<BFloat16>(1, K), RmsNormKernel::kBlockPerRow, K / 8, "a row of 768-1024 vectors");
    expectPlan(rmsNormQuantLaunch<BFloat16>(Policy::kRowsMinRows - 1, K), RmsNormKernel::kBlockPerRow, K / 8,
               "below kRowsMinRows");
    expectPlan(rmsNormQuantLaunch<BFloat16>(Policy::kRowsMinRows, K), RmsNormKernel::kStaged, Policy::kStagedThreads,
               "from kRowsMinRows");
  }
  expectPlan(rmsNormQuantLaunch<BFloat16>(1, 5128), RmsNormKernel::kBlockPerRow, 672, "641 vectors, M = 1");
  expectPlan(rmsNormQuantLaunch<BFloat16>(1024, 5128), RmsNormKernel::kStaged, Policy::kStagedThreads,
             "641 vectors, M = 1024");
  // Short rows past what a grid of blocks per row holds (counting a padding
  // block, whether or not the view has one): the large-M kernel, itself a
  // block per row on CUDA, which checks its own grid.
  expectPlan(rmsNormQuantLaunch<BFloat16>(fp8scale::kMaxGridBlocks - 1, 2048), RmsNormKernel::kBlockPerRow, 256,
             "the most rows a grid holds with the padding block");
  expectPlan(rmsNormQuantLaunch<BFloat16>(fp8scale::kMaxGridBlocks, 2048), RmsNormKernel::kStaged,
             Policy::kStagedThreads, "one row more");
}

// Every block the plan launches holds its row: whole warps, within the
// block the kernel was compiled for, one vector a thread per slot
// (launchRmsNormQuantBlocks takes the plan's threads as given).
template <class In>
void expectEveryBlockHoldsItsRow() {
  using fp8scale::index_t;
  using fp8scale::RmsNormKernel;
  using Policy = fp8scale::RmsNormPolicy<In>;
  constexpr index_t kVE = fp8scale::detail::kVecElems<In>;
  for (index_t K = kVE; K <= Policy::kMaxCols; K += kVE) {
    for (index_t M : {index_t{1}, Policy::kRowsMinRows - 1, Policy::kRowsMinRows, index_t{1} << 20}) {
      const fp8scale::RmsNormLaunch plan = fp8scale::detail::rmsNormQuantLaunch<In>(M, K);
      index_t kernelThreads = 0, vecsPerThread = 0;
      switch (plan.kernel) {
        case RmsNormKernel::kBlockPerRow: kernelThreads = Policy::kWideThreads; vecsPerThread = Policy::kWideVecs; break;
        case RmsNormKernel::kStaged: kernelThreads = Policy::kStagedThreads; vecsPerThread = Policy::kStagedVecs; break;
        case RmsNormKernel::kRowLoop: kernelThreads = Policy::kRowsThreads; vecsPerThread = Policy::kRowsVecs; break;
        case RmsNormKernel::kLongRows: kernelThreads = Policy::kLargeThreads; vecsPerThread = Policy::kLargeVecs; break;
      }
      ASSERT_GT(plan.threads, 0) << "M=" << M << " K=" << K;
      ASSERT_EQ(plan.threads % fp8scale::detail::kWarpSize, 0) << "M=" << M << " K=" << K;
      ASSERT_LE(plan.threads, kernelThreads) << "M=" << M << " K=" << K;
      if (plan.kernel != RmsNormKernel::kBlockPerRow) {
        ASSERT_EQ(plan.threads, kernelThreads) << "K=" << K;
      }
      ASSERT_GE(plan.threads * vecsPerThread, K / kVE) << "M=" << M << " K=" << K << ": the block does not hold the row";
    }
  }
}

TEST(RmsNormLaunchPlan, EveryBlockHoldsItsRow) {
  expectEveryBlockHoldsItsRow<fp8scale::BFloat16>();
  expectEveryBlockHoldsItsRow<float>();
  // The sizes of a block per row: whole warps around the row, at most the block.
  static_assert(fp8scale::detail::kWarpSize == 32, "the sizes below are NVIDIA's (a host build plans as CUDA)");
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(256), 256);
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(272), 288);
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(16), 32);
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(897), 928);
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(1024), 1024);
  EXPECT_EQ(fp8scale::detail::rowBlockThreads<1024>(1025), 1024);
}


namespace {
// Device facts of an H200-like device for the group-tile plan: 132 SMs, 6
// blocks of the tile kernel and 4 of the looping kernel an SM. Counts its
// questions, so the tests see which facts a plan needed.
struct FakeFacts {
  int smCount = 132;
  mutable int asked = 0;
  constexpr int sms() const { return ++asked, smCount; }
  constexpr int resident(bool looping) const { return ++asked, (looping ? 4 : 6) * smCount; }
};
}  // namespace

// The group-tile plan (planGroupTile): small grids take the small-grid
// block and width, grids past kLoopFreeMaxWaves x what the device holds loop
// when the producer does, a padded view adds the padding tile to every grid
// but the looping one, and a launch with nothing to write plans nothing.
TEST(GroupTileLaunchPlan, KernelGridAndPaddingFollowTheShape) {
  using fp8scale::BFloat16;
  using fp8scale::index_t;
  using fp8scale::detail::GroupTileKernel;
  using fp8scale::detail::planGroupTile;
  using Policy = fp8scale::GroupTilePolicy<BFloat16>;
  const FakeFacts facts;
  const auto plan = [&](index_t M, index_t G, bool colMajor, bool padded, int loopWaves) {
    return planGroupTile<BFloat16>("test", M, G, 128, colMajor, padded, Policy::kSmallGridElems, loopWaves, facts);
  };
  static_assert(planGroupTile<BFloat16>("test", 0, 56, 128, true, false, 8, 1, FakeFacts{}).kernel ==
                    GroupTileKernel::kNone,
                "M = 0 without padding: nothing");

  // Decode: M = 1, K = 7168 (56 groups) is 2 blocks of 256 threads: small.
  auto p = plan(1, 56, false, false, 1);
  EXPECT_EQ(p.kernel, GroupTileKernel::kSmallGrid);
  EXPECT_EQ(p.threads, Policy::kSmallGridThreads);
  EXPECT_EQ(p.elems, Policy::kSmallGridElems);
  EXPECT_EQ(p.grid.tileRows, 1);
  EXPECT_EQ(p.grid.tileGroups, 8);  // 128 threads of one vector: 8 groups of 128
  EXPECT_EQ(p.grid.gridX, 1);
  EXPECT_EQ(p.grid.gridY, 7);
  // The same with ld = align(1, 4): one more row tile, the padding tile.
  p = plan(1, 56, true, true, 1);
  EXPECT_EQ(p.kernel, GroupTileKernel::kSmallGrid);
  EXPECT_EQ(p.grid.gridX, 2);
  // M = 0 with padding: the padding tile alone.
  p = plan(0, 56, true, true, 1);
  EXPECT_NE(p.kernel, GroupTileKernel::kNone);
  EXPECT_EQ(p.grid.gridX, 1);
  EXPECT_EQ(plan(5, 0, true, true, 1).kernel, GroupTileKernel::kNone) << "no groups: no scales, no padding";

  // M = 512 fills the SMs: the tile kernel, a block per row tile.
  p = plan(512, 56, true, false, 1);
  EXPECT_EQ(p.kernel, GroupTileKernel::kTile);
  EXPECT_EQ(p.threads, Policy::kThreads);
  EXPECT_EQ(p.grid.tileRows, 8);  // column-major: 8 rows, one 32-byte sector of a column
  EXPECT_EQ(p.grid.tileGroups, 4);
  EXPECT_EQ(p.grid.gridX, 64);
  EXPECT_EQ(plan(512, 56, true, true, 1).grid.gridX, 65);

  // M = 65536 is 8192 x 14 blocks, past 2 x 792: group quant loops on 528
  // resident blocks (4 x 132), the row-tile axis capped near 528 / 14; no
  // padding tile (the loop reaches it). SiLU-clamp (no loop) keeps the tile
  // kernel.
  p = plan(65536, 56, true, true, 1);
  EXPECT_EQ(p.kernel, GroupTileKernel::kLoop);
  EXPECT_LE(p.grid.gridX * p.grid.gridY, 528);
  EXPECT_EQ(p.grid.gridX, fp8scale::detail::rowTileBlocks(8192, 14, 528));
  p = plan(65536, 56, true, true, 0);
  EXPECT_EQ(p.kernel, GroupTileKernel::kTile);
  EXPECT_EQ(p.grid.gridX, 8193);

  // Facts are asked only when the choice needs them: none for a large grid
  // of a producer that does not loop.
  facts.asked = 0;
  (void)plan(65536, 56, false, false, 0);
  EXPECT_EQ(facts.asked, 0);
  (void)plan(1, 56, false, false, 1);
  EXPECT_EQ(facts.asked, 1) << "the SM count only";

  // Past the grid limits: the error names the argument.
  p = plan(1, index_t{65536} * 64, false, false, 1);  // 32 groups a block: 131072 group tiles
  EXPECT_FALSE(p.grid.status.isOk());
  EXPECT_STREQ(p.grid.status.argument(), "groups");
}
