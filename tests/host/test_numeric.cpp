// The 16-bit input types: widening is exact, narrowing rounds to nearest even.
// fp16 narrowing is checked against the compiler's own _Float16 conversion
// (an independent implementation) over every fp16 value, every midpoint and a
// seeded spread of fp32 inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "fp8scale/numeric.hpp"

namespace fp8scale {
namespace {

std::uint16_t compilerHalf(float v) {
  const _Float16 h = static_cast<_Float16>(v);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

bool sameHalf(std::uint16_t a, std::uint16_t b) {
  const bool aNaN = (a & 0x7C00) == 0x7C00 && (a & 0x3FF);
  const bool bNaN = (b & 0x7C00) == 0x7C00 && (b & 0x3FF);
  return aNaN || bNaN ? aNaN && bNaN : a == b;
}

TEST(Float16, WideningIsExactForEveryPattern) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    const float want = static_cast<float>(h);
    const float got = toFloat(Float16{bits});
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(bitCast<std::uint32_t>(got), bitCast<std::uint32_t>(want)) << std::hex << b;
    }
  }
}

TEST(Float16, NarrowingMatchesTheCompilerAtEveryValueAndMidpoint) {
  int checked = 0;
  for (std::uint32_t b = 0; b < 0x7C00; ++b) {
    for (std::uint32_t sign : {0u, 0x8000u}) {
      const float v = toFloat(Float16{static_cast<std::uint16_t>(b | sign)});
      const float next = toFloat(Float16{static_cast<std::uint16_t>((b + 1) | sign)});
      for (float x : {v, 0.5f * (v + next), std::nextafter(0.5f * (v + next), 0.0f),
                      std::nextafter(0.5f * (v + next), 1e30f * (sign ? -1.0f : 1.0f))}) {
        ASSERT_TRUE(sameHalf(toFloat16(x).bits, compilerHalf(x))) << x;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200000);
}

// The NaN bits are the library's own rule, which the compiler's conversion
// does not share (it quiets a signalling NaN and keeps a payload): the device
// kernels reproduce these bits (detail/vec.hpp), so they are held here.
TEST(Float16, NaNBitsFollowTheHostRule) {
  // Widening keeps the payload in place, quiet bit as it was.
  EXPECT_EQ(bitCast<std::uint32_t>(toFloat(Float16{0x7C01})), 0x7F802000u) << "signalling NaN stays signalling";
  EXPECT_EQ(bitCast<std::uint32_t>(toFloat(Float16{0xFE00})), 0xFFC00000u);
  EXPECT_EQ(bitCast<std::uint32_t>(toFloat(Float16{0x7FFF})), 0x7FFFE000u);
  EXPECT_EQ(bitCast<std::uint32_t>(toFloat(Float16{0x7C00})), 0x7F800000u);
  EXPECT_EQ(bitCast<std::uint32_t>(toFloat(Float16{0x8001})), 0xB3800000u) << "-2^-24";
  // Narrowing gives every NaN sign | 0x7E00.
  EXPECT_EQ(toFloat16(bitCast<float>(0x7F800001u)).bits, 0x7E00);
  EXPECT_EQ(toFloat16(bitCast<float>(0xFFFFFFFFu)).bits, 0xFE00);
  EXPECT_EQ(toFloat16(bitCast<float>(0x7FC00000u)).bits, 0x7E00);
  // The edges of the integer and fp32-add paths.
  EXPECT_EQ(toFloat16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(toFloat16(bitCast<float>(0x477FEFFFu)).bits, 0x7BFF) << "just below 65520 rounds down";
  EXPECT_EQ(toFloat16(65520.0f).bits, 0x7C00) << "the tie above 65504 rounds to inf";
  EXPECT_EQ(toFloat16(bitCast<float>(0x38800000u)).bits, 0x0400) << "2^-14, the smallest normal";
  EXPECT_EQ(toFloat16(bitCast<float>(0x387FFFFFu)).bits, 0x0400) << "just below rounds up to it";
  EXPECT_EQ(toFloat16(bitCast<float>(0x33000000u)).bits, 0x0000) << "2^-25 ties to even (0)";
  EXPECT_EQ(toFloat16(bitCast<float>(0x33000001u)).bits, 0x0001);
  EXPECT_EQ(toFloat16(bitCast<float>(0x33C00000u)).bits, 0x0002) << "1.5 x 2^-24 ties to even (2)";
  EXPECT_EQ(toFloat16(bitCast<float>(0x80000001u)).bits, 0x8000) << "an fp32 subnormal is -0";
}

TEST(Float16, NarrowingMatchesTheCompilerOnRandomFloats) {
  std::mt19937 rng(17);
  for (int i = 0; i < 2000000; ++i) {
    const float x = bitCast<float>(static_cast<std::uint32_t>(rng()));
    ASSERT_TRUE(sameHalf(toFloat16(x).bits, compilerHalf(x))) << std::hexfloat << x;
  }
}

TEST(BFloat16, NarrowingRoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(toBFloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(toBFloat16(bitCast<float>(0x3F808000u)).bits, 0x3F80) << "tie to even (down)";
  EXPECT_EQ(toBFloat16(bitCast<float>(0x3F818000u)).bits, 0x3F82) << "tie to even (up)";
  EXPECT_EQ(toBFloat16(bitCast<float>(0x3F808001u)).bits, 0x3F81);
  EXPECT_EQ(toBFloat16(std::numeric_limits<float>::infinity()).bits, 0x7F80);
  EXPECT_EQ(toBFloat16(bitCast<float>(0x7F7FFFFFu)).bits, 0x7F80) << "FLT_MAX rounds to inf";
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(bitCast<float>(0x7F800001u))))) << "a signalling NaN stays NaN";
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float v = toFloat(BFloat16{static_cast<std::uint16_t>(b)});
    if (!std::isnan(v)) {
      ASSERT_EQ(toBFloat16(v).bits, b) << "round trip " << std::hex << b;
    }
  }
}

}  // namespace
}  // namespace fp8scale
