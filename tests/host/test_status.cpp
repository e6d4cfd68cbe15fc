// Launcher argument checks (detail::checkQuantArgs) and status messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fp8scale/detail/checks.hpp"
#include "fp8scale/status.hpp"

namespace fp8scale {
namespace {

detail::QuantArgs validBf16Args(void* x, void* q, void* s) {
  detail::QuantArgs a;
  a.x = x;
  a.rows = 4;
  a.cols = 256;
  a.ldx = 256;
  a.inputBytes = 2;
  a.q = q;
  a.ldq = 256;
  a.scale = s;
  a.scaleRows = 4;
  a.scaleCols = 2;
  a.groupSize = 128;
  return a;
}

class QuantArgChecks : public ::testing::Test {
 protected:
  alignas(16) std::uint8_t x[4 * 256 * 2 + 16];
  alignas(16) std::uint8_t q[4 * 256 + 16];
  alignas(16) float s[16];
};

TEST_F(QuantArgChecks, ValidArgumentsPass) {
  EXPECT_TRUE(detail::checkQuantArgs("test", validBf16Args(x, q, s), 16, 16).isOk());
}

TEST_F(QuantArgChecks, MisalignedPointersAndStridesAreRefusedByName) {
  auto a = validBf16Args(x + 2, q, s);
  auto st = detail::checkQuantArgs("groupQuant", a, 16, 16);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_STREQ(st.argument(), "x");
  EXPECT_EQ(st.value(), 2) << "reports the misalignment in bytes";

  a = validBf16Args(x, q, s);
  a.ldx = 260;  // 520 bytes: not a multiple of 16
  a.cols = 256;
  st = detail::checkQuantArgs("groupQuant", a, 16, 16);
  EXPECT_STREQ(st.argument(), "ldx");

  a = validBf16Args(x, q + 4, s);
  st = detail::checkQuantArgs("groupQuant", a, 16, 16);
  EXPECT_STREQ(st.argument(), "q") << "16 fp8 bytes per store: q must be 16-aligned";

  a = validBf16Args(x, q, s);
  a.ldq = 264;  // a multiple of 8, not of 16
  st = detail::checkQuantArgs("groupQuant", a, 16, 16);
  EXPECT_STREQ(st.argument(), "ldq");

  a = validBf16Args(x, q, reinterpret_cast<std::uint8_t*>(s) + 2);
  st = detail::checkQuantArgs("groupQuant", a, 16, 16);
  EXPECT_STREQ(st.argument(), "scale");
}

TEST_F(QuantArgChecks, EmptyInputSkipsPointerChecks) {
  auto a = validBf16Args(nullptr, nullptr, nullptr);
  a.rows = 0;
  a.scaleRows = 0;
  EXPECT_TRUE(detail::checkQuantArgs("groupQuant", a, 16, 16).isOk());
}

TEST(Status, MessageNamesFunctionArgumentValueAndLimit) {
  const Status s = Status::error(StatusCode::kLdTooSmall, "materialize", "ld", "column-major ld is smaller than rows", 4, 5);
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "fp8scale::materialize: argument 'ld' = 4: column-major ld is smaller than rows (limit 5) [kLdTooSmall]");
  EXPECT_EQ(Status::ok().message(), "ok");
}

}  // namespace
}  // namespace fp8scale
