// Bad input at the host entry points (view factories, host references,
// materializeHost): each case is refused with the status and the argument a
// user can act on, before anything is read, written or allocated. The
// shapes below are far larger than the small buffers passed with them: a
// call that accepted them would read or write out of bounds (ASan builds
// of these tests and the fuzz targets would report it).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <limits>
#include <vector>

#include "fp8scale/layout_policy.hpp"
#include "fp8scale/reference/allreduce_fused.hpp"
#include "fp8scale/reference/block_scaled_gemm.hpp"
#include "fp8scale/reference/fused_quant.hpp"
#include "fp8scale/reference/group_quant.hpp"
#include "fp8scale/spec/group_quant.hpp"

namespace fp8scale {
namespace {

// 2^e, opaque to the optimizer: with a constant huge extent GCC sees the
// reference loops' iteration counts and warns about code these tests
// never reach (the calls are refused first).
index_t kTwoTo(int e) {
  volatile int exponent = e;
  return index_t{1} << exponent;
}

void expectRefused(const Status& st, StatusCode code, const char* argument) {
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_STREQ(st.argument(), argument) << st.message();
}

TEST(BadInput, PaddedColumnMajorViewOfNoRowsSpansItsPaddingSlots) {
  // Its 2 x 4 padding slots are written by every producer, materialize and
  // the references, so they are part of the view's span and need memory.
  std::vector<float> buf(8, -1.0f);
  const auto v = colMajorView(buf.data(), 0, 2, 4).value();
  EXPECT_EQ(v.requiredSpan(), 8);
  EXPECT_TRUE(v.hasPadding());
  expectRefused(colMajorView<float>(nullptr, 0, 2, 4).status(), StatusCode::kNullPointer, "data");
  // The reference writes the padding as 0, and only there.
  const Status st = reference::groupQuant<E4M3FN, ScaleFp32>(static_cast<const float*>(nullptr), 0, 256, 256, 128,
                                                              Fp8Matrix<E4M3FN>{nullptr, 0, 256, 256}, v);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (float f : buf) EXPECT_EQ(f, 0.0f);
  // ld == M == 0: no slot, no memory needed.
  EXPECT_TRUE(colMajorView<float>(nullptr, 0, 2, 0));
}

TEST(BadInput, ViewsWhoseSpanOverflowsAreRefused) {
  float f = 0;
  // (M = 2^40, G = 2^30, ld = 2^40): G * ld = 2^70 elements.
  expectRefused(colMajorView(&f, kTwoTo(40), kTwoTo(30), kTwoTo(40)).status(), StatusCode::kInvalidShape, "ld");
  // (M = 2^62, G = 8): (M - 1) * 8 + 8 = 2^65 elements.
  expectRefused(rowMajorView(&f, kTwoTo(62), 8).status(), StatusCode::kInvalidShape, "ld");
  expectRefused(transposedContiguousView(&f, kTwoTo(62), 8).status(), StatusCode::kInvalidShape, "cols");
  // Below 2^63 elements but above 2^48 bytes: no buffer is that large.
  expectRefused(colMajorView(&f, kTwoTo(20), kTwoTo(27), kTwoTo(20)).status(), StatusCode::kInvalidShape, "ld");
  // Exactly 2^48 bytes is the largest span accepted (as a shape: this test
  // never touches it).
  EXPECT_TRUE(colMajorView(&f, kTwoTo(20), kTwoTo(26), kTwoTo(20)));
  // A span that runs past the end of the address space.
  auto* top = reinterpret_cast<float*>(UINTPTR_MAX - 15);
  expectRefused(rowMajorView(top, 2, 4).status(), StatusCode::kInvalidShape, "ld");
  const Status st = colMajorView(&f, kTwoTo(40), kTwoTo(30), kTwoTo(40)).status();
  EXPECT_EQ(st.message(),
            "fp8scale::ScaleView::make: argument 'ld' = -1: the buffer's extents and strides span more than "
            "2^48 bytes (limit 281474976710656) [kInvalidShape]");
}

TEST(BadInput, MisalignedScalePointerIsRefused) {
  alignas(4) unsigned char bytes[64] = {};
  auto* off = reinterpret_cast<float*>(bytes + 1);
  const Status st = rowMajorView(off, 2, 2).status();
  expectRefused(st, StatusCode::kMisaligned, "data");
  EXPECT_EQ(st.value(), 1);
  EXPECT_EQ(st.limit(), 4);
  // Byte views (packed UE8M0 exponents) take any address.
  EXPECT_TRUE(rowMajorView(bytes + 1, 2, 2));
}

struct GroupQuantBuffers {
  std::vector<float> x = std::vector<float>(2 * 128, 1.0f);
  std::vector<std::uint8_t> q = std::vector<std::uint8_t>(2 * 128);
  std::vector<float> s = std::vector<float>(2);
  Fp8Matrix<E4M3FN> qm{q.data(), 2, 128, 128};
  ScaleView<float, RowMajor> sv = rowMajorView(s.data(), 2, 1).value();
};

TEST(BadInput, ReferenceGroupQuantChecksTheFp8OutputExtents) {
  GroupQuantBuffers b;
  const Status st = reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128,
                                                              Fp8Matrix<E4M3FN>{b.q.data(), 1, 64, 64}, b.sv);
  expectRefused(st, StatusCode::kInvalidShape, "q");
  EXPECT_EQ(st.value(), 1) << "q's rows";
  EXPECT_EQ(st.limit(), 2) << "the input's M";
}

TEST(BadInput, ReferencesRefuseTheOptionsTheLaunchersRefuse) {
  GroupQuantBuffers b;
  auto group = [&](float fmax, float eps) {
    return reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128, b.qm, b.sv, fmax, eps);
  };
  Status st = group(500.0f, kDefaultAmaxEps);
  expectRefused(st, StatusCode::kInvalidValue, "fmax");
  EXPECT_EQ(st.message(),
            "fp8scale::reference::groupQuant: argument 'fmax' = 500: must be in (0, format max] (448 e4m3fn, 240 "
            "e4m3fnuz) [kInvalidValue]");
  // Floating-point arguments print their value: -1, not 0.
  EXPECT_EQ(group(448.0f, -1.0f).message(),
            "fp8scale::reference::groupQuant: argument 'eps' = -1: must be > 0 [kInvalidValue]");
  EXPECT_EQ(group(448.0f, -1.0f).floatValue(), -1.0f);
  expectRefused(group(-1.0f, kDefaultAmaxEps), StatusCode::kInvalidValue, "fmax");
  expectRefused(group(448.0f, 0.0f), StatusCode::kInvalidValue, "eps");
  // e4m3fnuz's max is 240: 448 is above it.
  const Fp8Matrix<E4M3FNUZ> qz{b.q.data(), 2, 128, 128};
  expectRefused(reference::groupQuant<E4M3FNUZ, ScaleFp32>(b.x.data(), 2, 128, 128, 128, qz, b.sv, 448.0f),
                StatusCode::kInvalidValue, "fmax");
  // fmax 0 selects the format's max, as in the launchers.
  ASSERT_TRUE(group(0.0f, kDefaultAmaxEps));
  EXPECT_FLOAT_EQ(b.s[0], 1.0f / 448.0f);
  // The fused references, likewise.
  std::vector<float> silu(2 * 256, 1.0f);
  expectRefused(reference::siluClampQuant<E4M3FN, ScaleFp32>(SiluClampInput<float>{silu.data(), 2, 128, 256, 0.0f},
                                                              b.qm, b.sv, 128, 448.0f, 0.0f),
                StatusCode::kInvalidValue, "eps");
  std::vector<float> w(128, 1.0f);
  expectRefused(reference::rmsNormQuant<E4M3FN, ScaleFp32>(
                    RmsNormQuantInput<float>::matrix(b.x.data(), 2, 128, 128, w.data()), b.qm, b.sv, 128, 500.0f),
                StatusCode::kInvalidValue, "fmax");
}

// Found by tests/fuzz/fuzz_reference.cpp.
TEST(BadInput, EpsWhoseSmallestScaleIsSubnormalIsRefused) {
  GroupQuantBuffers b;
  for (float& v : b.x) v = 0.0f;
  // eps / fmax = 1e-45 / 448 rounds to 0: the all-zero groups would get
  // scale 0, 1 / scale = inf and the code of 0 * inf, a NaN.
  const Status st = reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128, b.qm, b.sv, 0.0f, 1e-45f);
  expectRefused(st, StatusCode::kInvalidValue, "eps");
  EXPECT_NE(st.message().find("2^-126"), std::string::npos) << st.message();
  // An infinite eps (or eps / fmax past the largest float) makes every
  // scale infinite, and dequantization 0 * inf.
  const Status inf = reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128, b.qm, b.sv, 0.0f,
                                                               INFINITY);
  expectRefused(inf, StatusCode::kInvalidValue, "eps");
  EXPECT_NE(inf.message().find("finite"), std::string::npos) << inf.message();
  // The smallest accepted eps gives a normal scale and zero codes.
  const float eps = 448.0f * 1.17549435e-38f;
  for (auto& code : b.q) code = 0xA5;
  const Status ok = reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128, b.qm, b.sv, 0.0f, eps);
  ASSERT_TRUE(ok.isOk()) << ok.message();
  EXPECT_EQ(b.s[0], eps / 448.0f);
  EXPECT_EQ(b.s[1], eps / 448.0f);
  for (const auto code : b.q) ASSERT_EQ(code, 0) << "an all-zero group encodes +0";
}

// Found by tests/fuzz/fuzz_reference.cpp: a matrix input of negative K was
// refused naming 'headDim', an argument the caller never passed.
TEST(BadInput, GroupQuantNamesTheColumnsOfAMatrixInputK) {
  GroupQuantBuffers b;
  expectRefused(reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, -2, 128, 128, b.qm, b.sv),
                StatusCode::kInvalidShape, "K");
}

// Found by tests/fuzz/fuzz_reference.cpp (UndefinedBehaviorSanitizer: an
// offset applied to the null x of an I == 0 call, which has no work). The
// pointer arithmetic itself is caught by the sanitized replay of
// tests/fuzz/regressions/fuzz_reference/silu-null-offset-*; here: such a
// call is valid and writes no scale.
TEST(BadInput, SiluClampWithNoColumnsTouchesNoInput) {
  std::vector<float> s(1, -1.0f);
  const auto view = rowMajorView(s.data(), 3, 0).value();
  const Status st = reference::siluClampQuant<E4M3FN, ScaleFp32>(SiluClampInput<float>{nullptr, 3, 0, 16, 0.0f},
                                                                  Fp8Matrix<E4M3FN>{nullptr, 3, 0, 16}, view, 128);
  EXPECT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(s[0], -1.0f);
}

// Found by tests/fuzz/fuzz_launch_checks.cpp (UndefinedBehaviorSanitizer:
// the alignment test multiplied a head stride near 2^62 by the element
// size). The strides of a head-major input are bounded only by the span of
// x, which is checked after them.
TEST(BadInput, HugeHeadStridesAreCheckedWithoutOverflow) {
  std::vector<std::uint8_t> q(2 * 256);
  std::vector<float> s(2 * 2);
  const auto* x = reinterpret_cast<const BFloat16*>(std::uintptr_t{1} << 32);
  const auto check = [&](index_t tokenStride, index_t headStride) {
    float fmax = 0.0f;
    return detail::checkGroupQuant("groupQuant",
                                   GroupQuantInput<BFloat16>::headMajor(x, 2, 2, 128, tokenStride, headStride),
                                   Fp8Matrix<E4M3FN>{q.data(), 2, 256, 256}, rowMajorView(s.data(), 2, 2).value(),
                                   QuantOptions{}, fmax);
  };
  // 2^62 + 8 elements: a whole number of 16-byte vectors, but x then spans
  // far more than 2^48 bytes.
  expectRefused(check(256, kTwoTo(62) + 8), StatusCode::kInvalidShape, "x");
  expectRefused(check(kTwoTo(62) + 8, 128), StatusCode::kInvalidShape, "x");
  // 2^62 + 1 elements: not a whole number of vectors.
  expectRefused(check(256, kTwoTo(62) + 1), StatusCode::kMisaligned, "headStride");
  expectRefused(check(kTwoTo(62) + 1, 128), StatusCode::kMisaligned, "tokenStride");
  EXPECT_TRUE(check(256, 128).isOk());
}

// Found by tests/fuzz/fuzz_launch_checks.cpp (UndefinedBehaviorSanitizer:
// the span of a head-major input formed rows - 1 before the negative-rows
// check, which wraps for rows = INT64_MIN). A negative M is refused by name.
TEST(BadInput, HeadMajorInputWithNegativeRowsIsRefusedWithoutOverflow) {
  std::vector<std::uint8_t> q(2 * 256);
  std::vector<float> s(2 * 2);
  const auto* x = reinterpret_cast<const BFloat16*>(std::uintptr_t{1} << 32);
  for (index_t rows : {index_t{-1}, std::numeric_limits<index_t>::min()}) {
    float fmax = 0.0f;
    const Status st = detail::checkGroupQuant("groupQuant", GroupQuantInput<BFloat16>::headMajor(x, rows, 2, 128, 256, 128),
                                              Fp8Matrix<E4M3FN>{q.data(), rows, 256, 256},
                                              ScaleView<float, RowMajor>::fromValidated(s.data(), rows, 2, RowMajor{2}),
                                              QuantOptions{}, fmax);
    expectRefused(st, StatusCode::kInvalidShape, "M");
  }
}

// Found by tests/fuzz/fuzz_launch_checks.cpp (UndefinedBehaviorSanitizer:
// ceil(N / 128) was (N + 127) / 128, which wraps for N near 2^63).
TEST(BadInput, WeightScaleRowsOfAHugeNDoNotWrap) {
  EXPECT_EQ(weightScaleRows(INT64_MAX), INT64_MAX / 128 + 1);
  EXPECT_EQ(weightScaleRows(129), 2);
  EXPECT_EQ(weightScaleRows(128), 1);
  EXPECT_EQ(weightScaleRows(0), 0);
  std::vector<std::uint8_t> q(128);
  std::vector<float> s(4);
  const WeightQuantInput<BFloat16> w{reinterpret_cast<const BFloat16*>(std::uintptr_t{1} << 32), INT64_MAX, 128, 128};
  float fmax = 0.0f;
  const auto scale = ScaleView<float, RowMajor>::fromValidated(s.data(), weightScaleRows(INT64_MAX), 1, RowMajor{4});
  expectRefused(detail::checkWeightBlockQuant("weightBlockQuant", w, Fp8Matrix<E4M3FN>{q.data(), INT64_MAX, 128, 128},
                                              scale, WeightQuantOptions{}, fmax, 16, 8),
                StatusCode::kInvalidShape, "w");
}

TEST(BadInput, RmsNormWeightPastTheEndOfTheAddressSpaceIsRefused) {
  // K = 4096 fp32 weights (16 KiB) starting 4 KiB below the top.
  std::vector<float> x(2 * 4096, 1.0f), scales(2 * 32);
  std::vector<std::uint8_t> q(2 * 4096);
  const auto* weight = reinterpret_cast<const float*>(UINTPTR_MAX - 4095);
  expectRefused(reference::rmsNormQuant<E4M3FN, ScaleFp32>(
                    RmsNormQuantInput<float>::matrix(x.data(), 2, 4096, 4096, weight),
                    Fp8Matrix<E4M3FN>{q.data(), 2, 4096, 4096}, rowMajorView(scales.data(), 2, 32).value(), 128),
                StatusCode::kInvalidShape, "weight");
}

// A negative ld other than kDefaultLd (-1) is a mistake, not a request for
// the default: the factories pass it to make(), which refuses it.
TEST(BadInput, FactoriesRefuseANegativeLdOtherThanTheDefault) {
  std::vector<float> buf(8);
  EXPECT_EQ(rowMajorView(buf.data(), 2, 4).value().ld(), 4);
  EXPECT_EQ(colMajorView(buf.data(), 2, 4).value().ld(), 2);
  expectRefused(rowMajorView(buf.data(), 2, 4, -5).status(), StatusCode::kLdTooSmall, "ld");
  expectRefused(colMajorView(buf.data(), 2, 4, -2).status(), StatusCode::kLdTooSmall, "ld");
}

TEST(BadInput, BlockScaledGemmReferenceChecksItsOperands) {
  std::vector<std::uint8_t> xq(2 * 128), wq(16 * 128);
  std::vector<float> xs(2), ws(4);
  const QuantizedTensor<E4M3FN, RowMajor> x{{xq.data(), 2, 128, 128}, rowMajorView(xs.data(), 2, 1).value(), 128};
  const BlockQuantizedWeight<E4M3FN> w{{wq.data(), 16, 128, 128}, rowMajorView(ws.data(), 1, 1, 4).value()};
  std::vector<double> y;
  ASSERT_TRUE(reference::blockScaledGemm(x, w, y).isOk());
  EXPECT_EQ(y.size(), 2u * 16u);
  auto bad = x;
  bad.data.rows = -1;
  expectRefused(reference::blockScaledGemm(bad, w, y), StatusCode::kInvalidShape, "M");
  bad = x;
  bad.data.ld = 64;
  expectRefused(reference::blockScaledGemm(bad, w, y), StatusCode::kLdTooSmall, "x.ld");
  bad = x;
  bad.data.data = nullptr;
  expectRefused(reference::blockScaledGemm(bad, w, y), StatusCode::kNullPointer, "x");
  auto wide = w;
  wide.data.ld = kTwoTo(60);
  expectRefused(reference::blockScaledGemm(x, wide, y), StatusCode::kInvalidShape, "w");
  // The extents error reports the extent that differs: the columns here.
  bad = x;
  bad.scale = rowMajorView(xs.data(), 2, 0).value();
  const Status st = reference::blockScaledGemm(bad, w, y);
  expectRefused(st, StatusCode::kInvalidShape, "x.scale");
  EXPECT_EQ(st.value(), 0);
  EXPECT_EQ(st.limit(), 1);
}

TEST(BadInput, ReferencesRefuseShapesBeyondTheAddressSpace) {
  GroupQuantBuffers b;
  const index_t huge = kTwoTo(62);
  // A scale view built unchecked (as launchers slice them) to reach the
  // references' own span checks.
  const auto hugeScale = ScaleView<float, RowMajor>::fromValidated(b.s.data(), huge, 1, RowMajor{1});
  const Fp8Matrix<E4M3FN> hugeQ{b.q.data(), huge, 128, 128};
  expectRefused(reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), huge, 128, 128, 128, hugeQ, hugeScale),
                StatusCode::kInvalidShape, "x");
  // ldq too large for q's span, x's within bounds.
  const Fp8Matrix<E4M3FN> wideQ{b.q.data(), 2, 128, kTwoTo(60)};
  expectRefused(reference::groupQuant<E4M3FN, ScaleFp32>(b.x.data(), 2, 128, 128, 128, wideQ, b.sv),
                StatusCode::kInvalidShape, "q");
  // SiLU-clamp: 2 * I overflows before any comparison with ldx.
  std::vector<float> silu(2 * 256, 1.0f);
  const index_t hugeI = kTwoTo(62);
  const auto siluScale = ScaleView<float, RowMajor>::fromValidated(b.s.data(), 1, hugeI / 128, RowMajor{hugeI / 128});
  expectRefused(reference::siluClampQuant<E4M3FN, ScaleFp32>(SiluClampInput<float>{silu.data(), 1, hugeI, hugeI, 0},
                                                              Fp8Matrix<E4M3FN>{b.q.data(), 1, hugeI, hugeI},
                                                              siluScale, 128),
                StatusCode::kInvalidShape, "intermediate");
  // RMSNorm: M rows of x past 2^48 bytes; then the residual's own span.
  std::vector<float> w(128, 1.0f);
  expectRefused(reference::rmsNormQuant<E4M3FN, ScaleFp32>(
                    RmsNormQuantInput<float>::matrix(b.x.data(), huge, 128, 128, w.data()), hugeQ, hugeScale, 128),
                StatusCode::kInvalidShape, "x");
  std::vector<float> r(2 * 128);
  expectRefused(reference::rmsNormQuant<E4M3FN, ScaleFp32>(
                    RmsNormQuantInput<float>::matrix(b.x.data(), 2, 128, 128, w.data()).withResidual(r.data(),
                                                                                                    kTwoTo(60)),
                    b.qm, b.sv, 128),
                StatusCode::kInvalidShape, "residual");
}

TEST(BadInput, AllreduceReferencesCheckBeforeAllocating) {
  std::vector<float> a(4), c(4), out(4);
  const index_t huge = kTwoTo(40);
  expectRefused(reference::allreduceSum<float>({a.data(), c.data()}, huge, kTwoTo(20), kTwoTo(20), out.data(),
                                               kTwoTo(20)),
                StatusCode::kInvalidShape, "partials");
  expectRefused(reference::allreduceSum<float>({a.data(), c.data()}, 2, 2, 2, out.data(), kTwoTo(60)),
                StatusCode::kInvalidShape, "out");
  // The fused reference sized its M x K sum before any check: with these
  // extents it allocated 2^60 elements and died. Now the partials are
  // checked first (their span names them), then the epilogue's arguments.
  GroupQuantBuffers b;
  std::vector<float> w(128, 1.0f);
  const auto hugeScale = ScaleView<float, RowMajor>::fromValidated(b.s.data(), huge, 1, RowMajor{1});
  const Fp8Matrix<E4M3FN> hugeQ{b.q.data(), huge, 128, 128};
  expectRefused(reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>(
                    {b.x.data(), b.x.data()}, RmsNormQuantInput<float>::matrix(nullptr, huge, 128, 128, w.data()),
                    hugeQ, hugeScale, 128),
                StatusCode::kInvalidShape, "partials");
  // A null first partial is named as such, not as the epilogue's x.
  expectRefused(reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>(
                    {nullptr, b.x.data()}, RmsNormQuantInput<float>::matrix(nullptr, 2, 128, 128, w.data()), b.qm,
                    b.sv, 128),
                StatusCode::kNullPointer, "partials");
  const Status nullPartial = reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>(
      {b.x.data(), nullptr}, RmsNormQuantInput<float>::matrix(nullptr, 2, 128, 128, w.data()), b.qm, b.sv, 128);
  expectRefused(nullPartial, StatusCode::kNullPointer, "partials");
  // The shared partials check names the fused call, not the sum inside it.
  EXPECT_STREQ(nullPartial.function(), "reference::allreduceRmsNormQuant") << nullPartial.message();
  expectRefused(reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>(
                    {}, RmsNormQuantInput<float>::matrix(nullptr, 2, 128, 128, w.data()), b.qm, b.sv, 128),
                StatusCode::kInvalidValue, "partials");
  // A valid call still runs: two ranks of ones sum to twos.
  const Status ok = reference::allreduceRmsNormQuant<E4M3FN, ScaleFp32>(
      {b.x.data(), b.x.data()}, RmsNormQuantInput<float>::matrix(nullptr, 2, 128, 128, w.data()), b.qm, b.sv, 128);
  ASSERT_TRUE(ok.isOk()) << ok.message();
  EXPECT_GT(b.s[0], 0.0f);
}

TEST(BadInput, MaterializeHostRefusesAnUnaddressableDestination) {
  std::vector<float> src(4 * 2), dst(8);
  const auto v = rowMajorView(src.data(), 4, 2).value();
  expectRefused(materializeHost(v, dst.data(), kTwoTo(60)).status(), StatusCode::kInvalidShape, "ld");
  alignas(4) unsigned char bytes[64] = {};
  expectRefused(materializeHost(v, reinterpret_cast<float*>(bytes + 2), 4).status(), StatusCode::kMisaligned, "dst");
  // And a good call still relayouts: dst(m, g) = src(m, g).
  for (int i = 0; i < 8; ++i) src[i] = static_cast<float>(i);
  const auto out = materializeHost(v, dst.data(), 4).value();
  for (index_t m = 0; m < 4; ++m)
    for (index_t g = 0; g < 2; ++g) EXPECT_EQ(out(m, g), src[m * 2 + g]);
}

}  // namespace
}  // namespace fp8scale
