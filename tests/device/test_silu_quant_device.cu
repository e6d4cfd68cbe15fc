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
// SMs: 4 values a thread) and M = 1000 (256-thread blocks of two vectors).
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

/// One launch of siluClampQuantKernel with kElems values a thread in
/// GroupTilePolicy::kSmallGridThreads-thread blocks, its grid and tile sized
/// as the launcher sizes a small grid (with the padding tile of a padded view).
template <class In, class Format, class Rule, int kGroup, int kElems, class Layout>
void launchSiluSlices(const SiluClampInput<In>& in, Fp8Matrix<Format> q, ScaleView<float, Layout> scale) {
  constexpr bool T = Layout::kColumnMajor;
  constexpr int kThreads = GroupTilePolicy<In>::kSmallGridThreads;
  const detail::GroupTileGrid grid =
      detail::groupTileGrid("test", T, in.rows, in.intermediate / kGroup, kGroup, kThreads, kElems, 0,
                            scale.hasPadding() ? 1 : 0, GroupTilePolicy<In>::kSectorScales);
  ASSERT_TRUE(grid.status.isOk());
  auto kernel = detail::siluClampQuantKernel<In, Format, Rule, kGroup, Layout, kElems, /*kPadding*/ false>;
  if constexpr (T) {
    if (scale.hasPadding()) kernel = detail::siluClampQuantKernel<In, Format, Rule, kGroup, Layout, kElems, true>;
  }
  kernel<<<dim3(static_cast<unsigned>(grid.gridX), static_cast<unsigned>(grid.gridY)), kThreads>>>(
      in, q, scale, Format::kMax, kDefaultAmaxEps, grid.tileRows, grid.tileGroups, false);
  ASSERT_EQ(deviceLastError(), kDeviceSuccess);
}

// The launcher's small-grid slices: 4 values a thread for SiLU-clamp, one
// 16-byte vector for group quant (GroupTilePolicy).
static_assert(detail::SiluClampQuantKernelFor<BFloat16, E4M3FN, ColMajor>::Of<ScaleFp32, 128>::kSmallGridElems ==
                  4,
              "SiLU-clamp's small grids take half a vector of bf16");
static_assert(detail::SiluClampQuantKernelFor<float, E4M3FN, RowMajor>::Of<ScaleFp32, 32>::kSmallGridElems == 4,
              "and one vector of fp32");
static_assert(detail::GroupQuantKernelFor<BFloat16, E4M3FN, ColMajor>::Of<ScaleFp32, 128>::kSmallGridElems == 8,
              "group quant's small grids take one vector");

// The slice width changes which lanes hold a group and how the amax is
// reduced across them, which depends on the input's width, the group size
// and the scale layout; the fp8 format and the scale rule act on each value
// and each group's amax after the reduction, the same for every width. So
// this test, whose every combination compiles three kernels, runs each
// 16-bit input once, with the formats and rules split between them (fp32
// has no half-vector slice): 24 kernels where all combinations took 96.
template <class C>
class SiluClampQuantSlices : public DeviceTest {};
using SliceCombos = ::testing::Types<Combo<BFloat16, E4M3FN, ScaleFp32>, Combo<Float16, E4M3FNUZ, ScaleUE8M0>>;
TYPED_TEST_SUITE(SiluClampQuantSlices, SliceCombos, ComboNames);

// SiLU-clamp's small-grid slices (4 values a thread: half a vector, a group
// of 128 over a whole warp) give the bits of slices of one 16-byte vector a
// thread (group quant's small-grid slice) and of the launcher, on
// activations with zero rows, NaN, +-inf, saturating values and subnormals,
// both scale layouts, groups of 128 and 32.
TYPED_TEST(SiluClampQuantSlices, HalfVectorSlicesGiveTheVectorSlicesBits) {
  using In = typename TypeParam::In;
  using Format = typename TypeParam::Format;
  using Rule = typename TypeParam::Rule;
  constexpr int kHalf = GroupTilePolicy<In>::kSiluSmallGridElems, kVector = GroupTilePolicy<In>::kSmallGridElems;
  static_assert(kHalf < kVector, "a 16-bit input's small-grid slice is half a vector");
  {
    auto run = [&](auto group, auto layout, index_t M, index_t I) {
      constexpr int kGroup = decltype(group)::value;
      using Layout = decltype(layout);
      const index_t G = I / kGroup;
      SCOPED_TRACE(::testing::Message() << "M=" << M << " I=" << I << " group=" << kGroup
                                        << (Layout::kColumnMajor ? " column-major" : " row-major"));
      const auto x = makeActivations<In>(M, 2 * I, 2 * I, static_cast<unsigned>(M + I + kGroup), 8.0f);
      DeviceBuffer<In> dx(x.size());
      dx.upload(x);
      const SiluClampInput<In> in{dx.get(), M, I, 2 * I, M % 2 ? 7.0f : 0.0f};
      std::vector<std::uint8_t> q[3];
      std::vector<float> s[3];
      for (int launch = 0; launch < 3; ++launch) {
        DeviceBuffer<std::uint8_t> dq(M * I);
        DeviceBuffer<float> ds(M * G);
        dq.poison(kGarbage);
        ds.poison(kGarbage);
        const Fp8Matrix<Format> fq{dq.get(), M, I, I};
        ScaleView<float, Layout> sv;
        if constexpr (Layout::kColumnMajor)
          sv = colMajorView(ds.get(), M, G, M).value();
        else
          sv = rowMajorView(ds.get(), M, G).value();
        if (launch == 0) launchSiluSlices<In, Format, Rule, kGroup, kHalf>(in, fq, sv);
        if (launch == 1) launchSiluSlices<In, Format, Rule, kGroup, kVector>(in, fq, sv);
        if (launch == 2) {
          QuantOptions opt;
          opt.rule = TypeParam::kRule;
          opt.groupSize = kGroup;
          ASSERT_TRUE(siluClampQuant<Format>(in, fq, sv, opt, nullptr).isOk());
        }
        ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
        q[launch] = dq.download();
        s[launch] = ds.download();
      }
      EXPECT_EQ(q[0], q[1]) << "fp8 differs between half-vector and vector slices";
      EXPECT_EQ(countBitDiffs(s[0], s[1]), 0u) << "scales differ between half-vector and vector slices";
      EXPECT_EQ(q[0], q[2]) << "fp8 differs from the launcher's";
      EXPECT_EQ(countBitDiffs(s[0], s[2]), 0u) << "scales differ from the launcher's";
      std::size_t poisoned = 0;  // every scale written (a NaN group's scale is NaN, not the poison)
      for (float v : s[0]) {
        unsigned char b[4];
        std::memcpy(b, &v, 4);
        poisoned += b[0] == kGarbage && b[1] == kGarbage && b[2] == kGarbage && b[3] == kGarbage;
      }
      EXPECT_EQ(poisoned, 0u) << "scales left unwritten";
      // fp8 bytes equal to the poison: only where a value encodes to 0xAB
      // (-0.34375 in e4m3fn, -0.171875 in e4m3fnuz), a rare code here.
      EXPECT_LT(static_cast<std::size_t>(std::count(q[0].begin(), q[0].end(), kGarbage)), q[0].size() / 16)
          << "fp8 left unwritten";
    };
    for (index_t M : {1, 5, 64})
      for (index_t I : {2048, 3072}) {
        run(std::integral_constant<int, 128>{}, RowMajor{}, M, I);
        run(std::integral_constant<int, 128>{}, ColMajor{}, M, I);
        run(std::integral_constant<int, 32>{}, RowMajor{}, M, I);
        run(std::integral_constant<int, 32>{}, ColMajor{}, M, I);
      }
  }
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
