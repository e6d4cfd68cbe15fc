// SiLU-clamp quant on the GPU: the TRANSPOSE_SCALE contract bit for bit, and
// the host reference within one fp8 step on a small, reported fraction.
#include <gtest/gtest.h>

#include "fused_tally.cuh"

namespace fp8scale::test {
namespace {

// ---- SiLU-clamp quant -----------------------------------------------------------

template <class C>
class SiluClampQuantDevice : public DeviceTest {};
TYPED_TEST_SUITE(SiluClampQuantDevice, AllCombos, ComboNames);

/// One SiLU-clamp case: the TRANSPOSE_SCALE contract, and the host
/// reference's fp8 and scales tallied into `tally`.
template <class C>
void runSiluCase(index_t M, index_t I, int groupSize, FusedTally& tally) {
  using In = typename C::In;
  using Format = typename C::Format;
  const float limit = (M + I) % 2 ? 7.0f : 0.0f;  // clamped and unclamped runs
  SCOPED_TRACE(::testing::Message() << "M=" << M << " I=" << I << " group=" << groupSize << " limit=" << limit);
  const auto x = makeActivations<In>(M, 2 * I, 2 * I, static_cast<unsigned>(M * 7 + I + groupSize), 8.0f);
  DeviceBuffer<In> dx(x.size() + 8);
  auto padded = x;
  padded.resize(x.size() + 8, fromF<In>(0.0f));
  dx.upload(padded);
  QuantOptions opt;
  opt.rule = C::kRule;
  opt.groupSize = groupSize;
  const SiluClampInput<In> in{dx.get(), M, I, 2 * I, limit};
  const ContractOutput got = checkTransposeContract<Format>(M, I, groupSize, contractLd(M), [&](auto q, auto scale) {
    return siluClampQuant<Format>(in, q, scale, opt, nullptr);
  });
  const index_t G = I / groupSize;
  std::vector<std::uint8_t> q(M * I);
  std::vector<float> s(M * G);
  const SiluClampInput<In> hostIn{x.data(), M, I, 2 * I, limit};
  ASSERT_TRUE((reference::siluClampQuant<Format, typename C::Rule>(hostIn, Fp8Matrix<Format>{q.data(), M, I, I},
                                                                   rowMajorView(s.data(), M, G).value(), groupSize)));
  const bool ue8m0 = std::is_same<typename C::Rule, ScaleUE8M0>::value;
  std::vector<float> s32(M * G);
  if (ue8m0) {  // the same groups' fp32-rule scales, for telling UE8M0 boundary flips (fused_tally.cuh)
    std::vector<std::uint8_t> q32(M * I);
    ASSERT_TRUE((reference::siluClampQuant<Format, ScaleFp32>(hostIn, Fp8Matrix<Format>{q32.data(), M, I, I},
                                                              rowMajorView(s32.data(), M, G).value(), groupSize)));
  }
  if (got.q.size() == q.size())
    tallyFused<Format, typename C::Rule>(got, q, s, tally, kSiluMaxScaleRel, ue8m0 ? &s32 : nullptr);
}

TYPED_TEST(SiluClampQuantDevice, TransposedEmitMatchesMaterializedAndReferenceWithinOneStep) {
  FusedTally tally;
  for (index_t M : kContractRows)
    for (index_t I : {128, 512, 2304, 7168}) runSiluCase<TypeParam>(M, I, 128, tally);
  tally.print(ComboNames::GetName<TypeParam>(0).c_str());
  expectFractionsWithinBounds(tally);
}

// Groups of 32 and 64 on both launch shapes: small grids (fewer blocks than
// SMs: one 16-byte vector a thread) and M = 1000 (256-thread blocks of two).
TYPED_TEST(SiluClampQuantDevice, SmallerGroupsFollowTheSameContract) {
  FusedTally tally;
  for (int groupSize : {32, 64})
    for (index_t M : {1, 17, 1000})
      for (index_t I : {512, 2304}) runSiluCase<TypeParam>(M, I, groupSize, tally);
  tally.print((ComboNames::GetName<TypeParam>(0) + " groups 32/64").c_str());
  expectFractionsWithinBounds(tally);
}

// Both launch shapes on either side of the small-grid boundary of this
// device (the launcher picks by the device's SM count), at I = 2048.
TYPED_TEST(SiluClampQuantDevice, BothSidesOfTheSmallGridBoundary) {
  FusedTally tally;
  for (int groupSize : {128, 32})
    for (index_t M : smallGridBoundaryRows<typename TypeParam::In>(2048 / groupSize, groupSize))
      runSiluCase<TypeParam>(M, 2048, groupSize, tally);
  tally.print((ComboNames::GetName<TypeParam>(0) + " small-grid boundary").c_str());
  expectFractionsWithinBounds(tally);
}

class SiluClampQuantDeviceShapes : public DeviceTest {};

TEST_F(SiluClampQuantDeviceShapes, SiluRefusesShortRowsAndPartialGroups) {
  const index_t M = 2, I = 256;
  DeviceBuffer<BFloat16> dx(M * 2 * I);
  DeviceBuffer<std::uint8_t> dq(M * I);
  DeviceBuffer<float> ds(M * 2);
  QuantOptions opt;
  auto st = siluClampQuant<E4M3FN>(SiluClampInput<BFloat16>{dx.get(), M, I, 2 * I - 16, 0.0f},
                                   Fp8Matrix<E4M3FN>{dq.get(), M, I, I}, rowMajorView(ds.get(), M, 2).value(), opt,
                                   nullptr)
                .status();
  EXPECT_EQ(st.code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(st.argument(), "ldx");
  st = siluClampQuant<E4M3FN>(SiluClampInput<BFloat16>{dx.get(), M, 200, 2 * I, 0.0f},
                              Fp8Matrix<E4M3FN>{dq.get(), M, 200, I}, rowMajorView(ds.get(), M, 1).value(), opt,
                              nullptr)
           .status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "I");
}

}  // namespace
}  // namespace fp8scale::test
