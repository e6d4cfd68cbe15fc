// QuantOptions::scaleStore: the L2 policy of the scale stores changes where
// the lines live, never the bits. Each producer, forced to every policy, keeps
// the TRANSPOSE_SCALE contract (checkTransposeContract: garbage-filled
// outputs, padding zeroed, strides (1, ld)) and writes the same fp8 bytes and
// scales as with the others; the shapes take every kernel the launchers pick
// for K = 7168 (small-grid, block-per-tile and looping group tiles; RMSNorm's
// block per row and its large-M kernel).
#include <gtest/gtest.h>

#include <vector>

#include "producer_harness.cuh"

namespace fp8scale::test {
namespace {

constexpr ScaleStorePolicy kPolicies[] = {ScaleStorePolicy::kEvictNormal, ScaleStorePolicy::kEvictLast};
constexpr const char* kPolicyNames[] = {"evict_normal", "evict_last"};

/// Runs `contract(opt)` (a checkTransposeContract call) under each policy and
/// expects the same fp8 bytes and scale bits from both.
template <class Contract>
void expectSameOutputUnderEveryPolicy(const Contract& contract) {
  ContractOutput first;
  for (int p = 0; p < 2; ++p) {
    SCOPED_TRACE(kPolicyNames[p]);
    QuantOptions opt;
    opt.scaleStore = kPolicies[p];
    const ContractOutput got = contract(opt);
    ASSERT_FALSE(got.q.empty());
    if (p == 0) {
      first = got;
      continue;
    }
    EXPECT_EQ(got.q, first.q) << "fp8 data depends on the scale store policy";
    EXPECT_EQ(countBitDiffs(got.rowMajorScale, first.rowMajorScale), 0u) << "scales depend on the policy";
  }
}

class ScaleStoreDevice : public DeviceTest {};

TEST_F(ScaleStoreDevice, GroupQuantGivesTheSameBitsUnderEveryPolicy) {
  const index_t K = 7168;
  for (index_t M : {1, 17, 1000, 4096}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const auto x = makeActivations<BFloat16>(M, K, K, static_cast<unsigned>(M), E4M3FN::kMax);
    DeviceBuffer<BFloat16> dx(M * K);
    dx.upload(x);
    const auto in = GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K);
    expectSameOutputUnderEveryPolicy([&](const QuantOptions& opt) {
      return checkTransposeContract<E4M3FN>(M, K, 128, contractLd(M), [&](auto q, auto scale) {
        return groupQuant<E4M3FN>(in, q, scale, opt, nullptr);
      });
    });
  }
}

TEST_F(ScaleStoreDevice, SiluClampQuantGivesTheSameBitsUnderEveryPolicy) {
  const index_t I = 2048;
  for (index_t M : {1, 17, 1000}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const auto x = makeActivations<BFloat16>(M, 2 * I, 2 * I, static_cast<unsigned>(M + 5), 8.0f);
    DeviceBuffer<BFloat16> dx(x.size());
    dx.upload(x);
    const SiluClampInput<BFloat16> in{dx.get(), M, I, 2 * I, 7.0f};
    expectSameOutputUnderEveryPolicy([&](const QuantOptions& opt) {
      return checkTransposeContract<E4M3FN>(M, I, 128, contractLd(M), [&](auto q, auto scale) {
        return siluClampQuant<E4M3FN>(in, q, scale, opt, nullptr);
      });
    });
  }
}

// No residual: the input is not updated in place, so every call sees the same
// x (the residual path writes the same scales through the same stores).
TEST_F(ScaleStoreDevice, RmsNormQuantGivesTheSameBitsUnderEveryPolicy) {
  const index_t K = 7168;
  for (index_t M : {index_t{1}, index_t{17}, RmsNormPolicy<BFloat16>::kRowsMinRows + 3}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const auto x = makeActivations<BFloat16>(M, K, K, static_cast<unsigned>(M + 9), 8.0f);
    std::vector<BFloat16> w(K, fromF<BFloat16>(0.875f));
    DeviceBuffer<BFloat16> dx(M * K), dw(K);
    dx.upload(x);
    dw.upload(w);
    const RmsNormQuantInput<BFloat16> in{dx.get(), M, K, K, /*residual=*/nullptr, 0, dw.get()};
    expectSameOutputUnderEveryPolicy([&](const QuantOptions& opt) {
      return checkTransposeContract<E4M3FN>(M, K, 128, contractLd(M), [&](auto q, auto scale) {
        return rmsNormQuant<E4M3FN>(in, q, scale, opt, nullptr);
      });
    });
  }
}

}  // namespace
}  // namespace fp8scale::test
