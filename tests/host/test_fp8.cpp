// fp8 encode/decode: against the H200's own conversions (golden data made by
// tests/device/gen_fp8_golden.cu), against ml_dtypes (an independent
// implementation, data made by tools/gen_mldtypes_reference.py), and against
// vectors taken from the format definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/golden.hpp"
#include "fp8scale/fp8.hpp"

namespace fp8scale {
namespace {

using test::GoldenRecord;

std::vector<GoldenRecord> load(const char* name) {
  std::vector<GoldenRecord> r;
  const std::string path = test::goldenPath(test::dataDir(), name);
  EXPECT_TRUE(test::readGolden(path, r)) << "cannot read " << path;
  return r;
}

template <class Format>
bool isNaNCode(std::uint8_t b) {
  return Format::kHasNegativeZero ? (b & 0x7F) == 0x7F : b == 0x80;
}

template <class Format>
void expectHostEncodeMatches(const std::vector<GoldenRecord>& records, const char* what) {
  std::size_t bad = 0;
  for (const GoldenRecord& r : records) {
    const std::uint8_t host = encode<Format>(bitCast<float>(r.inputBits));
    if (host != r.output && bad++ < 10)
      ADD_FAILURE() << what << std::hex << ": input 0x" << r.inputBits << " (" << bitCast<float>(r.inputBits)
                    << ") host 0x" << int(host) << " expected 0x" << int(r.output);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << records.size() << " differ";
}

TEST(Fp8Golden, HostEncodeMatchesH200ForEveryBf16Pattern) {
  const auto records = load(test::kGoldenBf16File);
  ASSERT_EQ(records.size(), 65536u);
  for (std::uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(records[i].inputBits, i << 16) << "file is not the bf16 sweep";
  expectHostEncodeMatches<E4M3FN>(records, "bf16 sweep");
}

TEST(Fp8Golden, HostEncodeMatchesH200AroundEveryRoundingBoundary) {
  const auto records = load(test::kGoldenFp32File);
  ASSERT_GT(records.size(), 60000u);
  // The committed inputs are the ones the test tree constructs today.
  const auto inputs = test::boundaryInputs();
  ASSERT_EQ(records.size(), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) ASSERT_EQ(records[i].inputBits, inputs[i]);
  expectHostEncodeMatches<E4M3FN>(records, "boundary set");
}

template <class Format>
void expectMatchesMlDtypes(const char* file) {
  const auto records = load(file);
  ASSERT_GT(records.size(), 90000u);
  std::size_t bad = 0;
  for (const GoldenRecord& r : records) {
    const std::uint8_t host = encode<Format>(bitCast<float>(r.inputBits));
    const bool same = isNaNCode<Format>(r.output) ? isNaNCode<Format>(host) : host == r.output;
    if (!same && bad++ < 10)
      ADD_FAILURE() << Format::kName << std::hex << ": input 0x" << r.inputBits << " host 0x" << int(host)
                    << " ml_dtypes 0x" << int(r.output);
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Fp8MlDtypes, E4M3FNHostEncodeMatchesMlDtypesInRange) { expectMatchesMlDtypes<E4M3FN>("e4m3fn_mldtypes.golden"); }
TEST(Fp8MlDtypes, E4M3FNUZHostEncodeMatchesMlDtypesInRange) {
  expectMatchesMlDtypes<E4M3FNUZ>("e4m3fnuz_mldtypes.golden");
}

// ---- Format definitions ---------------------------------------------------------

float pow2(int e) { return std::ldexp(1.0f, e); }
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Fp8E4M3FN, VectorsFromTheFormatDefinition) {
  EXPECT_EQ(encode<E4M3FN>(0.0f), 0x00);
  EXPECT_EQ(encode<E4M3FN>(-0.0f), 0x80) << "e4m3fn has a negative zero";
  EXPECT_EQ(encode<E4M3FN>(1.0f), 0x38) << "bias 7";
  EXPECT_EQ(encode<E4M3FN>(pow2(-6)), 0x08) << "smallest normal";
  EXPECT_EQ(encode<E4M3FN>(pow2(-9)), 0x01) << "smallest subnormal";
  EXPECT_EQ(encode<E4M3FN>(pow2(-10)), 0x00) << "half the smallest subnormal ties to even (0)";
  EXPECT_EQ(encode<E4M3FN>(1.5f * pow2(-10)), 0x01) << "0.75 of the smallest subnormal rounds up to it";
  EXPECT_EQ(encode<E4M3FN>(448.0f), 0x7E);
  EXPECT_EQ(encode<E4M3FN>(464.0f), 0x7E) << "the midpoint to the next (NaN) code ties to even";
  EXPECT_EQ(encode<E4M3FN>(465.0f), 0x7E) << "saturates";
  EXPECT_EQ(encode<E4M3FN>(1e30f), 0x7E);
  EXPECT_EQ(encode<E4M3FN>(-480.0f), 0xFE);
  EXPECT_EQ(encode<E4M3FN>(kInf), 0x7E) << "satfinite";
  EXPECT_EQ(encode<E4M3FN>(-kInf), 0xFE);
  EXPECT_EQ(encode<E4M3FN>(kNaN) & 0x7F, 0x7F);
  EXPECT_EQ(decode<E4M3FN>(0x7E), 448.0f);
  EXPECT_EQ(decode<E4M3FN>(0x01), pow2(-9));
  EXPECT_TRUE(std::isnan(decode<E4M3FN>(0x7F)));
  EXPECT_TRUE(std::isnan(decode<E4M3FN>(0xFF)));
  EXPECT_TRUE(std::signbit(decode<E4M3FN>(0x80)));
}

TEST(Fp8E4M3FNUZ, VectorsFromTheFormatDefinition) {
  EXPECT_EQ(encode<E4M3FNUZ>(0.0f), 0x00);
  EXPECT_EQ(encode<E4M3FNUZ>(-0.0f), 0x00) << "no negative zero: 0x80 is NaN";
  EXPECT_EQ(encode<E4M3FNUZ>(-pow2(-12)), 0x00) << "a negative value rounding to zero is +0";
  EXPECT_EQ(encode<E4M3FNUZ>(1.0f), 0x40) << "bias 8";
  EXPECT_EQ(encode<E4M3FNUZ>(pow2(-7)), 0x08) << "smallest normal";
  EXPECT_EQ(encode<E4M3FNUZ>(pow2(-10)), 0x01) << "smallest subnormal";
  EXPECT_EQ(encode<E4M3FNUZ>(-pow2(-10)), 0x81);
  EXPECT_EQ(encode<E4M3FNUZ>(pow2(-11)), 0x00) << "tie to even";
  EXPECT_EQ(encode<E4M3FNUZ>(240.0f), 0x7F) << "max";
  EXPECT_EQ(encode<E4M3FNUZ>(-240.0f), 0xFF);
  EXPECT_EQ(encode<E4M3FNUZ>(248.0f), 0x7F) << "saturates";
  EXPECT_EQ(encode<E4M3FNUZ>(448.0f), 0x7F);
  EXPECT_EQ(encode<E4M3FNUZ>(-kInf), 0xFF);
  EXPECT_EQ(encode<E4M3FNUZ>(kNaN), 0x80);
  EXPECT_EQ(encode<E4M3FNUZ>(-kNaN), 0x80) << "0x80 is the only NaN";
  EXPECT_TRUE(std::isnan(decode<E4M3FNUZ>(0x80)));
  EXPECT_EQ(decode<E4M3FNUZ>(0x7F), 240.0f);
  EXPECT_EQ(decode<E4M3FNUZ>(0xFF), -240.0f);
  EXPECT_EQ(decode<E4M3FNUZ>(0x01), pow2(-10));
  EXPECT_EQ(decode<E4M3FNUZ>(0x00), 0.0f);
  EXPECT_FALSE(std::signbit(decode<E4M3FNUZ>(0x00)));
}

template <class Format>
void expectEveryCodeRoundTrips() {
  int checked = 0;
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<std::uint8_t>(c);
    if (isNaNCode<Format>(b)) continue;
    ASSERT_EQ(encode<Format>(decode<Format>(b)), b) << Format::kName << " code 0x" << std::hex << c;
    ++checked;
  }
  EXPECT_EQ(checked, Format::kHasNegativeZero ? 254 : 255);
}

TEST(Fp8E4M3FN, EveryCodeRoundTrips) { expectEveryCodeRoundTrips<E4M3FN>(); }
TEST(Fp8E4M3FNUZ, EveryCodeRoundTrips) { expectEveryCodeRoundTrips<E4M3FNUZ>(); }

TEST(Fp8E4M3FN, DecodeIsMonotonicOverPositiveCodes) {
  for (int c = 1; c <= E4M3FN::kMaxCode; ++c)
    EXPECT_LT(decode<E4M3FN>(static_cast<std::uint8_t>(c - 1)), decode<E4M3FN>(static_cast<std::uint8_t>(c)));
  for (int c = 1; c <= E4M3FNUZ::kMaxCode; ++c)
    EXPECT_LT(decode<E4M3FNUZ>(static_cast<std::uint8_t>(c - 1)), decode<E4M3FNUZ>(static_cast<std::uint8_t>(c)));
}

}  // namespace
}  // namespace fp8scale
