// Launcher argument checks (detail::checkQuantArgs) and status messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fp8scale/detail/checks.hpp"
#include "fp8scale/consumers/weight_block_quant.hpp"
#include "fp8scale/producers/rmsnorm_quant.hpp"
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

namespace fp8scale {
namespace {

// The optional row buffers of RMSNorm quant (residual, normOut): each refusal
// names the buffer or its stride.
TEST(RmsNormQuantChecks, OptionalRowBuffersAreRefusedByName) {
  alignas(16) static BFloat16 x[4 * 256], w[256], r[4 * 264 + 8], y[4 * 264 + 8];
  alignas(16) static std::uint8_t q[4 * 256];
  alignas(16) static float s[4 * 2];
  const Fp8Matrix<E4M3FN> qm{q, 4, 256, 256};
  const auto sv = rowMajorView(s, 4, 2).value();
  float fmax = 0.0f;
  auto check = [&](RmsNormQuantInput<BFloat16> in) {
    return detail::checkRmsNormQuant("rmsNormQuant", in, qm, sv, QuantOptions{}, fmax);
  };
  const RmsNormQuantInput<BFloat16> ok{x, 4, 256, 256, r, 264, w, 1e-6f, y, 264};
  EXPECT_TRUE(check(ok).isOk());
  struct Case {
    RmsNormQuantInput<BFloat16> in;
    StatusCode code;
    const char* argument;
  };
  auto with = [&](auto edit) {
    RmsNormQuantInput<BFloat16> in = ok;
    edit(in);
    return in;
  };
  const Case cases[] = {
      {with([&](auto& in) { in.ldResidual = 255; }), StatusCode::kLdTooSmall, "ldResidual"},
      {with([&](auto& in) { in.residual = r + 1; }), StatusCode::kMisaligned, "residual"},
      {with([&](auto& in) { in.ldResidual = 260; }), StatusCode::kMisaligned, "ldResidual"},
      {with([&](auto& in) { in.ldNormOut = 255; }), StatusCode::kLdTooSmall, "ldNormOut"},
      {with([&](auto& in) { in.normOut = y + 1; }), StatusCode::kMisaligned, "normOut"},
      {with([&](auto& in) { in.ldNormOut = 260; }), StatusCode::kMisaligned, "ldNormOut"},
  };
  for (const Case& c : cases) {
    const Status st = check(c.in);
    EXPECT_EQ(st.code(), c.code) << st.message();
    EXPECT_STREQ(st.argument(), c.argument) << st.message();
  }
  // Absent buffers are not checked.
  EXPECT_TRUE(check(with([&](auto& in) {
                in.residual = nullptr;
                in.ldResidual = 0;
                in.normOut = nullptr;
                in.ldNormOut = 0;
              }))
                  .isOk());
}

// The scale options are checked the same way for activations and weights.
TEST(QuantOptionChecks, ActivationAndWeightOptionsShareTheRules) {
  float fmax = 0.0f;
  QuantOptions a;
  WeightQuantOptions w;
  EXPECT_TRUE(detail::checkQuantOptions<E4M3FN>("f", a, fmax).isOk());
  EXPECT_EQ(fmax, 448.0f);
  EXPECT_TRUE(detail::checkQuantOptions<E4M3FNUZ>("f", w, fmax).isOk());
  EXPECT_EQ(fmax, 240.0f);
  a.fmax = 500.0f;
  w.fmax = 500.0f;
  EXPECT_STREQ(detail::checkQuantOptions<E4M3FN>("f", a, fmax).argument(), "fmax");
  EXPECT_STREQ(detail::checkQuantOptions<E4M3FN>("f", w, fmax).argument(), "fmax");
  a = QuantOptions{};
  a.eps = 0.0f;
  EXPECT_STREQ(detail::checkQuantOptions<E4M3FN>("f", a, fmax).argument(), "eps");
  w = WeightQuantOptions{};
  w.rule = static_cast<ScaleRule>(7);
  EXPECT_STREQ(detail::checkQuantOptions<E4M3FN>("f", w, fmax).argument(), "rule");
}

// QuantOptions::scaleStore: plain stores unless asked, an unknown value
// refused by name.
TEST(QuantOptionChecks, ScaleStorePolicyIsCheckedAndOffByDefault) {
  float fmax = 0.0f;
  QuantOptions a;
  EXPECT_EQ(a.scaleStore, ScaleStorePolicy::kEvictNormal);
  EXPECT_FALSE(detail::storesScalesEvictLast(a.scaleStore));
  EXPECT_TRUE(detail::checkProducerOptions<E4M3FN>("f", a, fmax).isOk());
  a.scaleStore = ScaleStorePolicy::kEvictLast;
  EXPECT_TRUE(detail::storesScalesEvictLast(a.scaleStore));
  EXPECT_TRUE(detail::checkProducerOptions<E4M3FN>("f", a, fmax).isOk());
  a.scaleStore = static_cast<ScaleStorePolicy>(2);
  const Status bad = detail::checkProducerOptions<E4M3FN>("f", a, fmax);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(bad.argument(), "scaleStore");
  a.eps = 0.0f;  // the shared checks come first
  EXPECT_STREQ(detail::checkProducerOptions<E4M3FN>("f", a, fmax).argument(), "eps");
}

// Which kernels a launch picks for its scale view: those with padding code
// only for a column-major view with padding slots (ld > M); row-major
// launches instantiate only the kernels without it.
TEST(ScalePaddingDispatch, PaddingKernelsOnlyForColumnMajorViewsWithPaddingSlots) {
  float buf[64] = {};
  EXPECT_FALSE(detail::scaleHasPadding(colMajorView(buf, 4, 7, 4).value()));  // ld = M
  EXPECT_TRUE(detail::scaleHasPadding(colMajorView(buf, 3, 7, 4).value()));   // ld = align(M, 4) > M
  EXPECT_TRUE(detail::scaleHasPadding(colMajorView(buf, 1, 7, 8).value()));
  EXPECT_FALSE(detail::scaleHasPadding(rowMajorView(buf, 3, 7).value()));
  EXPECT_FALSE(detail::scaleHasPadding(rowMajorView(buf, 3, 7, 9).value()));  // a row-major ld > G is no padding
  auto picked = [](auto padding) {
    return Status::error(StatusCode::kInvalidValue, "f", decltype(padding)::value ? "padding" : "none", "");
  };
  EXPECT_STREQ(detail::dispatchScalePadding(colMajorView(buf, 3, 7, 4).value(), picked).argument(), "padding");
  EXPECT_STREQ(detail::dispatchScalePadding(colMajorView(buf, 1, 7, 8).value(), picked).argument(), "padding");
  EXPECT_STREQ(detail::dispatchScalePadding(colMajorView(buf, 4, 7, 4).value(), picked).argument(), "none");
  EXPECT_STREQ(detail::dispatchScalePadding(rowMajorView(buf, 3, 7, 9).value(), picked).argument(), "none");
}

}  // namespace
}  // namespace fp8scale
