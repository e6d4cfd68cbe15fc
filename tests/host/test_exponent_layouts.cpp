// The UE8M0 exponent layouts of SM100 consumers: PackedUe8m0 (DeepGEMM's int32
// words of four exponents, MN-major, ld = align(M, 4)) and Swizzled128x4 (the
// 128 x 4 tiles of cuBLASLt VEC32_UE8M0 / CUTLASS MXFP8 scales).
//
// Three kinds of check: offsets worked out by hand on small shapes; the whole
// buffer against an oracle built the consumer's way (int32 words packed from
// bytes; the tiles cut from a padded row-major matrix in their memory order),
// independent of the layouts' offset(); and the views' validation. Type rules
// that must not compile are in compile_errors/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "fp8scale/layout_policy.hpp"
#include "fp8scale/reference/fused_quant.hpp"
#include "fp8scale/reference/group_quant.hpp"
#include "fp8scale/scale_view.hpp"

namespace fp8scale {
namespace {

template <class, class = void>
struct CanStride : std::false_type {};
template <class V>
struct CanStride<V, std::void_t<decltype(std::declval<V>().stride(0))>> : std::true_type {};

static_assert(std::is_trivially_copyable<ScaleView<std::uint8_t, PackedUe8m0>>::value, "views go to kernels by value");
static_assert(std::is_trivially_copyable<ScaleView<std::uint8_t, Swizzled128x4>>::value, "");
// Byte layouts have no element strides (the packed tensor's are in words).
static_assert(!CanStride<ScaleView<std::uint8_t, PackedUe8m0>>::value, "");
static_assert(!CanStride<ScaleView<std::uint8_t, Swizzled128x4>>::value, "");
static_assert(PackedUe8m0{8}.wordStride(0) == 1 && PackedUe8m0{8}.wordStride(1) == 8, "");
// Hand-worked offsets: M = 3, G = 5, ld = 4.
static_assert(PackedUe8m0{4}.offset(0, 0) == 0 && PackedUe8m0{4}.offset(0, 3) == 3, "row 0, word 0, bytes 0..3");
static_assert(PackedUe8m0{4}.offset(1, 0) == 4 && PackedUe8m0{4}.offset(2, 3) == 11, "word m of column 0");
static_assert(PackedUe8m0{4}.offset(0, 4) == 16 && PackedUe8m0{4}.offset(2, 4) == 24, "column 1 starts at word ld");
// Hand-worked offsets of the tiles (G = 5: two tiles across).
static_assert(Swizzled128x4::forCols(5).colTiles == 2 && Swizzled128x4::forCols(4).colTiles == 1, "");
static_assert(Swizzled128x4{2}.offset(0, 0) == 0 && Swizzled128x4{2}.offset(0, 3) == 3, "");
static_assert(Swizzled128x4{2}.offset(1, 0) == 16 && Swizzled128x4{2}.offset(31, 0) == 496, "rows 0..31: 16 bytes apart");
static_assert(Swizzled128x4{2}.offset(32, 0) == 4 && Swizzled128x4{2}.offset(96, 2) == 14, "rows 32, 64, 96: 4 bytes in");
static_assert(Swizzled128x4{2}.offset(0, 4) == 512 && Swizzled128x4{2}.offset(127, 7) == 1023, "the second tile");
static_assert(Swizzled128x4{2}.offset(128, 0) == 1024 && Swizzled128x4{2}.offset(129, 5) == 1024 + 512 + 17, "");

// The exponent byte of 2^e is e + 127.
float pow2(int e) { return std::ldexp(1.0f, e); }

/// (M, G) fp32 UE8M0 scales, row-major, with exponents that differ per slot.
std::vector<float> scales(index_t M, index_t G) {
  std::vector<float> s(static_cast<std::size_t>(M * G));
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) s[static_cast<std::size_t>(m * G + g)] = pow2(static_cast<int>((m * 7 + g * 3) % 61) - 30);
  return s;
}
std::uint8_t expo(float s) {
  std::uint32_t b = 0;
  std::memcpy(&b, &s, 4);
  return static_cast<std::uint8_t>(b >> 23);
}

/// DeepGEMM's tensor built the consumer's way: int32 words (M, ceil(G / 4))
/// at w * ld + m, each the little-endian packing of its four exponents, zero
/// where a group or row does not exist.
std::vector<std::uint8_t> packedOracle(const std::vector<float>& s, index_t M, index_t G, index_t ld) {
  const index_t words = (G + 3) / 4;
  std::vector<std::uint32_t> w(static_cast<std::size_t>(words * ld), 0u);
  for (index_t m = 0; m < M; ++m)
    for (index_t c = 0; c < words; ++c) {
      std::uint32_t word = 0;
      for (index_t j = 0; j < 4; ++j)
        if (c * 4 + j < G) word |= std::uint32_t{expo(s[static_cast<std::size_t>(m * G + c * 4 + j)])} << (8 * j);
      w[static_cast<std::size_t>(c * ld + m)] = word;
    }
  std::vector<std::uint8_t> bytes(w.size() * 4);
  for (std::size_t i = 0; i < w.size(); ++i)
    for (int j = 0; j < 4; ++j) bytes[i * 4 + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(w[i] >> (8 * j));
  return bytes;
}

/// The tiles built the consumers' way: pad the (M, G) exponents with zeros to
/// (align(M, 128), align(G, 4)) row-major, then emit tile after tile (tiles
/// row-major), each as 32 lines of 16 bytes, line r0 holding rows r0, r0 + 32,
/// r0 + 64, r0 + 96 of the tile, 4 groups each.
std::vector<std::uint8_t> swizzledOracle(const std::vector<float>& s, index_t M, index_t G) {
  const index_t Mp = alignUp(M, 128), Gp = alignUp(G, 4);
  std::vector<std::uint8_t> padded(static_cast<std::size_t>(Mp * Gp), 0);
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) padded[static_cast<std::size_t>(m * Gp + g)] = expo(s[static_cast<std::size_t>(m * G + g)]);
  std::vector<std::uint8_t> out;
  for (index_t tr = 0; tr < Mp / 128; ++tr)
    for (index_t tc = 0; tc < Gp / 4; ++tc)
      for (index_t r0 = 0; r0 < 32; ++r0)
        for (index_t r1 = 0; r1 < 4; ++r1)
          for (index_t c = 0; c < 4; ++c)
            out.push_back(padded[static_cast<std::size_t>((tr * 128 + r1 * 32 + r0) * Gp + tc * 4 + c)]);
  return out;
}

class ExponentLayouts : public ::testing::TestWithParam<std::tuple<index_t, index_t, bool>> {};

TEST_P(ExponentLayouts, MaterializeHostEqualsTheConsumersOwnConstruction) {
  const auto [M, G, colMajorSource] = GetParam();
  const std::vector<float> s = scales(M, G);
  std::vector<float> sc(static_cast<std::size_t>(M * G));  // the same scales, column-major (ld = M)
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) sc[static_cast<std::size_t>(g * M + m)] = s[static_cast<std::size_t>(m * G + g)];
  const auto run = [&](auto dst) {
    return colMajorSource ? materializeHost(colMajorView(sc.data(), M, G).value(), dst)
                          : materializeHost(rowMajorView(s.data(), M, G).value(), dst);
  };

  const index_t ld = alignUp(M, 4);
  const std::vector<std::uint8_t> packedWant = packedOracle(s, M, G, ld);
  std::vector<std::uint8_t> packed(packedWant.size() + 16, 0xA5);  // garbage: padding must be written
  auto* p = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(packed.data()) + 15) & ~std::uintptr_t{15});
  const auto pv = packedUe8m0View(p, M, G);
  ASSERT_TRUE(pv) << pv.status().message();
  EXPECT_EQ(pv.value().ld(), ld);
  EXPECT_EQ(pv.value().requiredSpan(), static_cast<index_t>(packedWant.size()));
  ASSERT_TRUE(run(pv.value())) << run(pv.value()).message();
  EXPECT_EQ(std::vector<std::uint8_t>(p, p + packedWant.size()), packedWant);
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) ASSERT_EQ(pv.value()(m, g), expo(s[static_cast<std::size_t>(m * G + g)]));
  EXPECT_EQ(pv.value().hasPadding(), ld > M || G % 4 != 0);

  const std::vector<std::uint8_t> swzWant = swizzledOracle(s, M, G);
  std::vector<std::uint8_t> swz(swzWant.size() + 16, 0xA5);
  auto* q = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(swz.data()) + 15) & ~std::uintptr_t{15});
  const auto sv = swizzled128x4View(q, M, G);
  ASSERT_TRUE(sv) << sv.status().message();
  EXPECT_EQ(sv.value().requiredSpan(), static_cast<index_t>(swzWant.size()));
  ASSERT_TRUE(run(sv.value()));
  EXPECT_EQ(std::vector<std::uint8_t>(q, q + swzWant.size()), swzWant);
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) ASSERT_EQ(sv.value()(m, g), expo(s[static_cast<std::size_t>(m * G + g)]));
  EXPECT_EQ(sv.value().hasPadding(), M % 128 != 0 || G % 4 != 0);
  EXPECT_EQ(materialize(sv.value()).data(), q) << "already in the layout: the same view";
  EXPECT_EQ(materialize(pv.value()).data(), p);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ExponentLayouts,
                         ::testing::Combine(::testing::Values<index_t>(1, 3, 127, 129),
                                            ::testing::Values<index_t>(1, 3, 4, 5, 56), ::testing::Bool()));

/// A reference run twice, `produce(q, scale)`: into row-major UE8M0
/// scales relaid by materializeHost, and into `Layout` directly; the same
/// fp8 bytes, the same layout bytes (padding included), nothing written
/// past the span.
template <class Layout, class Produce>
void expectReferenceDirectEqualsRelaid(index_t M, index_t cols, index_t G, const Produce& produce) {
  const Layout layout = [&] {  // the consumer's: ld = align(M, 4) words, or the 128 x 4 tiles
    if constexpr (std::is_same<Layout, PackedUe8m0>::value) return PackedUe8m0{alignUp(M, 4)};
    else return Swizzled128x4::forCols(G);
  }();
  const index_t span = layout.requiredSpan(M, G);
  alignas(16) static std::uint8_t direct[1 << 16], relaid[1 << 16];
  ASSERT_LT(span, index_t{sizeof direct});
  std::memset(direct, 0xC3, sizeof direct);
  std::memset(relaid, 0x5A, sizeof relaid);
  std::vector<std::uint8_t> q1(static_cast<std::size_t>(M * cols) + 1), q2(q1.size());
  std::vector<float> rowScales(static_cast<std::size_t>(M * G) + 1);
  const auto rowView = rowMajorView(rowScales.data(), M, G).value();
  const Status row = produce(q1.data(), rowView);
  ASSERT_TRUE(row.isOk()) << row.message();
  ASSERT_TRUE(materializeHost(rowView, ScaleView<std::uint8_t, Layout>::make(relaid, M, G, layout).value()).isOk());
  const Status st = produce(q2.data(), ScaleView<std::uint8_t, Layout>::make(direct, M, G, layout).value());
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(q1, q2);
  for (index_t b = 0; b < span; ++b) ASSERT_EQ(direct[b], relaid[b]) << "byte " << b;
  EXPECT_EQ(direct[span], 0xC3) << "written past the span";
}

// The host reference writes each exponent layout directly: the same fp8
// bytes, and the same bytes of the layout (exponents and zero padding, over
// garbage) as row-major UE8M0 scales relaid by materializeHost. Groups of
// 128 (DeepGEMM) and 32 (MXFP8); a group size the consumers do not read,
// or the fp32 rule, is refused by name.
template <class Layout>
void expectDirectReferenceEqualsRowMajorPlusMaterialize(index_t M, index_t G, int group) {
  SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " group=" << group);
  const index_t K = G * group;
  std::vector<BFloat16> x(static_cast<std::size_t>(M * K));
  for (std::size_t i = 0; i < x.size(); ++i)  // magnitudes over many binades, so the exponents differ
    x[i] = toBFloat16(std::ldexp(static_cast<float>(static_cast<int>(i * 7919 % 2001) - 1000), static_cast<int>(i / 97 % 40) - 20));
  expectReferenceDirectEqualsRelaid<Layout>(M, K, G, [&](std::uint8_t* q, auto scale) {
    return reference::groupQuant<E4M3FN, ScaleUE8M0>(x.data(), M, K, K, group, Fp8Matrix<E4M3FN>{q, M, K, K}, scale);
  });
}

TEST(ExponentLayouts, ReferenceGroupQuantWritesThemDirectly) {
  for (index_t M : {0, 1, 3, 127, 128, 129})
    for (index_t G : {1, 3, 4, 5, 56})
      for (int group : {32, 128}) {
        expectDirectReferenceEqualsRowMajorPlusMaterialize<PackedUe8m0>(M, G, group);
        expectDirectReferenceEqualsRowMajorPlusMaterialize<Swizzled128x4>(M, G, group);
      }
  alignas(16) static std::uint8_t bytes[512];
  std::vector<BFloat16> x(64 * 2);
  std::vector<std::uint8_t> q(x.size());
  const auto out = packedUe8m0View(bytes, 2, 1).value();
  Status s = reference::groupQuant<E4M3FN, ScaleUE8M0>(x.data(), 2, 64, 64, 64, Fp8Matrix<E4M3FN>{q.data(), 2, 64, 64},
                                                       out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupportedGroupSize);
  EXPECT_STREQ(s.argument(), "groupSize");
  s = reference::groupQuant<E4M3FN, ScaleFp32>(x.data(), 2, 64, 64, 32,
                                               Fp8Matrix<E4M3FN>{q.data(), 2, 64, 64},
                                               packedUe8m0View(bytes, 2, 2).value());
  EXPECT_EQ(s.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(s.argument(), "rule");
}

/// bf16 values over a wide range of magnitudes, some zero.
std::vector<BFloat16> wideRangeInput(std::size_t n) {
  std::vector<BFloat16> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = toBFloat16(std::ldexp(static_cast<float>(static_cast<int>(i * 613 % 201) - 100), static_cast<int>(i / 53 % 12) - 6));
  return x;
}

// The SiLU-clamp and RMSNorm references write both exponent layouts as
// row-major UE8M0 scales relaid by materializeHost, byte for byte.
TEST(ExponentLayouts, ReferenceFusedQuantWritesThemDirectly) {
  for (index_t M : {0, 1, 3, 5, 129})
    for (index_t G : {1, 3, 4, 5})
      for (int group : {32, 128}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " group=" << group);
        const index_t K = G * group;
        const std::vector<BFloat16> x = wideRangeInput(static_cast<std::size_t>(M * 2 * K));
        const SiluClampInput<BFloat16> silu{x.data(), M, K, 2 * K, 7.0f};
        const auto siluQuant = [&](std::uint8_t* q, auto scale) {
          return reference::siluClampQuant<E4M3FN, ScaleUE8M0>(silu, Fp8Matrix<E4M3FN>{q, M, K, K}, scale, group);
        };
        expectReferenceDirectEqualsRelaid<PackedUe8m0>(M, K, G, siluQuant);
        expectReferenceDirectEqualsRelaid<Swizzled128x4>(M, K, G, siluQuant);
        const std::vector<BFloat16> weight = wideRangeInput(static_cast<std::size_t>(K) + 8);
        RmsNormQuantInput<BFloat16> norm;
        norm.x = x.data();
        norm.rows = M;
        norm.cols = K;
        norm.ldx = 2 * K;
        norm.weight = weight.data() + 8;  // 16 bytes in: not all zero at K = 32
        norm.normEps = 1e-6f;
        const auto normQuant = [&](std::uint8_t* q, auto scale) {
          return reference::rmsNormQuant<E4M3FN, ScaleUE8M0>(norm, Fp8Matrix<E4M3FN>{q, M, K, K}, scale, group);
        };
        expectReferenceDirectEqualsRelaid<PackedUe8m0>(M, K, G, normQuant);
        expectReferenceDirectEqualsRelaid<Swizzled128x4>(M, K, G, normQuant);
      }
}

TEST(ExponentLayouts, HandWorkedSmallBuffers) {
  // M = 3, G = 5 packed: 2 word columns of ld = 4 words. Exponent bytes are
  // 10 * m + g + 100 so that each byte names its slot.
  std::vector<float> s(15);
  for (int m = 0; m < 3; ++m)
    for (int g = 0; g < 5; ++g) s[static_cast<std::size_t>(m * 5 + g)] = pow2(10 * m + g + 100 - 127);
  alignas(16) std::uint8_t p[32];
  std::memset(p, 0xA5, sizeof p);
  ASSERT_TRUE(materializeHost(rowMajorView(s.data(), 3, 5).value(), packedUe8m0View(p, 3, 5).value()));
  const std::uint8_t want[32] = {100, 101, 102, 103,  110, 111, 112, 113,  120, 121, 122, 123,  0, 0, 0, 0,
                                 104, 0, 0, 0,        114, 0, 0, 0,        124, 0, 0, 0,        0, 0, 0, 0};
  EXPECT_EQ(std::vector<std::uint8_t>(p, p + 32), std::vector<std::uint8_t>(want, want + 32));
  // The first int32 word, read as the consumer reads it (little-endian).
  std::uint32_t w0 = 0;
  std::memcpy(&w0, p, 4);
  EXPECT_EQ(w0, 100u | 101u << 8 | 102u << 16 | 103u << 24);

  // M = 33, G = 1 tiled: one tile; row 32 is 4 bytes into line 0, row 1 is line 1.
  std::vector<float> t(33);
  for (int m = 0; m < 33; ++m) t[static_cast<std::size_t>(m)] = pow2(m + 1 - 127);  // exponent byte m + 1
  alignas(16) std::uint8_t q[512];
  std::memset(q, 0xA5, sizeof q);
  ASSERT_TRUE(materializeHost(rowMajorView(t.data(), 33, 1).value(), swizzled128x4View(q, 33, 1).value()));
  EXPECT_EQ(q[0], 1);    // row 0
  EXPECT_EQ(q[16], 2);   // row 1
  EXPECT_EQ(q[496], 32); // row 31
  EXPECT_EQ(q[4], 33);   // row 32
  EXPECT_EQ(q[1], 0);    // group 1 of row 0: padding
  EXPECT_EQ(q[20], 0);   // row 33: padding
  int nonzero = 0;
  for (std::uint8_t b : q) nonzero += b != 0;
  EXPECT_EQ(nonzero, 33) << "every other byte is padding, written 0";
}

TEST(ExponentLayouts, MZeroAndEmpty) {
  alignas(16) std::uint8_t buf[64];
  std::memset(buf, 0xA5, sizeof buf);
  // M == 0 with ld = 4: a word column of padding only.
  const auto pv = packedUe8m0View(buf, 0, 3, 4);
  ASSERT_TRUE(pv);
  EXPECT_EQ(pv.value().requiredSpan(), 16);
  EXPECT_TRUE(pv.value().hasPadding());
  std::vector<float> none;
  ASSERT_TRUE(materializeHost(rowMajorView(none.data(), 0, 3).value(), pv.value()));
  EXPECT_EQ(std::vector<std::uint8_t>(buf, buf + 16), std::vector<std::uint8_t>(16, 0));
  EXPECT_EQ(buf[16], 0xA5) << "nothing past the span";
  // M == 0 by default: ld = align(0, 4) = 0, nothing addressed, null data is fine.
  const auto empty = packedUe8m0View(static_cast<std::uint8_t*>(nullptr), 0, 56);
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ(empty.value().requiredSpan(), 0);
  EXPECT_FALSE(empty.value().hasPadding());
  const auto swz = swizzled128x4View(static_cast<std::uint8_t*>(nullptr), 0, 56);
  ASSERT_TRUE(swz);
  EXPECT_EQ(swz.value().requiredSpan(), 0);
}

TEST(ExponentLayouts, BadViewsNameTheArgument) {
  alignas(16) static std::uint8_t buf[4096];
  const auto expect = [](const Status& s, StatusCode code, const char* arg) {
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_STREQ(s.argument(), arg) << s.message();
  };
  expect(packedUe8m0View(buf, 5, 3, 4).status(), StatusCode::kLdTooSmall, "ld");
  expect(packedUe8m0View(buf, 5, 3, 10).status(), StatusCode::kInvalidShape, "ld");  // >= align(5, 4), not a multiple of 4
  expect(packedUe8m0View(buf, -1, 3).status(), StatusCode::kInvalidShape, "rows");
  expect(packedUe8m0View(buf, 4, -2).status(), StatusCode::kInvalidShape, "cols");
  expect(packedUe8m0View(buf + 4, 4, 3).status(), StatusCode::kMisaligned, "data");
  expect(packedUe8m0View(static_cast<std::uint8_t*>(nullptr), 4, 3).status(), StatusCode::kNullPointer, "data");
  expect(packedUe8m0View(buf, index_t{1} << 50, 3).status(), StatusCode::kInvalidShape, "rows");
  expect(packedUe8m0View(buf, INT64_MAX, 3).status(), StatusCode::kInvalidShape, "rows");
  expect(swizzled128x4View(buf, 3, INT64_MAX).status(), StatusCode::kInvalidShape, "cols");
  expect(swizzled128x4View(buf + 1, 3, 4).status(), StatusCode::kMisaligned, "data");
  expect(ScaleView<std::uint8_t, Swizzled128x4>::make(buf, 3, 5, Swizzled128x4{1}).status(), StatusCode::kInvalidShape,
         "layout");

  // materializeHost: extents, overlap, and scales that are not UE8M0.
  std::vector<float> s(12, 0.25f);
  const auto src = rowMajorView(s.data(), 3, 4).value();
  expect(materializeHost(src, packedUe8m0View(buf, 4, 4).value()), StatusCode::kInvalidShape, "dst");
  expect(materializeHost(src, swizzled128x4View(buf, 3, 5).value()), StatusCode::kInvalidShape, "dst");
  auto* alias = reinterpret_cast<std::uint8_t*>(s.data());
  if (reinterpret_cast<std::uintptr_t>(alias) % 16 == 0)
    expect(materializeHost(src, packedUe8m0View(alias, 3, 4).value()), StatusCode::kInvalidValue, "dst");
  for (float bad : {0.3f, -0.25f, 0.0f, std::ldexp(1.0f, -130), INFINITY, NAN}) {
    s[5] = bad;
    std::memset(buf, 0xA5, 64);
    const Status st = materializeHost(src, packedUe8m0View(buf, 3, 4).value());
    expect(st, StatusCode::kInvalidValue, "src");
    EXPECT_EQ(buf[0], 0xA5) << "nothing written on error";
  }
}

}  // namespace
}  // namespace fp8scale
