// The fused producers' host references: hand-checked values of the fused
// semantics (clamp, SiLU, residual, RMSNorm) before the shared group step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fp8scale/reference/fused_quant.hpp"

namespace fp8scale {
namespace {

TEST(SiluClampReference, ClampsGateFromAboveAndUpBothWays) {
  EXPECT_EQ(siluClamp(10.0f, 1.0f, 7.0f), 7.0f / (1.0f + std::exp(-7.0f)));
  EXPECT_EQ(siluClamp(-10.0f, 1.0f, 7.0f), -10.0f / (1.0f + std::exp(10.0f))) << "gate is clamped from above only";
  EXPECT_EQ(siluClamp(1.0f, 9.0f, 7.0f), 7.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_EQ(siluClamp(1.0f, -9.0f, 7.0f), -7.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_EQ(siluClamp(10.0f, 9.0f, 0.0f), 10.0f / (1.0f + std::exp(-10.0f)) * 9.0f) << "limit <= 0: no clamp";
  EXPECT_EQ(siluClamp(10.0f, 9.0f, -1.0f), 10.0f / (1.0f + std::exp(-10.0f)) * 9.0f);
}

// The clamp keeps NaN (torch.clamp does): an earlier fmin/fmax clamp turned
// a NaN gate into `limit` and a NaN up into -limit, hiding a broken
// activation behind finite values. Infinities clamp to the limit.
TEST(SiluClampReference, ClampKeepsNaNAndClampsInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(siluClamp(nan, 1.0f, 7.0f)));
  EXPECT_TRUE(std::isnan(siluClamp(1.0f, nan, 7.0f)));
  EXPECT_TRUE(std::isnan(siluClamp(nan, 1.0f, 0.0f)));
  EXPECT_EQ(siluClamp(inf, 1.0f, 7.0f), 7.0f / (1.0f + std::exp(-7.0f)));
  EXPECT_EQ(siluClamp(1.0f, -inf, 7.0f), -7.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_TRUE(std::isnan(siluClamp(-inf, 1.0f, 7.0f))) << "silu(-inf) = -inf / (1 + inf): NaN, as -inf * sigmoid(-inf) is in PyTorch";
}

TEST(SiluClampReference, QuantizesTheFp32ProductNotABf16Rounding) {
  // gate = 2, up = 1.01 in every column: a = silu(2) * 1.01, one group of 32.
  const index_t I = 32;
  std::vector<float> x(2 * I);
  for (index_t i = 0; i < I; ++i) {
    x[i] = 2.0f;
    x[I + i] = 1.01f;
  }
  std::vector<std::uint8_t> q(I);
  float s = 0.0f;
  ASSERT_TRUE((reference::siluClampQuant<E4M3FN, ScaleFp32>(SiluClampInput<float>{x.data(), 1, I, 2 * I, 0.0f},
                                                            Fp8Matrix<E4M3FN>{q.data(), 1, I, I},
                                                            rowMajorView(&s, 1, 1).value(), 32)));
  const float a = 2.0f / (1.0f + std::exp(-2.0f)) * 1.01f;
  EXPECT_EQ(s, a / 448.0f);
  for (auto b : q) EXPECT_EQ(b, 0x7E) << "every value equals amax: lands on 448";
}

TEST(RmsNormReference, ResidualIsUpdatedAndTheNormUsesTheFp32Sum) {
  // x = 1, r = 2 everywhere: h = 3, mean(h^2) = 9, y = 3 / sqrt(9 + eps) * w.
  const index_t K = 64;
  std::vector<BFloat16> x(K, toBFloat16(1.0f)), r(K, toBFloat16(2.0f)), w(K, toBFloat16(0.5f)), y(K);
  std::vector<std::uint8_t> q(K);
  float s = 0.0f;
  auto in = RmsNormQuantInput<BFloat16>::matrix(x.data(), 1, K, K, w.data())
                .withResidual(r.data(), K)
                .withNormOut(y.data(), K);
  in.normEps = 0.0f;
  ASSERT_TRUE((reference::rmsNormQuant<E4M3FN, ScaleUE8M0>(in, Fp8Matrix<E4M3FN>{q.data(), 1, K, K},
                                                           rowMajorView(&s, 1, 1).value(), 64)));
  EXPECT_EQ(toFloat(r[0]), 3.0f) << "residual_out = x + r";
  EXPECT_EQ(toFloat(y[0]), 0.5f) << "3 / 3 * 0.5";
  EXPECT_EQ(s, std::ldexp(1.0f, -9)) << "0.5 / 448 rounded up to a power of two";
  EXPECT_EQ(decode<E4M3FN>(q[0]), 256.0f) << "0.5 * 2^9";
}

TEST(RmsNormReference, InputFactoryFillsEveryFieldAndLeavesTheOriginal) {
  std::vector<BFloat16> x(8), r(8), w(4), y(8);
  const auto base = RmsNormQuantInput<BFloat16>::matrix(x.data(), 2, 4, 4, w.data());
  EXPECT_EQ(base.x, x.data());
  EXPECT_EQ(base.rows, 2);
  EXPECT_EQ(base.cols, 4);
  EXPECT_EQ(base.ldx, 4);
  EXPECT_EQ(base.weight, w.data());
  EXPECT_EQ(base.residual, nullptr);
  EXPECT_EQ(base.normOut, nullptr);
  EXPECT_EQ(base.normEps, 1e-6f);
  const auto full = base.withResidual(r.data(), 6).withNormOut(y.data(), 5);
  EXPECT_EQ(full.residual, r.data());
  EXPECT_EQ(full.ldResidual, 6);
  EXPECT_EQ(full.normOut, y.data());
  EXPECT_EQ(full.ldNormOut, 5);
  EXPECT_EQ(full.x, x.data());
  EXPECT_EQ(full.weight, w.data());
  EXPECT_EQ(base.residual, nullptr) << "withResidual returns a copy";
  EXPECT_EQ(base.normOut, nullptr) << "withNormOut returns a copy";
}

TEST(RmsNormReference, RefusesAMissingWeightByName) {
  std::vector<float> x(128), w(128);
  std::vector<std::uint8_t> q(128);
  float s;
  RmsNormQuantInput<float> in;
  in.x = x.data();
  in.rows = 1;
  in.cols = 128;
  in.ldx = 128;
  const Status st = reference::rmsNormQuant<E4M3FN, ScaleFp32>(in, Fp8Matrix<E4M3FN>{q.data(), 1, 128, 128},
                                                               rowMajorView(&s, 1, 1).value(), 128);
  EXPECT_EQ(st.code(), StatusCode::kNullPointer);
  EXPECT_STREQ(st.argument(), "weight");
}

}  // namespace
}  // namespace fp8scale
