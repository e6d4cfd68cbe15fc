// The policy header: the gate, consumer detection, the ld each consumer reads,
// and materializeHost (the reference the device kernel is tested against).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fp8scale/layout_policy.hpp"

namespace fp8scale {
namespace {

static_assert(!emitTransposed(0, true) && !emitTransposed(1, true) && emitTransposed(2, true), "");
static_assert(consumerScaleLd(ScaleConsumer::kBpreshuffleGfx95, 17) == 17, "");
static_assert(consumerScaleLd(ScaleConsumer::kDeepGemmTma, 17) == 20, "");

TEST(LayoutPolicy, GateTruthTable) {
  struct Row {
    index_t m;
    bool gfx95;
    bool expected;
  };
  const Row table[] = {{0, false, false}, {1, false, false}, {2, false, false}, {4096, false, false},
                       {0, true, false},  {1, true, false},  {2, true, true},   {3, true, true},
                       {4096, true, true}, {-1, true, false}};
  for (const Row& r : table) EXPECT_EQ(emitTransposed(r.m, r.gfx95), r.expected) << "m=" << r.m << " gfx95=" << r.gfx95;
}

// The gate for a consumer: bpreshuffle (ld = M) emits transposed from M = 2
// and its bpreshuffle form is the same answer; consumers with a padded ld
// also emit transposed at M = 1, where row-major bytes lack the padding
// slots; row-major consumers never.
TEST(LayoutPolicy, GateForEachConsumer) {
  for (index_t m : {-1, 0, 1, 2, 3, 4, 5, 4096}) {
    EXPECT_EQ(emitTransposed(ScaleConsumer::kBpreshuffleGfx95, m), m >= 2) << m;
    EXPECT_EQ(emitTransposed(ScaleConsumer::kBpreshuffleGfx95, m), emitTransposed(m, true)) << m;
    EXPECT_FALSE(emitTransposed(m, false)) << m;
    EXPECT_FALSE(emitTransposed(ScaleConsumer::kRowMajor, m)) << m;
    EXPECT_EQ(emitTransposed(ScaleConsumer::kCublasLtVec128, m), m >= 1) << m;
    EXPECT_EQ(emitTransposed(ScaleConsumer::kDeepGemmTma, m), m >= 1) << m;
  }
}

// On an sm_90 device the gate names DeepGEMM's TMA-aligned layout, so a site
// takes the transposed path from M = 1 (not row-major + materialize).
TEST(LayoutPolicy, HopperSiteEmitsTransposed) {
  DeviceInfo hopper;
  hopper.isAmd = false;
  hopper.ccMajor = 9;
  const ScaleConsumer c = detectScaleConsumer(hopper);
  EXPECT_EQ(c, ScaleConsumer::kDeepGemmTma);
  EXPECT_TRUE(emitTransposed(c, 1));
  EXPECT_TRUE(emitTransposed(c, 17));
  EXPECT_EQ(consumerScaleLd(c, 17), 20);
  EXPECT_FALSE(emitTransposed(17, onBpreshuffleGfx95(hopper)));
}

TEST(LayoutPolicy, Gfx95FamilyFromGcnArchName) {
  EXPECT_TRUE(isGfx95Arch("gfx950:sramecc+:xnack-"));
  EXPECT_TRUE(isGfx95Arch("gfx950"));
  EXPECT_TRUE(isGfx95Arch("gfx955"));
  EXPECT_FALSE(isGfx95Arch("gfx942:sramecc+:xnack-"));
  EXPECT_FALSE(isGfx95Arch("gfx90a"));
  EXPECT_FALSE(isGfx95Arch("gfx9"));
  EXPECT_FALSE(isGfx95Arch(""));
  EXPECT_FALSE(isGfx95Arch("gfx1150"));
}

TEST(LayoutPolicy, ConsumerDetectedFromDeviceProperties) {
  DeviceInfo mi355;
  mi355.isAmd = true;
  mi355.archName = "gfx950:sramecc+:xnack-";
  DeviceInfo mi300 = mi355;
  mi300.archName = "gfx942:sramecc+:xnack-";
  DeviceInfo h200;
  h200.ccMajor = 9;
  DeviceInfo a100;
  a100.ccMajor = 8;
  EXPECT_EQ(detectScaleConsumer(mi355), ScaleConsumer::kBpreshuffleGfx95);
  EXPECT_TRUE(onBpreshuffleGfx95(mi355));
  EXPECT_EQ(detectScaleConsumer(mi300), ScaleConsumer::kRowMajor);
  EXPECT_FALSE(onBpreshuffleGfx95(mi300));
  EXPECT_EQ(detectScaleConsumer(h200), ScaleConsumer::kDeepGemmTma);
  EXPECT_FALSE(onBpreshuffleGfx95(h200));
  EXPECT_EQ(detectScaleConsumer(a100), ScaleConsumer::kRowMajor);
}

// The gate is keyed on the consumer: each reads one layout whatever the
// device; the SM100 consumers read exponent bytes, which the fp32 transposed
// emission is not (their producers write the layout itself).
TEST(LayoutPolicy, EachConsumerReadsOneLayout) {
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kRowMajor), ScaleLayoutKind::kRowMajor);
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kBpreshuffleGfx95), ScaleLayoutKind::kColumnMajor);
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kCublasLtVec128), ScaleLayoutKind::kColumnMajor);
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kDeepGemmTma), ScaleLayoutKind::kColumnMajor);
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kDeepGemmSm100), ScaleLayoutKind::kPackedUe8m0);
  EXPECT_EQ(consumerScaleLayout(ScaleConsumer::kMxfp8Swizzled), ScaleLayoutKind::kSwizzled128x4);
  for (ScaleConsumer c : {ScaleConsumer::kDeepGemmSm100, ScaleConsumer::kMxfp8Swizzled}) {
    EXPECT_TRUE(consumerReadsExponents(c));
    EXPECT_FALSE(consumerIsColumnMajor(c));
    for (index_t m : {0, 1, 2, 17}) EXPECT_FALSE(emitTransposed(c, m)) << m;
  }
  EXPECT_FALSE(consumerReadsExponents(ScaleConsumer::kDeepGemmTma));
  EXPECT_EQ(consumerScaleLd(ScaleConsumer::kDeepGemmSm100, 17), 20);  // words: PackedUe8m0{align(M, 4)}
  EXPECT_EQ(consumerScaleLd(ScaleConsumer::kMxfp8Swizzled, 17), 0);
  // A device query never picks an exponent consumer: the UE8M0 rule is the
  // site's choice (it names the GEMM).
  DeviceInfo b200;
  b200.ccMajor = 10;
  EXPECT_EQ(detectScaleConsumer(b200), ScaleConsumer::kDeepGemmTma);
}

TEST(LayoutPolicy, ConsumerLd) {
  for (index_t m : {0, 1, 2, 3, 4, 5, 16, 17, 129}) {
    EXPECT_EQ(consumerScaleLd(ScaleConsumer::kBpreshuffleGfx95, m), m);
    EXPECT_EQ(consumerScaleLd(ScaleConsumer::kDeepGemmTma, m), (m + 3) / 4 * 4);
    EXPECT_EQ(consumerScaleLd(ScaleConsumer::kCublasLtVec128, m), (m + 3) / 4 * 4);
    EXPECT_EQ(consumerScaleLd(ScaleConsumer::kRowMajor, m), 0);
  }
  EXPECT_FALSE(consumerIsColumnMajor(ScaleConsumer::kRowMajor));
  EXPECT_TRUE(consumerIsColumnMajor(ScaleConsumer::kBpreshuffleGfx95));
}

// ---- materializeHost ----------------------------------------------------------

float valueAt(index_t m, index_t g) { return static_cast<float>(m * 1000 + g + 1); }

TEST(MaterializeHost, WritesEveryValueAndZeroesPaddingOverGarbage) {
  for (index_t M : {0, 1, 2, 3, 4, 5, 16, 17, 129})
    for (index_t G : {1, 2, 56})
      for (index_t ld : {M, alignUp(M, 4)}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " ld=" << ld);
        std::vector<float> src(M * G);
        auto rm = rowMajorView(src.data(), M, G).value();
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) rm(m, g) = valueAt(m, g);
        std::vector<float> dst(G * ld, -99.0f);
        auto r = materializeHost(rm, dst.data(), ld);
        ASSERT_TRUE(r.isOk()) << r.status().message();
        const auto& v = r.value();
        EXPECT_EQ(v.stride(0), 1);
        EXPECT_EQ(v.stride(1), ld);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) ASSERT_EQ(v(m, g), valueAt(m, g));
        if (v.data() == dst.data()) {
          for (index_t g = 0; g < G; ++g)
            for (index_t m = M; m < ld; ++m) ASSERT_EQ(dst[g * ld + m], 0.0f) << "padding at g=" << g << " m=" << m;
        }
      }
}

TEST(MaterializeHost, NoOpCasesReturnTheSourcePointerAndTouchNothing) {
  std::vector<float> src(56, 1.5f), dst(56 * 4, -99.0f);
  // One row, ld == 1: row-major (1, G) is already column-major [G][1].
  auto one = materializeHost(rowMajorView(src.data(), 1, 56).value(), dst.data(), 1);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one.value().data(), src.data());
  // One group with unit row stride, ld == M.
  auto col = materializeHost(rowMajorView(src.data(), 56, 1).value(), dst.data(), 56);
  ASSERT_TRUE(col.isOk());
  EXPECT_EQ(col.value().data(), src.data());
  // Already column-major with the requested ld.
  auto cm = colMajorView(src.data(), 14, 4).value();
  auto same = materializeHost(cm, dst.data(), 14);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(same.value().data(), src.data());
  // M == 0: valid, nothing to do, no destination needed.
  auto empty = materializeHost(rowMajorView<float>(nullptr, 0, 56).value(), static_cast<float*>(nullptr), 0);
  ASSERT_TRUE(empty.isOk());
  for (float d : dst) ASSERT_EQ(d, -99.0f);
}

TEST(MaterializeHost, SingleRowWithPaddedLdIsARealCopy) {
  // ld = align(1, 4) = 4 asks for padding slots the source does not have.
  std::vector<float> src = {1, 2, 3}, dst(3 * 4, -99.0f);
  auto r = materializeHost(rowMajorView(src.data(), 1, 3).value(), dst.data(), 4);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value().data(), dst.data());
  EXPECT_EQ(dst, (std::vector<float>{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}));
}

TEST(MaterializeHost, IsIdempotentAndKeepsThePointer) {
  const index_t M = 17, G = 56, ld = alignUp(M, 4);
  std::vector<float> src(M * G), dst(G * ld), other(G * ld, -1.0f);
  for (index_t i = 0; i < M * G; ++i) src[i] = static_cast<float>(i);
  auto first = materializeHost(rowMajorView(src.data(), M, G).value(), dst.data(), ld);
  ASSERT_TRUE(first.isOk());
  auto second = materializeHost(first.value(), other.data(), ld);
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ(second.value().data(), first.value().data());
  for (float o : other) ASSERT_EQ(o, -1.0f);
}

TEST(MaterializeHost, ColumnMajorWithAnotherLdIsRepacked) {
  const index_t M = 5, G = 3;
  std::vector<float> src(G * M), dst(G * 8, -99.0f);
  auto cm = colMajorView(src.data(), M, G).value();
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) cm(m, g) = valueAt(m, g);
  auto r = materializeHost(cm, dst.data(), 8);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value().data(), dst.data());
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) EXPECT_EQ(r.value()(m, g), valueAt(m, g));
  EXPECT_EQ(dst[5], 0.0f);
}

TEST(MaterializeHost, P1InputIsViewedNotCopied) {
  std::vector<float> bytes(4 * 3), dst(12, -1.0f);
  auto p1 = transposedContiguousView(bytes.data(), 4, 3).value();
  auto r = materializeHost(p1, dst.data(), 4);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value().data(), bytes.data());
}

TEST(MaterializeHost, RefusesBadArgumentsByName) {
  std::vector<float> src(5 * 2), dst(2 * 8);
  auto rm = rowMajorView(src.data(), 5, 2).value();
  auto small = materializeHost(rm, dst.data(), 4);
  EXPECT_EQ(small.status().code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(small.status().argument(), "ld");
  auto null = materializeHost(rm, static_cast<float*>(nullptr), 5);
  EXPECT_EQ(null.status().code(), StatusCode::kNullPointer);
  EXPECT_STREQ(null.status().argument(), "dst");
  auto overlap = materializeHost(rm, src.data() + 3, 5);
  EXPECT_EQ(overlap.status().code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(overlap.status().argument(), "dst");
}

}  // namespace
}  // namespace fp8scale
