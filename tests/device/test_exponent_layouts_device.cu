// The producers writing the UE8M0 exponent layouts themselves (PackedUe8m0
// for DeepGEMM on SM100, Swizzled128x4 for MXFP8 block-scaled MMA) against
// row-major emission followed by materialize: the same fp8 bytes and the same
// layout bytes, padding included, over garbage; nothing written past the
// span; every byte equal to the host reference's. On sm_90 the producer runs
// and the SM100 consumers cannot: the bytes are held to the consumers'
// documented layouts (tests/host/test_exponent_layouts.cpp). CUDA only: the
// library compiles these producers for the NVIDIA consumers alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "producer_harness.cuh"

namespace fp8scale::test {
namespace {

template <class Layout>
class ExponentEmitDevice : public DeviceTest {};
TYPED_TEST_SUITE(ExponentEmitDevice, ExponentLayoutTypes);

/// x on the device, with 8 zero elements past its end (the 16-byte loads of
/// a slice stay in the allocation at M == 0 too).
DeviceBuffer<BFloat16> onDevice(const std::vector<BFloat16>& x) {
  DeviceBuffer<BFloat16> d(x.size() + 8);
  std::vector<BFloat16> padded = x;
  padded.resize(x.size() + 8, fromF<BFloat16>(0.0f));
  d.upload(padded);
  return d;
}

/// One case: bf16 x[M, K] in groups of `group`, UE8M0 rule. `evictLast`: the
/// direct emission's scale stores carry the L2 evict_last policy (the byte
/// store's own instruction).
template <class Layout>
void expectDirectEmitEqualsRowMajorPlusMaterialize(index_t M, index_t K, int group, bool evictLast) {
  const index_t G = K / group;
  SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " group=" << group
                                    << (evictLast ? " evict_last" : ""));
  const auto x = makeActivations<BFloat16>(M, K, K, static_cast<unsigned>(M * 131 + K + group), E4M3FN::kMax);
  const DeviceBuffer<BFloat16> dx = onDevice(x);
  const Layout layout = exponentLayout<Layout>(M, G);
  const index_t span = layout.requiredSpan(M, G);
  DeviceBuffer<std::uint8_t> q1(M * K + 16), q2(M * K + 16), relaid(span + 16), direct(span + 16);
  DeviceBuffer<float> rowScales(M * G + 1);
  relaid.poison(0xAB);
  direct.poison(0x5C);
  q1.poison(0x11);
  q2.poison(0x22);

  QuantOptions opt;
  opt.rule = ScaleRule::kUE8M0;
  opt.groupSize = group;
  const auto in = GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K);
  const auto rowView = rowMajorView(rowScales.get(), M, G).value();
  auto r1 = groupQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q1.get(), M, K, K}, rowView, opt, nullptr);
  ASSERT_TRUE(r1.isOk()) << r1.status().message();
  const Status m1 = materialize(rowView, ScaleView<std::uint8_t, Layout>::make(relaid.get(), M, G, layout).value(), nullptr);
  ASSERT_TRUE(m1.isOk()) << m1.message();
  opt.scaleStore = evictLast ? ScaleStorePolicy::kEvictLast : ScaleStorePolicy::kEvictNormal;
  const auto out = ScaleView<std::uint8_t, Layout>::make(direct.get(), M, G, layout).value();
  auto r2 = groupQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q2.get(), M, K, K}, out, opt, nullptr);
  ASSERT_TRUE(r2.isOk()) << r2.status().message();
  EXPECT_EQ(r2.value().scale.data(), direct.get()) << "the producer's own buffer, no copy";
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());

  const auto a = q1.download(), b = q2.download();
  std::size_t qDiff = 0;
  for (index_t i = 0; i < M * K; ++i) qDiff += a[i] != b[i];
  EXPECT_EQ(qDiff, 0u) << "fp8 bytes differ";
  const auto want = relaid.download(), got = direct.download();
  for (index_t i = 0; i < span; ++i) ASSERT_EQ(int{got[i]}, int{want[i]}) << "byte " << i << " of " << span;
  EXPECT_EQ(got[span], 0x5C) << "written past the span";
  EXPECT_EQ(want[span], 0xAB) << "materialize wrote past the span";

  if (M > 1000) return;  // the host reference: the contract's rows
  std::vector<std::uint8_t> q(M * K + 1), hostBuffer(static_cast<std::size_t>(span) + 16, 0x77);
  std::uint8_t* host = hostBuffer.data() + (16 - reinterpret_cast<std::uintptr_t>(hostBuffer.data()) % 16) % 16;
  const Status hs = reference::groupQuant<E4M3FN, ScaleUE8M0>(
      x.data(), M, K, K, group, Fp8Matrix<E4M3FN>{q.data(), M, K, K},
      ScaleView<std::uint8_t, Layout>::make(host, M, G, layout).value());
  ASSERT_TRUE(hs.isOk()) << hs.message();
  for (index_t i = 0; i < M * K; ++i) ASSERT_EQ(int{q[i]}, int{b[i]}) << "fp8 byte " << i << " vs the host reference";
  for (index_t i = 0; i < span; ++i) ASSERT_EQ(int{got[i]}, int{host[i]}) << "byte " << i << " vs the host reference";
}

// The contract's rows and widths, groups of 128 (DeepGEMM) and 32 (MXFP8):
// small grids, 256-thread blocks, the padding tile (M % 4 != 0 packed, M %
// 128 != 0 tiled), the padding groups of rows whose G % 4 != 0 (K = 128 at
// groups of 128: G = 1), M == 0 (all padding for the packed layout).
TYPED_TEST(ExponentEmitDevice, DirectEmitEqualsRowMajorEmitPlusMaterialize) {
  int cases = 0;
  for (index_t M : {0, 1, 2, 3, 4, 5, 17, 127, 128, 129, 1000})
    for (index_t K : {128, 512, 7168})
      for (int group : {128, 32}) {
        expectDirectEmitEqualsRowMajorPlusMaterialize<TypeParam>(M, K, group, (M + K / group) % 2 == 1);
        ++cases;
      }
  EXPECT_EQ(cases, 11 * 3 * 2);
}

// The kernel whose blocks loop over row tiles (grids above two waves: M =
// 4095 and 4097 at K = 7168), the padding tile reached by a looping block.
TYPED_TEST(ExponentEmitDevice, RowLoopingKernelWritesThePaddingRows) {
  for (index_t M : {4095, 4097})
    for (int group : {128, 32}) expectDirectEmitEqualsRowMajorPlusMaterialize<TypeParam>(M, 7168, group, M == 4097);
}

// SiLU-clamp quant into the packed words (the library's instantiation: the
// fused SiLU of DeepGEMM's SM100 callers) against its row-major emission +
// materialize: the same device arithmetic, so the same bytes (the host
// reference's fast-exp tolerance does not apply).
class ExponentEmitDeviceSilu : public DeviceTest {};

TEST_F(ExponentEmitDeviceSilu, PackedEqualsRowMajorEmitPlusMaterialize) {
  int cases = 0;
  for (index_t M : {0, 1, 3, 5, 17, 128, 129, 1000})
    for (index_t I : {128, 2048})
      for (int group : {128, 32}) {
        const index_t G = I / group;
        SCOPED_TRACE(::testing::Message() << "M=" << M << " I=" << I << " group=" << group);
        const DeviceBuffer<BFloat16> dx =
            onDevice(makeActivations<BFloat16>(M, 2 * I, 2 * I, static_cast<unsigned>(M * 7 + I + group), 8.0f));
        const PackedUe8m0 layout = exponentLayout<PackedUe8m0>(M, G);
        const index_t span = layout.requiredSpan(M, G);
        DeviceBuffer<std::uint8_t> q1(M * I + 16), q2(M * I + 16), relaid(span + 16), direct(span + 16);
        DeviceBuffer<float> rowScales(M * G + 1);
        relaid.poison(0xAB);
        direct.poison(0x5C);
        QuantOptions opt;
        opt.rule = ScaleRule::kUE8M0;
        opt.groupSize = group;
        const SiluClampInput<BFloat16> in{dx.get(), M, I, 2 * I, 7.0f};
        const auto rowView = rowMajorView(rowScales.get(), M, G).value();
        auto r1 = siluClampQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q1.get(), M, I, I}, rowView, opt, nullptr);
        ASSERT_TRUE(r1.isOk()) << r1.status().message();
        const Status m1 = materialize(rowView, packedUe8m0View(relaid.get(), M, G).value(), nullptr);
        ASSERT_TRUE(m1.isOk()) << m1.message();
        auto r2 = siluClampQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q2.get(), M, I, I},
                                         packedUe8m0View(direct.get(), M, G).value(), opt, nullptr);
        ASSERT_TRUE(r2.isOk()) << r2.status().message();
        FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
        const auto a = q1.download(), b = q2.download();
        for (index_t i = 0; i < M * I; ++i) ASSERT_EQ(int{a[i]}, int{b[i]}) << "fp8 byte " << i;
        const auto want = relaid.download(), got = direct.download();
        for (index_t i = 0; i < span; ++i) ASSERT_EQ(int{got[i]}, int{want[i]}) << "byte " << i << " of " << span;
        EXPECT_EQ(got[span], 0x5C) << "written past the span";
        ++cases;
      }
  EXPECT_EQ(cases, 8 * 2 * 2);
}

// The checks that are the exponent layouts' own: the UE8M0 rule, groups of
// 32 or 128; refused before any launch, naming the option.
TEST(ExponentEmitChecks, RuleAndGroupSizeAreRefusedByName) {
  alignas(16) static std::uint8_t bytes[4096];
  alignas(16) static BFloat16 x[4 * 256];
  alignas(16) static std::uint8_t q[4 * 256];
  const auto in = GroupQuantInput<BFloat16>::matrix(x, 4, 256, 256);
  QuantOptions opt;
  opt.groupSize = 128;
  auto r = groupQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q, 4, 256, 256}, packedUe8m0View(bytes, 4, 2).value(), opt, nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(r.status().argument(), "rule");
  opt.rule = ScaleRule::kUE8M0;
  opt.groupSize = 64;
  auto t = groupQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q, 4, 256, 256}, swizzled128x4View(bytes, 4, 4).value(), opt, nullptr);
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupportedGroupSize);
  EXPECT_STREQ(t.status().argument(), "groupSize");
}

}  // namespace
}  // namespace fp8scale::test
