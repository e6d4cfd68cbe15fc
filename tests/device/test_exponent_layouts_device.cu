// The producers writing the UE8M0 exponent layouts themselves (PackedUe8m0
// for DeepGEMM on SM100, Swizzled128x4 for MXFP8 block-scaled MMA) against
// their own row-major emission followed by materialize: the same fp8 bytes
// and the same layout bytes, padding included, over garbage; nothing written
// past the span. Group quant's bytes also equal the host reference's (the
// fused producers' device arithmetic differs from their references' by
// design: their row-major emission is held to them in their own suites). On sm_90 the producer runs
// and the SM100 consumers cannot: the bytes are held to the consumers'
// documented layouts (tests/host/test_exponent_layouts.cpp). CUDA only: the
// library compiles these producers for the NVIDIA consumers alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "fp8scale/allreduce/communicator.hpp"
#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"
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

/// A producer's two outputs: fp8 bytes (M rows of `cols`) and scale bytes.
struct Emitted {
  std::vector<std::uint8_t> q, scale;
};

/// Runs `produce(q, scale)` twice: into row-major fp32 scales, which
/// materialize then lays out in `layout`, and into `layout` directly. Both
/// runs must give the same fp8 bytes and the same layout bytes over the
/// whole span (padding included, over different garbage), and neither may
/// write past the span. Returns the direct run's bytes.
template <class Layout, class Produce>
Emitted expectDirectEqualsRelaid(index_t M, index_t cols, index_t G, const Layout& layout, const Produce& produce) {
  const index_t span = layout.requiredSpan(M, G);
  DeviceBuffer<std::uint8_t> q1(M * cols + 16), q2(M * cols + 16), relaid(span + 16), direct(span + 16);
  DeviceBuffer<float> rowScales(M * G + 1);
  relaid.poison(0xAB);
  direct.poison(0x5C);
  q1.poison(0x11);
  q2.poison(0x22);
  Emitted out;
  const auto rowView = rowMajorView(rowScales.get(), M, G).value();
  const Status r1 = produce(q1.get(), rowView);
  EXPECT_TRUE(r1.isOk()) << r1.message();
  const auto relaidView = ScaleView<std::uint8_t, Layout>::make(relaid.get(), M, G, layout).value();
  const Status m1 = materialize(rowView, relaidView, nullptr);
  EXPECT_TRUE(m1.isOk()) << m1.message();
  const Status r2 = produce(q2.get(), ScaleView<std::uint8_t, Layout>::make(direct.get(), M, G, layout).value());
  EXPECT_TRUE(r2.isOk()) << r2.message();
  const DeviceError synced = runtime::deviceSynchronize();
  EXPECT_EQ(synced, kDeviceSuccess);
  if (!r1 || !m1 || !r2 || synced != kDeviceSuccess) return out;

  const auto a = q1.download();
  out.q = q2.download();
  for (index_t i = 0; i < M * cols; ++i) {
    if (a[i] == out.q[i]) continue;
    ADD_FAILURE() << "fp8 byte " << i << ": " << int{out.q[i]} << " direct, " << int{a[i]} << " row-major";
    break;
  }
  const auto want = relaid.download();
  out.scale = direct.download();
  for (index_t i = 0; i < span; ++i) {
    if (out.scale[i] == want[i]) continue;
    ADD_FAILURE() << "byte " << i << " of " << span << ": " << int{out.scale[i]} << " direct, " << int{want[i]}
                  << " row-major + materialize";
    break;
  }
  EXPECT_EQ(out.scale[span], 0x5C) << "written past the span";
  EXPECT_EQ(want[span], 0xAB) << "materialize wrote past the span";
  out.q.resize(static_cast<std::size_t>(M * cols));
  out.scale.resize(static_cast<std::size_t>(span));
  return out;
}

QuantOptions ue8m0Options(int group) {
  QuantOptions opt;
  opt.rule = ScaleRule::kUE8M0;
  opt.groupSize = group;
  return opt;
}

/// Group quant of bf16 x[M, K] in groups of `group`, UE8M0 rule; the
/// direct bytes also against the host reference's. `evictLast`: the scale
/// stores carry the L2 evict_last policy (the byte store's own instruction).
template <class Layout>
void expectDirectEmitEqualsRowMajorPlusMaterialize(index_t M, index_t K, int group, bool evictLast) {
  const index_t G = K / group;
  SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " group=" << group
                                    << (evictLast ? " evict_last" : ""));
  const auto x = makeActivations<BFloat16>(M, K, K, static_cast<unsigned>(M * 131 + K + group), E4M3FN::kMax);
  const DeviceBuffer<BFloat16> dx = onDevice(x);
  const Layout layout = exponentLayout<Layout>(M, G);
  const auto in = GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K);
  const Emitted got = expectDirectEqualsRelaid(M, K, G, layout, [&](std::uint8_t* q, auto scale) {
    QuantOptions opt = ue8m0Options(group);
    constexpr bool kDirect = std::is_same<decltype(scale), ScaleView<std::uint8_t, Layout>>::value;
    if (kDirect) opt.scaleStore = evictLast ? ScaleStorePolicy::kEvictLast : ScaleStorePolicy::kEvictNormal;
    auto r = groupQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q, M, K, K}, scale, opt, nullptr);
    if (r.isOk()) EXPECT_EQ(r.value().scale.data(), scale.data()) << "the producer's own buffer, no copy";
    return r.status();
  });
  if (::testing::Test::HasFailure() || M > 1000) return;  // the host reference: the contract's rows
  const index_t span = layout.requiredSpan(M, G);
  std::vector<std::uint8_t> q(M * K + 1), hostBuffer(static_cast<std::size_t>(span) + 16, 0x77);
  std::uint8_t* host = hostBuffer.data() + (16 - reinterpret_cast<std::uintptr_t>(hostBuffer.data()) % 16) % 16;
  const Status hs = reference::groupQuant<E4M3FN, ScaleUE8M0>(
      x.data(), M, K, K, group, Fp8Matrix<E4M3FN>{q.data(), M, K, K},
      ScaleView<std::uint8_t, Layout>::make(host, M, G, layout).value());
  ASSERT_TRUE(hs.isOk()) << hs.message();
  for (index_t i = 0; i < M * K; ++i)
    ASSERT_EQ(int{q[i]}, int{got.q[i]}) << "fp8 byte " << i << " vs the host reference";
  for (index_t i = 0; i < span; ++i)
    ASSERT_EQ(int{got.scale[i]}, int{host[i]}) << "byte " << i << " vs the host reference";
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
// fused SiLU of DeepGEMM's SM100 callers).
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
        const SiluClampInput<BFloat16> in{dx.get(), M, I, 2 * I, 7.0f};
        expectDirectEqualsRelaid(M, I, G, exponentLayout<PackedUe8m0>(M, G), [&](std::uint8_t* q, auto scale) {
          return siluClampQuant<E4M3FN>(in, Fp8Matrix<E4M3FN>{q, M, I, I}, scale, ue8m0Options(group), nullptr)
              .status();
        });
        ++cases;
      }
  EXPECT_EQ(cases, 8 * 2 * 2);
}

/// RMSNorm quant's inputs: x[M, K], a residual restored before every run
/// (the producer updates it in place), a weight; normOut written.
struct RmsNormCase {
  RmsNormCase(index_t M, index_t K, unsigned seed)
      : x(onDevice(makeActivations<BFloat16>(M, K, K, seed, 8.0f))),
        residual0(makeActivations<BFloat16>(M, K, K, seed + 1, 2.0f)),
        residual(residual0.size() + 8), weight(static_cast<std::size_t>(K) + 8), normOut(M * K + 8) {
    std::vector<BFloat16> w(static_cast<std::size_t>(K) + 8);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = fromF<BFloat16>(0.5f + static_cast<float>(k % 17) / 16.0f);
    weight.upload(w);
    in = RmsNormQuantInput<BFloat16>::matrix(x.get(), M, K, K, weight.get())
             .withResidual(residual.get(), K)
             .withNormOut(normOut.get(), K);
  }
  /// The residual as every run starts from it.
  void restoreResidual() {
    std::vector<BFloat16> r = residual0;
    r.resize(residual0.size() + 8, fromF<BFloat16>(0.0f));
    residual.upload(r);
  }
  DeviceBuffer<BFloat16> x;
  std::vector<BFloat16> residual0;
  DeviceBuffer<BFloat16> residual, weight, normOut;
  RmsNormQuantInput<BFloat16> in;
};

template <class Layout>
class ExponentEmitDeviceRmsNorm : public DeviceTest {};
TYPED_TEST_SUITE(ExponentEmitDeviceRmsNorm, ExponentLayoutTypes);

// RMSNorm quant into both exponent layouts, each of its kernels: the block
// per row (K <= 8192), the large-M staged kernel (M past kRowsMinRows) and
// the long rows (K = 16384), with the padding block of each.
TYPED_TEST(ExponentEmitDeviceRmsNorm, DirectEmitEqualsRowMajorEmitPlusMaterialize) {
  constexpr index_t kLargeM = RmsNormPolicy<BFloat16>::kRowsMinRows + 3;
  int cases = 0;
  for (index_t M : {index_t{0}, index_t{1}, index_t{2}, index_t{3}, index_t{4}, index_t{5}, index_t{17},
                    index_t{127}, index_t{128}, index_t{129}, index_t{1000}, kLargeM})
    for (index_t K : {128, 512, 7168, 16384}) {
      if (K == 16384 && M > 129) continue;
      for (int group : {128, 32}) {
        const index_t G = K / group;
        SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " group=" << group);
        RmsNormCase c(M, K, static_cast<unsigned>(M * 3 + K + group));
        expectDirectEqualsRelaid(M, K, G, exponentLayout<TypeParam>(M, G), [&](std::uint8_t* q, auto scale) {
          c.restoreResidual();
          return rmsNormQuant<E4M3FN>(c.in, Fp8Matrix<E4M3FN>{q, M, K, K}, scale, ue8m0Options(group), nullptr)
              .status();
        });
        ++cases;
      }
    }
  EXPECT_EQ(cases, 12 * 3 * 2 + 10 * 2);
}

// The fused allreduce + RMSNorm quant into both exponent layouts: the
// custom path's one-stage and two-stage kernels (two simulated ranks on
// this GPU, rank 0's outputs compared; no residual: each rank would update
// its own) and the fallback's gathered step (two partials, one call).
TYPED_TEST(ExponentEmitDeviceRmsNorm, FusedAllreduceEqualsRowMajorEmitPlusMaterialize) {
  constexpr int kWorld = 2;
  AllreduceOptions options;
  options.bufferBytes = std::size_t{16} << 20;
  auto created = SimulatedAllreduceGroup::create(kWorld, options);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  Stream streams[kWorld] = {};
  for (auto& s : streams) ASSERT_EQ(runtime::streamCreate(&s, true), kDeviceSuccess);
  int cases = 0;
  for (index_t M : {0, 1, 3, 5, 17, 128, 129, 1000})
    for (index_t K : {2048, 7168})
      for (int groupSize : {128, 32}) {
        const index_t G = K / groupSize;
        RmsNormCase c(M, K, static_cast<unsigned>(M * 5 + K + groupSize));
        c.in.residual = nullptr;  // each rank would update its own
        c.in.normOut = nullptr;   // and write its own
        // Rank p's partial: x scaled by p + 1, in its staging buffer and at
        // rank stride M * K in the gathered [W][M][K].
        std::vector<BFloat16> partials;
        const auto x = makeActivations<BFloat16>(M, K, K, static_cast<unsigned>(M * 5 + K + groupSize), 8.0f);
        for (int p = 0; p < kWorld; ++p) {
          std::vector<BFloat16> part(x.size());
          for (std::size_t i = 0; i < x.size(); ++i) part[i] = fromF<BFloat16>(toFloat(x[i]) * static_cast<float>(p + 1));
          partials.insert(partials.end(), part.begin(), part.end());
          if (M > 0)
            ASSERT_EQ(runtime::memcpy(group[p].stagingBuffer(), part.data(), part.size() * sizeof(BFloat16),
                                      runtime::Copy::HostToDevice),
                      kDeviceSuccess);
        }
        const DeviceBuffer<BFloat16> gathered = onDevice(partials);
        // Rank 1's outputs, which are not compared: room for either run's scales.
        const index_t span = exponentLayout<TypeParam>(M, G).requiredSpan(M, G);
        DeviceBuffer<std::uint8_t> otherQ(M * K + 16), otherScale(std::max(span, M * G * 4) + 16);
        for (const char* path : {"one-stage", "two-stage", "gathered"}) {
          SCOPED_TRACE(::testing::Message() << path << " M=" << M << " K=" << K << " group=" << groupSize);
          const bool isGathered = path[0] == 'g';
          const AllreduceAlgorithm algo = path[1] == 'n' ? AllreduceAlgorithm::kOneStage : AllreduceAlgorithm::kTwoStage;
          expectDirectEqualsRelaid(M, K, G, exponentLayout<TypeParam>(M, G), [&](std::uint8_t* q, auto scale) {
            const QuantOptions opt = ue8m0Options(groupSize);
            RmsNormQuantInput<BFloat16> in = c.in;
            if (isGathered) {
              in.x = gathered.get();
              return gatheredRmsNormQuant<E4M3FN>(in, kWorld, M * K, static_cast<BFloat16*>(nullptr),
                                                  Fp8Matrix<E4M3FN>{q, M, K, K}, scale, opt, nullptr)
                  .status();
            }
            using View = decltype(scale);
            Status first;
            for (int p = 0; p < kWorld; ++p) {
              in.x = static_cast<const BFloat16*>(group[p].stagingBuffer());
              const Fp8Matrix<E4M3FN> rankQ{p == 0 ? q : otherQ.get(), M, K, K};
              const View rankScale =
                  p == 0 ? scale
                         : View::fromValidated(reinterpret_cast<typename View::element_type*>(otherScale.get()), M, G,
                                               scale.layout());
              const Status st = allreduceRmsNormQuant<E4M3FN>(group[p], in, rankQ, rankScale, opt, streams[p], algo)
                                    .status();
              if (!st && first) first = st;
            }
            for (auto& s : streams) EXPECT_EQ(runtime::streamSynchronize(s), kDeviceSuccess);
            if (Status err = group.checkErrors(streams[0]); !err && first) first = err;
            return first;
          });
          ++cases;
        }
      }
  for (auto& s : streams) (void)runtime::streamDestroy(s);
  EXPECT_EQ(cases, 8 * 2 * 2 * 3);
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
