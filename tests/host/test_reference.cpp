// The host reference group quant (the executable specification): hand-checked
// values, layout equivalence, special values, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "fp8scale/reference/group_quant.hpp"

namespace fp8scale {
namespace {

using reference::groupQuant;

TEST(ReferenceGroupQuant, HandCheckedUE8M0Group) {
  // One group of 128: v_i = i - 64, amax 64. s = 64 / 448 rounded up to a power
  // of two = 0.25, so v * inv = 4 v: -64 -> -256 (0xF8), 63 -> 252 -> 256 (0x78),
  // 1 -> 4 (0x48), 0 -> 0.
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>(i - 64);
  std::vector<std::uint8_t> q(128);
  float s = -1.0f;
  auto status = groupQuant<E4M3FN, ScaleUE8M0>(x.data(), 1, 128, 128, 128, Fp8Matrix<E4M3FN>{q.data(), 1, 128, 128},
                                               rowMajorView(&s, 1, 1).value());
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(s, 0.25f);
  EXPECT_EQ(q[0], 0xF8);
  EXPECT_EQ(q[127], 0x78);
  EXPECT_EQ(q[65], 0x48);
  EXPECT_EQ(q[64], 0x00);
}

TEST(ReferenceGroupQuant, HandCheckedFp32Group) {
  // amax 448 -> s = 1 exactly: q is the plain conversion of x.
  std::vector<float> x(128, 0.0f);
  x[0] = 448.0f;
  x[1] = -1.0f;
  x[2] = 3.3f;
  std::vector<std::uint8_t> q(128);
  float s = 0.0f;
  ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(x.data(), 1, 128, 128, 128, Fp8Matrix<E4M3FN>{q.data(), 1, 128, 128},
                                             rowMajorView(&s, 1, 1).value())));
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q[0], 0x7E);
  EXPECT_EQ(q[1], 0xB8);
  EXPECT_EQ(q[2], 0x45) << "3.3 -> 3.25 (1.625 * 2)";
}

std::vector<float> activationLike(index_t M, index_t K, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(M * K);
  for (auto& v : x) v = n(rng);
  for (index_t m = 0; m < M; ++m) x[m * K + (7 % K)] *= 300.0f;  // an outlier channel
  return x;
}

TEST(ReferenceGroupQuant, ColumnMajorScalesEqualRowMajorScalesAndPaddingIsZeroed) {
  for (index_t M : {1, 2, 3, 17}) {
    const index_t K = 512, G = K / 128, ld = alignUp(M, 4);
    const auto x = activationLike(M, K, 3);
    std::vector<std::uint8_t> q1(M * K), q2(M * K);
    std::vector<float> sr(M * G), sc(G * ld, 12345.0f);
    ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, 128, Fp8Matrix<E4M3FN>{q1.data(), M, K, K},
                                               rowMajorView(sr.data(), M, G).value())));
    auto cm = colMajorView(sc.data(), M, G, ld).value();
    ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, 128, Fp8Matrix<E4M3FN>{q2.data(), M, K, K}, cm)));
    EXPECT_EQ(q1, q2);
    for (index_t m = 0; m < M; ++m)
      for (index_t g = 0; g < G; ++g) ASSERT_EQ(cm(m, g), sr[m * G + g]);
    for (index_t g = 0; g < G; ++g)
      for (index_t m = M; m < ld; ++m) ASSERT_EQ(sc[g * ld + m], 0.0f);
  }
}

TEST(ReferenceGroupQuant, ZeroGroupNaNAndInfinityFollowTheSpecification) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(3 * 32, 0.0f);
  // row 0: zeros; row 1: a NaN among values with amax 2; row 2: an infinity.
  x[32 + 0] = nan;
  x[32 + 1] = -2.0f;
  x[32 + 2] = 1.0f;
  x[64 + 0] = inf;
  x[64 + 1] = 5.0f;
  std::vector<std::uint8_t> q(3 * 32, 0xAA);
  std::vector<float> s(3);
  ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(x.data(), 3, 32, 32, 32, Fp8Matrix<E4M3FN>{q.data(), 3, 32, 32},
                                             rowMajorView(s.data(), 3, 1).value())));
  EXPECT_EQ(s[0], kDefaultAmaxEps / 448.0f) << "amax floored at eps";
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[i], 0x00);
  EXPECT_EQ(s[1], 2.0f / 448.0f) << "NaN ignored in amax";
  EXPECT_EQ(q[32] & 0x7F, 0x7F) << "NaN stays NaN";
  EXPECT_EQ(q[33], 0xFE) << "-2 * inv = -448 (max)";
  // inf: s = inf, inv = 0, inf * 0 = NaN, finite * 0 = 0.
  EXPECT_EQ(s[2], inf);
  EXPECT_EQ(q[64] & 0x7F, 0x7F);
  EXPECT_EQ(q[65], 0x00);
}

TEST(ReferenceGroupQuant, Bf16InputEqualsItsWidenedFp32Input) {
  const index_t M = 5, K = 256;
  auto xf = activationLike(M, K, 5);
  std::vector<BFloat16> xb(M * K);
  for (index_t i = 0; i < M * K; ++i) {
    xb[i] = toBFloat16(xf[i]);
    xf[i] = toFloat(xb[i]);
  }
  std::vector<std::uint8_t> qa(M * K), qb(M * K);
  std::vector<float> sa(M * 4), sb(M * 4);
  ASSERT_TRUE((groupQuant<E4M3FNUZ, ScaleUE8M0>(xf.data(), M, K, K, 64, Fp8Matrix<E4M3FNUZ>{qa.data(), M, K, K},
                                                rowMajorView(sa.data(), M, 4).value())));
  ASSERT_TRUE((groupQuant<E4M3FNUZ, ScaleUE8M0>(xb.data(), M, K, K, 64, Fp8Matrix<E4M3FNUZ>{qb.data(), M, K, K},
                                                rowMajorView(sb.data(), M, 4).value())));
  EXPECT_EQ(qa, qb);
  EXPECT_EQ(sa, sb);
}

TEST(ReferenceGroupQuant, CustomFmaxBoundsTheQuantizedValues) {
  const index_t M = 4, K = 128;
  const auto x = activationLike(M, K, 9);
  std::vector<std::uint8_t> q(M * K);
  std::vector<float> s(M);
  ASSERT_TRUE((groupQuant<E4M3FNUZ, ScaleFp32>(x.data(), M, K, K, 128, Fp8Matrix<E4M3FNUZ>{q.data(), M, K, K},
                                               rowMajorView(s.data(), M, 1).value(), 224.0f)));
  float qmax = 0.0f;
  for (auto b : q) qmax = std::fmax(qmax, std::fabs(decode<E4M3FNUZ>(b)));
  EXPECT_EQ(qmax, 224.0f) << "the amax element lands on fmax = 224, nothing above it";
}

TEST(ReferenceGroupQuant, RowStridesAreHonoured) {
  const index_t M = 3, K = 128, ldx = 200, ldq = 160;
  auto x = activationLike(M, ldx, 4);
  std::vector<std::uint8_t> q(M * ldq, 0xCC), qTight(M * K);
  std::vector<float> s(M), sTight(M);
  std::vector<float> tight(M * K);
  for (index_t m = 0; m < M; ++m)
    for (index_t k = 0; k < K; ++k) tight[m * K + k] = x[m * ldx + k];
  ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, ldx, 128, Fp8Matrix<E4M3FN>{q.data(), M, K, ldq},
                                             rowMajorView(s.data(), M, 1).value())));
  ASSERT_TRUE((groupQuant<E4M3FN, ScaleFp32>(tight.data(), M, K, K, 128, Fp8Matrix<E4M3FN>{qTight.data(), M, K, K},
                                             rowMajorView(sTight.data(), M, 1).value())));
  EXPECT_EQ(s, sTight);
  for (index_t m = 0; m < M; ++m) {
    for (index_t k = 0; k < K; ++k) ASSERT_EQ(q[m * ldq + k], qTight[m * K + k]);
    for (index_t k = K; k < ldq; ++k) ASSERT_EQ(q[m * ldq + k], 0xCC) << "wrote past K in the row gap";
  }
}

TEST(ReferenceGroupQuant, ArgumentErrorsNameTheArgument) {
  std::vector<float> x(4 * 256);
  std::vector<std::uint8_t> q(4 * 256);
  std::vector<float> s(4 * 2);
  Fp8Matrix<E4M3FN> qm{q.data(), 4, 256, 256};
  auto sv = rowMajorView(s.data(), 4, 2).value();
  auto run = [&](const float* xp, index_t M, index_t K, index_t ldx, int gs, Fp8Matrix<E4M3FN> qq, auto scale) {
    return groupQuant<E4M3FN, ScaleFp32>(xp, M, K, ldx, gs, qq, scale);
  };
  auto st = run(x.data(), 4, 200, 256, 128, Fp8Matrix<E4M3FN>{q.data(), 4, 200, 256}, sv);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "K");
  st = run(x.data(), 4, 256, 256, 96, qm, sv);
  EXPECT_EQ(st.code(), StatusCode::kUnsupportedGroupSize);
  EXPECT_STREQ(st.argument(), "groupSize");
  st = run(x.data(), 4, 256, 128, 128, qm, sv);
  EXPECT_EQ(st.code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(st.argument(), "ldx");
  st = run(x.data(), 4, 256, 256, 128, Fp8Matrix<E4M3FN>{q.data(), 4, 256, 100}, sv);
  EXPECT_STREQ(st.argument(), "ldq");
  st = run(x.data(), 4, 256, 256, 64, qm, sv);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "scale") << "G = 4 for group 64, the view has 2";
  st = run(nullptr, 4, 256, 256, 128, qm, sv);
  EXPECT_EQ(st.code(), StatusCode::kNullPointer);
  EXPECT_STREQ(st.argument(), "x");
  st = run(x.data(), 4, 256, 256, 128, Fp8Matrix<E4M3FN>{nullptr, 4, 256, 256}, sv);
  EXPECT_STREQ(st.argument(), "q");
  st = run(x.data(), -1, 256, 256, 128, Fp8Matrix<E4M3FN>{q.data(), -1, 256, 256}, sv);
  EXPECT_STREQ(st.argument(), "M");
  // M == 0 is valid, null pointers included.
  st = run(nullptr, 0, 256, 256, 128, Fp8Matrix<E4M3FN>{nullptr, 0, 256, 256},
           rowMajorView<float>(nullptr, 0, 2).value());
  EXPECT_TRUE(st.isOk()) << st.message();
}

}  // namespace
}  // namespace fp8scale
