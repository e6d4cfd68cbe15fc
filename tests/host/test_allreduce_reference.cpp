// The fused allreduce's host side: the reference's rank-ordered
// fp32 sum with one rounding, its composition with the RMSNorm reference,
// the algorithm choice, the co-residency bound, the barrier tags and the
// statuses device faults turn into.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fp8scale/allreduce/allreduce_sum.hpp"
#include "fp8scale/allreduce/communicator.hpp"
#include "fp8scale/allreduce/signal.hpp"
#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"
#include "fp8scale/reference/allreduce_fused.hpp"

namespace fp8scale {
namespace {

TEST(AllreduceReference, SumsInRankOrderInFp32) {
  // fp32 spacing at 1e8 is 8: (1e8 + 1) - 1e8 == 0, while 1e8 - 1e8 + 1 == 1.
  const std::vector<float> a{1e8f}, b{1.0f}, c{-1e8f};
  float out = -1.0f;
  ASSERT_TRUE(reference::allreduceSum<float>({a.data(), b.data(), c.data()}, 1, 1, 1, &out, 1));
  EXPECT_EQ(out, 0.0f);
  ASSERT_TRUE(reference::allreduceSum<float>({a.data(), c.data(), b.data()}, 1, 1, 1, &out, 1));
  EXPECT_EQ(out, 1.0f) << "another rank order, another sum: the order is part of the contract";
}

TEST(AllreduceReference, StartsFromRankZeroSoNegativeZeroSurvives) {
  const std::vector<BFloat16> a{toBFloat16(-0.0f)}, b{toBFloat16(-0.0f)};
  BFloat16 out{0x1234};
  ASSERT_TRUE(reference::allreduceSum<BFloat16>({a.data(), b.data()}, 1, 1, 1, &out, 1));
  EXPECT_EQ(out.bits, 0x8000) << "-0 + -0 = -0; a sum started from +0 would give +0";
}

TEST(AllreduceReference, RoundsToTheInputTypeOnceAfterTheLastRank) {
  // 1 + 2^-8 + 2^-8 = 1 + 2^-7, exact in bf16. Rounding after each addition
  // would give 1 (1 + 2^-8 is a tie that rounds to even, twice).
  const std::vector<BFloat16> a{toBFloat16(1.0f)}, b{toBFloat16(std::ldexp(1.0f, -8))}, c = b;
  BFloat16 out{0};
  ASSERT_TRUE(reference::allreduceSum<BFloat16>({a.data(), b.data(), c.data()}, 1, 1, 1, &out, 1));
  EXPECT_EQ(toFloat(out), 1.0f + std::ldexp(1.0f, -7));
}

TEST(AllreduceReference, RowStridesAndErrors) {
  // Two rows of 2 with row stride 3; the gap is not read.
  const std::vector<float> a{1, 2, NAN, 3, 4, NAN}, b{10, 20, NAN, 30, 40, NAN};
  std::vector<float> out(4, -1.0f);
  ASSERT_TRUE(reference::allreduceSum<float>({a.data(), b.data()}, 2, 2, 3, out.data(), 2));
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(reference::allreduceSum<float>({}, 2, 2, 3, out.data(), 2).code(), StatusCode::kInvalidValue);
  EXPECT_EQ(reference::allreduceSum<float>({a.data(), nullptr}, 2, 2, 3, out.data(), 2).code(),
            StatusCode::kNullPointer);
  EXPECT_EQ(reference::allreduceSum<float>({a.data()}, 2, 4, 3, out.data(), 4).code(), StatusCode::kLdTooSmall);
  EXPECT_TRUE(reference::allreduceSum<float>({a.data()}, 0, 2, 3, nullptr, 2)) << "M == 0 is valid";
}

TEST(AllreduceReference, FusedEqualsTheSumFollowedByRmsNormQuant) {
  const index_t M = 3, K = 256, G = 2;
  std::vector<BFloat16> p0(M * K), p1(M * K), p2(M * K), w(K), r(M * K);
  for (index_t i = 0; i < M * K; ++i) {
    p0[i] = toBFloat16(std::sin(0.1f * static_cast<float>(i)));
    p1[i] = toBFloat16(std::cos(0.07f * static_cast<float>(i)) * 3.0f);
    p2[i] = toBFloat16(static_cast<float>(i % 17) - 8.0f);
    r[i] = toBFloat16(0.25f * static_cast<float>(i % 5));
  }
  for (index_t k = 0; k < K; ++k) w[k] = toBFloat16(0.5f + static_cast<float>(k % 3) * 0.25f);

  // Fused reference.
  std::vector<BFloat16> r1 = r, y1(M * K);
  std::vector<std::uint8_t> q1(M * K);
  std::vector<float> s1(M * G);
  RmsNormQuantInput<BFloat16> in;
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.residual = r1.data();
  in.ldResidual = K;
  in.weight = w.data();
  in.normOut = y1.data();
  in.ldNormOut = K;
  ASSERT_TRUE((reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>({p0.data(), p1.data(), p2.data()}, in,
                                                                   Fp8Matrix<E4M3FN>{q1.data(), M, K, K},
                                                                   colMajorView(s1.data(), M, G, M).value(), 128)));
  // By hand: the sum, then rmsNormQuant.
  std::vector<BFloat16> sum(M * K), r2 = r, y2(M * K);
  for (index_t i = 0; i < M * K; ++i)
    sum[i] = toBFloat16((toFloat(p0[i]) + toFloat(p1[i])) + toFloat(p2[i]));
  std::vector<std::uint8_t> q2(M * K);
  std::vector<float> s2(M * G);
  RmsNormQuantInput<BFloat16> in2 = in;
  in2.x = sum.data();
  in2.residual = r2.data();
  in2.normOut = y2.data();
  ASSERT_TRUE((reference::rmsNormQuant<E4M3FN, ScaleFp32>(in2, Fp8Matrix<E4M3FN>{q2.data(), M, K, K},
                                                          colMajorView(s2.data(), M, G, M).value(), 128)));
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(r1.data(), r2.data(), r1.size() * 2), 0);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 2), 0);
}

TEST(AllreducePolicy, AutoPicksOneStageForSmallMessagesAndTwoStageWhenKSplits) {
  constexpr std::size_t kOne = 512 << 10;
  using A = AllreduceAlgorithm;
  static_assert(chooseAllreduceAlgorithm(A::kAuto, 8, 1, 7168, 2, kOne) == A::kOneStage, "M = 1");
  static_assert(chooseAllreduceAlgorithm(A::kAuto, 8, 512, 7168, 2, kOne) == A::kTwoStage, "7 MiB");
  static_assert(chooseAllreduceAlgorithm(A::kAuto, 1, 512, 7168, 2, kOne) == A::kOneStage, "one rank");
  static_assert(chooseAllreduceAlgorithm(A::kAuto, 8, 4096, 96, 2, kOne) == A::kOneStage, "K does not split");
  static_assert(chooseAllreduceAlgorithm(A::kTwoStage, 8, 1, 7168, 2, kOne) == A::kTwoStage, "forced");
  // The threshold is inclusive: 512 KiB exactly is one-stage.
  EXPECT_EQ(chooseAllreduceAlgorithm(A::kAuto, 4, 256, 1024, 2, kOne), A::kOneStage);
  EXPECT_EQ(chooseAllreduceAlgorithm(A::kAuto, 4, 257, 1024, 2, kOne), A::kTwoStage);
  EXPECT_EQ(chooseAllreduceAlgorithm(A::kAuto, 4, 257, 1024, 2, 0), A::kTwoStage);
}

// The scratch buffer bounds two-stage messages, and one-stage ones only when
// the call stages its rows there (the fused producer's long rows): a
// one-stage call of short rows larger than the buffer is the custom path's.
TEST(AllreducePolicy, OnlyStagedOrTwoStageMessagesMustFitTheScratchBuffer) {
  using fp8scale::AllreduceAlgorithm;
  using fp8scale::BFloat16;
  using fp8scale::detail::checkAllreduceShape;
  const std::size_t buffer = std::size_t{1} << 20;  // 1 MiB
  const fp8scale::index_t M = 4096, K = 7168;       // 56 MiB of bf16
  EXPECT_TRUE(checkAllreduceShape<BFloat16>("t", AllreduceAlgorithm::kOneStage, 2, M, K, buffer, false));
  const fp8scale::Status staged =
      checkAllreduceShape<BFloat16>("t", AllreduceAlgorithm::kOneStage, 2, M, K, buffer, true);
  EXPECT_EQ(staged.code(), fp8scale::StatusCode::kInvalidShape);
  EXPECT_NE(staged.message().find("'M'"), std::string::npos) << staged.message();
  EXPECT_EQ(checkAllreduceShape<BFloat16>("t", AllreduceAlgorithm::kTwoStage, 2, M, K, buffer, false).code(),
            fp8scale::StatusCode::kInvalidShape);
  // What the fused producer and its fallback pass: rows of K = 7168 are not
  // staged, rows of K = 16384 are.
  EXPECT_FALSE(fp8scale::detail::allreduceStagesRows<BFloat16>(7168));
  EXPECT_TRUE(fp8scale::detail::allreduceStagesRows<BFloat16>(16384));
}

TEST(AllreducePolicy, GridLimitKeepsEveryRanksGridResident) {
  static_assert(allreduceGridLimit(1, 132, 8, 0) == 16, "H200, 1024-thread blocks, 8 ranks on one GPU");
  static_assert(allreduceGridLimit(4, 132, 8, 0) == 16, "ranks sharing a GPU: one block per SM between them");
  static_assert(allreduceGridLimit(4, 132, 1, 0) == 256 && allreduceGridLimit(1, 132, 1, 0) == 132, "one rank");
  static_assert(allreduceGridLimit(2, 132, 1, 0) == kAllreduceMaxBlocks, "capped by the pad's slots");
  static_assert(allreduceGridLimit(1, 132, 8, 4) == 4, "the option caps it");
  static_assert(allreduceGridLimit(1, 4, 8, 0) == 0, "cannot be co-resident: refused");
  static_assert(allreduceGridLimit(0, 132, 1, 0) == 0, "a kernel that does not fit at all");
  EXPECT_TRUE(isSupportedAllreduceWorld(8));
  EXPECT_FALSE(isSupportedAllreduceWorld(3));
  EXPECT_FALSE(isSupportedAllreduceWorld(16));
}

TEST(AllreduceSignals, TagsSeparateShapesAndPadsKeepTheirLayout) {
  static_assert(allreduceTag(1, 16, 2048, 2048, 2) != allreduceTag(1, 17, 2048, 2048, 2), "M");
  static_assert(allreduceTag(1, 16, 2048, 2048, 2) != allreduceTag(1, 16, 4096, 4096, 2), "K");
  static_assert(allreduceTag(1, 16, 2048, 2048, 2) == allreduceTag(1, 16, 2048, 2048, 2), "deterministic");
  static_assert(kSignalPadBytes % 256 == 0 && kSignalPadBytes >= sizeof(SignalPad), "pad size");
  static_assert(kRankTableBytes % 256 == 0, "table size");
  static_assert(sizeof(SignalPad::flags) == 3 * kAllreduceMaxBlocks * kAllreduceMaxRanks * 8, "one slot per "
                "phase x block x rank");
}

TEST(AllreduceSignals, FaultRecordsBecomeStatusesNamingThePeerAndTheBarrier) {
  AllreduceErrorRecord e;
  EXPECT_TRUE(allreduceErrorStatus(e));
  e.fault = static_cast<std::uint32_t>(AllreduceFault::kTimeout);
  e.peer = 2;
  e.phase = static_cast<std::uint32_t>(AllreducePhase::kStart);
  Status s = allreduceErrorStatus(e);
  EXPECT_EQ(s.code(), StatusCode::kDeviceError);
  EXPECT_EQ(s.value(), 2);
  EXPECT_EQ(s.limit(), 1);
  EXPECT_NE(s.message().find("start barrier"), std::string::npos) << s.message();
  e.fault = static_cast<std::uint32_t>(AllreduceFault::kShapeMismatch);
  e.peer = 1;
  s = allreduceErrorStatus(e);
  EXPECT_EQ(s.code(), StatusCode::kInvalidShape);
  EXPECT_EQ(s.value(), 1);
  e.fault = static_cast<std::uint32_t>(AllreduceFault::kAbortedByPeer);
  e.phase = static_cast<std::uint32_t>(AllreducePhase::kEnd);
  s = allreduceErrorStatus(e);
  EXPECT_EQ(s.code(), StatusCode::kDeviceError);
  EXPECT_EQ(s.limit(), 3);
  e.fault = 99;
  EXPECT_EQ(allreduceErrorStatus(e).code(), StatusCode::kDeviceError);
}

}  // namespace
}  // namespace fp8scale
