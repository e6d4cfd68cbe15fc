// Launch limits of platform.hpp (host build: the CUDA limits).
#include <gtest/gtest.h>

#include "fp8scale/platform.hpp"

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
