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
  EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, RowMajor>("f", a, fmax).isOk()));
  a.scaleStore = ScaleStorePolicy::kEvictLast;
  EXPECT_TRUE(detail::storesScalesEvictLast(a.scaleStore));
  EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, RowMajor>("f", a, fmax).isOk()));
  a.scaleStore = static_cast<ScaleStorePolicy>(2);
  const Status bad = detail::checkProducerOptions<E4M3FN, RowMajor>("f", a, fmax);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(bad.argument(), "scaleStore");
  a.eps = 0.0f;  // the shared checks come first
  EXPECT_STREQ((detail::checkProducerOptions<E4M3FN, RowMajor>("f", a, fmax).argument()), "eps");
}

// The exponent layouts hold a power of two's exponent byte alone: a producer
// writing them takes the UE8M0 rule and the group sizes of their consumers
// (32: MXFP8; 128: DeepGEMM's SM100 activations), and refuses the rest by
// name; the fp32 layouts take every rule and group size.
TEST(QuantOptionChecks, ExponentLayoutsTakeTheUe8m0RuleAndGroupsOf32Or128) {
  float fmax = 0.0f;
  QuantOptions o;
  o.rule = ScaleRule::kUE8M0;
  for (int group : {32, 128}) {
    o.groupSize = group;
    EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, PackedUe8m0>("f", o, fmax).isOk())) << group;
    EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, Swizzled128x4>("f", o, fmax).isOk())) << group;
  }
  o.groupSize = 64;
  Status s = detail::checkProducerOptions<E4M3FN, Swizzled128x4>("f", o, fmax);
  EXPECT_EQ(s.code(), StatusCode::kUnsupportedGroupSize);
  EXPECT_STREQ(s.argument(), "groupSize");
  EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, ColMajor>("f", o, fmax).isOk()));
  o.groupSize = 128;
  o.rule = ScaleRule::kFp32;
  s = detail::checkProducerOptions<E4M3FN, PackedUe8m0>("f", o, fmax);
  EXPECT_EQ(s.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(s.argument(), "rule");
  EXPECT_TRUE((detail::checkProducerOptions<E4M3FN, RowMajor>("f", o, fmax).isOk()));
}

// Padding slots belong to the column-major layout: a view has them when
// ld > M and it has columns (M == 0 included), never when row-major; a
// launch covers one more row tile past the rows for them, and exactly one
// row tile (the one starting in [M, M + tileRows)) is the padding tile.
TEST(ScalePadding, APaddedViewHasOnePaddingTilePastItsRows) {
  float buf[64] = {};
  EXPECT_FALSE(colMajorView(buf, 4, 7, 4).value().hasPadding());  // ld = M
  EXPECT_TRUE(colMajorView(buf, 3, 7, 4).value().hasPadding());   // ld = align(M, 4) > M
  EXPECT_TRUE(colMajorView(buf, 1, 7, 8).value().hasPadding());
  EXPECT_TRUE(colMajorView(buf, 0, 2, 4).value().hasPadding());   // M == 0: all of [G][ld] is padding
  EXPECT_FALSE(colMajorView(buf, 0, 0, 4).value().hasPadding());  // no columns
  EXPECT_FALSE(rowMajorView(buf, 3, 7).value().hasPadding());
  EXPECT_FALSE(rowMajorView(buf, 3, 7, 9).value().hasPadding());  // a row-major ld > G is no padding
  EXPECT_EQ(colMajorView(buf, 3, 7, 4).value().padded().paddedRows, 4);

  const auto padded = colMajorView(buf, 17, 2, 20).value();
  EXPECT_EQ(paddedRowTiles(padded, 8), 4);  // rows 0-7, 8-15, 16; the padding tile at 24
  EXPECT_EQ(paddedRowTiles(padded, 1), 18);
  EXPECT_EQ(paddedRowTiles(colMajorView(buf, 16, 2, 16).value(), 8), 2);
  EXPECT_EQ(paddedRowTiles(rowMajorView(buf, 17, 2).value(), 8), 3);
  EXPECT_EQ(paddedRowTiles(colMajorView(buf, 0, 2, 4).value(), 8), 1);
  int tiles = 0;
  for (index_t start = 0; start < 64; start += 8) tiles += isPaddingTile(padded, start, 8);
  EXPECT_EQ(tiles, 1);
  EXPECT_TRUE(isPaddingTile(padded, 24, 8));
  EXPECT_FALSE(isPaddingTile(padded, 16, 8)) << "the tile holding row 16 is a data tile";
  EXPECT_TRUE(isPaddingTile(padded, 17, 1));
  EXPECT_FALSE(isPaddingTile(padded, 18, 1));
  EXPECT_FALSE(isPaddingTile(colMajorView(buf, 16, 2, 16).value(), 16, 8)) << "ld = M: no padding tile";
  EXPECT_TRUE(isPaddingTile(colMajorView(buf, 0, 2, 4).value(), 0, 8));
}

// writeScalePadding writes exactly the slots [M, ld) it is given, 0, and
// touches neither the scales nor another column.
TEST(ScalePadding, WriteScalePaddingWritesOnlyPaddingSlots) {
  float buf[2 * 8];
  for (float& v : buf) v = -1.0f;
  const auto view = colMajorView(buf, 5, 2, 8).value();
  writeScalePadding(view, 1, 0, 2);  // slots 5, 7 of column 1
  for (int i = 0; i < 16; ++i) {
    const bool written = i == 8 + 5 || i == 8 + 7;
    EXPECT_EQ(buf[i], written ? 0.0f : -1.0f) << i;
  }
  writeScalePadding(view, 1, 1, 2);  // slot 6
  EXPECT_EQ(buf[8 + 6], 0.0f);
  float rm[10];
  for (float& v : rm) v = -1.0f;
  writeScalePadding(rowMajorView(rm, 2, 5).value(), 0, 0, 1);
  for (float v : rm) EXPECT_EQ(v, -1.0f) << "row-major views have no padding";
}

// Result(status, value), a launcher's last step: the value only when the
// status is ok; a failure keeps its status and the empty value.
TEST(Result, StatusAndValueKeepsTheValueOnlyWhenOk) {
  float buf[4] = {};
  const auto view = rowMajorView(buf, 2, 2).value();
  const Result<ScaleView<float, RowMajor>> ok{Status::ok(), view};
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok.value().data(), buf);
  EXPECT_EQ(ok.value().rows(), 2);
  const Status failure = Status::error(StatusCode::kDeviceError, "groupQuant", "launch", "failed");
  const Result<ScaleView<float, RowMajor>> failed{failure, view};
  EXPECT_FALSE(failed.isOk());
  EXPECT_EQ(failed.status().code(), StatusCode::kDeviceError);
  EXPECT_EQ(failed.status().message(), failure.message());
  EXPECT_EQ(failed.value().data(), nullptr) << "a failed result holds the empty value, not the one given";
  EXPECT_EQ(failed.value().rows(), 0);
}

}  // namespace
}  // namespace fp8scale
