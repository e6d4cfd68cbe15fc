// Scale rules: fp32 (amax / fmax) and UE8M0 (rounded up to a power of two on
// the bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "fp8scale/scale_math.hpp"

namespace fp8scale {
namespace {

std::uint32_t bits(float v) { return bitCast<std::uint32_t>(v); }

TEST(UE8M0, ExactPowersOfTwoMapToThemselves) {
  for (int e = -126; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    EXPECT_EQ(bits(ue8m0RoundUp(p)), bits(p)) << "2^" << e;
    EXPECT_EQ(ue8m0Exponent(p), e + 127);
  }
}

TEST(UE8M0, ValuesJustAboveAPowerOfTwoRoundUp) {
  for (int e = -126; e <= 126; ++e) {
    const float p = std::ldexp(1.0f, e);
    const float above = std::nextafter(p, 1e38f);
    EXPECT_EQ(ue8m0RoundUp(above), 2.0f * p) << "just above 2^" << e;
    EXPECT_EQ(ue8m0RoundUp(1.5f * p), 2.0f * p);
    // Just below the next power of two also lands on it.
    EXPECT_EQ(ue8m0RoundUp(std::nextafter(2.0f * p, 0.0f)), 2.0f * p);
  }
}

TEST(UE8M0, SubnormalRangeClampsTo2ToTheMinus126) {
  const float minNormal = std::numeric_limits<float>::min();  // 2^-126
  EXPECT_EQ(ue8m0RoundUp(std::numeric_limits<float>::denorm_min()), minNormal);
  EXPECT_EQ(ue8m0RoundUp(std::ldexp(1.0f, -130)), minNormal);
  EXPECT_EQ(ue8m0RoundUp(std::nextafter(minNormal, 0.0f)), minNormal);
  EXPECT_EQ(ue8m0RoundUp(0.0f), minNormal);
  EXPECT_EQ(ue8m0Exponent(0.0f), 1);
}

TEST(UE8M0, TopOfTheRangeClampsTo2To127) {
  const float top = std::ldexp(1.0f, 127);
  EXPECT_EQ(ue8m0RoundUp(std::nextafter(top, 0.0f)), top);
  EXPECT_EQ(ue8m0RoundUp(std::numeric_limits<float>::max()), top);
  EXPECT_EQ(ue8m0RoundUp(std::numeric_limits<float>::infinity()), top);
  EXPECT_EQ(ue8m0Exponent(std::numeric_limits<float>::max()), 254);
}

TEST(UE8M0, NoOutputEverHasMantissaBitsAndNoneIsBelowItsInput) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const float s = bitCast<float>(static_cast<std::uint32_t>(rng()) & 0x7F7FFFFFu);  // positive, finite
    const float r = ue8m0RoundUp(s);
    ASSERT_EQ(bits(r) & 0x007FFFFFu, 0u) << s;
    if (s > std::ldexp(1.0f, 127)) {
      ASSERT_EQ(r, std::ldexp(1.0f, 127)) << "clamped at the top exponent";
      continue;
    }
    ASSERT_GE(r, s);
    if (s >= std::numeric_limits<float>::min()) {
      ASSERT_LT(r, 2.0f * s) << "rounds up by less than 2x";
    }
  }
}

TEST(ScaleFromAmax, Fp32RuleIsIeeeDivisionWithEpsFloor) {
  EXPECT_EQ(scaleFromAmax<ScaleFp32>(448.0f, 448.0f, kDefaultAmaxEps), 1.0f);
  EXPECT_EQ(bits(scaleFromAmax<ScaleFp32>(3.0f, 448.0f, kDefaultAmaxEps)), bits(3.0f / 448.0f));
  EXPECT_EQ(bits(scaleFromAmax<ScaleFp32>(0.0f, 448.0f, kDefaultAmaxEps)), bits(kDefaultAmaxEps / 448.0f));
  EXPECT_EQ(bits(scaleFromAmax<ScaleFp32>(1.0f, 224.0f, kDefaultAmaxEps)), bits(1.0f / 224.0f));
}

TEST(ScaleFromAmax, UE8M0RuleRoundsTheFp32ScaleUp) {
  // 3 / 448 = 0.0066964... -> 2^-7 = 0.0078125
  EXPECT_EQ(scaleFromAmax<ScaleUE8M0>(3.0f, 448.0f, kDefaultAmaxEps), std::ldexp(1.0f, -7));
  // 448 * 2^k / 448 is exact: stays.
  EXPECT_EQ(scaleFromAmax<ScaleUE8M0>(448.0f * 8.0f, 448.0f, kDefaultAmaxEps), 8.0f);
  // With UE8M0 the scaled amax never exceeds fmax.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(1e-6f, 1e6f);
  for (int i = 0; i < 100000; ++i) {
    const float amax = d(rng);
    const float s = scaleFromAmax<ScaleUE8M0>(amax, 448.0f, kDefaultAmaxEps);
    ASSERT_LE(amax * inverseScale(s), 448.0f);
  }
}

TEST(Amax, NaNIsIgnored) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float a = 0.0f;
  for (float v : {1.0f, nan, -3.0f, nan}) a = amaxStep(a, v);
  EXPECT_EQ(a, 3.0f);
  EXPECT_EQ(amaxStep(0.0f, -std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace fp8scale
