// ScaleView: addressing, strides and spans of every layout; the P1 -> P2
// zero-copy step; the type rules that keep row-major bytes from being read as
// transposed.
#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "fp8scale/layout_policy.hpp"
#include "fp8scale/scale_view.hpp"

namespace fp8scale {
namespace {

// ---- Layout rules at compile time -------------------------------------------

template <class, class = void>
struct CanAsColumnMajor : std::false_type {};
template <class V>
struct CanAsColumnMajor<V, std::void_t<decltype(asColumnMajor(std::declval<V>()))>> : std::true_type {};

template <class, class = void>
struct CanIndex : std::false_type {};
template <class V>
struct CanIndex<V, std::void_t<decltype(std::declval<V>()(0, 0))>> : std::true_type {};

template <class, class = void>
struct CanViewTransposedScale : std::false_type {};
template <class Q>
struct CanViewTransposedScale<Q, std::void_t<decltype(viewTransposedScale(std::declval<Q>()))>> : std::true_type {};

static_assert(std::is_trivially_copyable<ScaleView<float, RowMajor>>::value, "views go to kernels by value");
static_assert(std::is_trivially_copyable<ScaleView<float, ColMajor>>::value, "views go to kernels by value");
static_assert(!ScaleView<float, RowMajor>::kColumnMajor && ScaleView<float, ColMajor>::kColumnMajor, "");
static_assert(!ScaleView<float, TransposedContiguous>::kColumnMajor, "P1 is not a column-major view");

// P1 -> P2 is a typed step; ColMajor passes through; RowMajor cannot be re-viewed.
static_assert(std::is_same<decltype(asColumnMajor(std::declval<ScaleView<float, TransposedContiguous>>())),
                           ScaleView<float, ColMajor>>::value, "");
static_assert(std::is_same<decltype(asColumnMajor(std::declval<ScaleView<float, ColMajor>>())),
                           ScaleView<float, ColMajor>>::value, "");
static_assert(CanAsColumnMajor<ScaleView<float, TransposedContiguous>>::value, "");
static_assert(!CanAsColumnMajor<ScaleView<float, RowMajor>>::value,
              "re-viewing a row-major buffer as transposed must need an explicitly named call");
// P1's strides do not describe its bytes, so it has no element access.
static_assert(!CanIndex<ScaleView<float, TransposedContiguous>>::value, "");
static_assert(CanIndex<ScaleView<float, RowMajor>>::value && CanIndex<ScaleView<float, ColMajor>>::value, "");
// The tuple helper follows the same rules.
static_assert(CanViewTransposedScale<QuantizedTensor<E4M3FN, TransposedContiguous>>::value, "");
static_assert(CanViewTransposedScale<QuantizedTensor<E4M3FN, PerTensor>>::value, "");
static_assert(!CanViewTransposedScale<QuantizedTensor<E4M3FN, RowMajor>>::value, "");
static_assert(std::is_same<decltype(viewTransposedScale(std::declval<QuantizedTensor<E4M3FN, PerTensor>>())),
                           QuantizedTensor<E4M3FN, PerTensor>>::value,
              "a per-tensor scale passes through unchanged");

// Mappings are constexpr: offsets and strides are compile-time facts.
static_assert(RowMajor{7}.offset(2, 3) == 17 && RowMajor{7}.stride(0) == 7 && RowMajor{7}.stride(1) == 1, "");
static_assert(ColMajor{5}.offset(2, 3) == 17 && ColMajor{5}.stride(0) == 1 && ColMajor{5}.stride(1) == 5, "");
static_assert(alignUp(0, 4) == 0 && alignUp(1, 4) == 4 && alignUp(4, 4) == 4 && alignUp(17, 4) == 20, "");

// Materializing a view that is already column-major is a compile-time identity.
float gStatic[16];
constexpr auto kColView = ScaleView<float, ColMajor>::fromValidated(gStatic, 3, 4, ColMajor{4});
static_assert(materialize(kColView).data() == gStatic && materialize(kColView).ld() == 4, "");
static_assert(asColumnMajor(kColView).data() == gStatic, "");

// ---- Addressing ------------------------------------------------------------

const std::vector<index_t> kRows = {0, 1, 2, 3, 4, 5, 16, 17, 129};
const std::vector<index_t> kGroups = {1, 2, 56};

float valueAt(index_t m, index_t g) { return static_cast<float>(m * 1000 + g + 1); }

TEST(ScaleView, RowMajorAddressesRowByRow) {
  for (index_t M : kRows)
    for (index_t G : kGroups)
      for (index_t pad : {0, 3}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " ld=G+" << pad);
        std::vector<float> buf(M * (G + pad) + 1, -1.0f);
        auto v = rowMajorView(buf.data(), M, G, G + pad).value();
        EXPECT_EQ(v.rows(), M);
        EXPECT_EQ(v.cols(), G);
        EXPECT_EQ(v.ld(), G + pad);
        EXPECT_EQ(v.stride(0), G + pad);
        EXPECT_EQ(v.stride(1), 1);
        EXPECT_EQ(v.requiredSpan(), M == 0 ? 0 : (M - 1) * (G + pad) + G);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) v(m, g) = valueAt(m, g);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) ASSERT_EQ(buf[m * (G + pad) + g], valueAt(m, g));
        EXPECT_EQ(buf.back(), -1.0f);
      }
}

TEST(ScaleView, ColMajorAddressesColumnByColumnWithStridesOneAndLd) {
  for (index_t M : kRows)
    for (index_t G : kGroups)
      for (index_t ld : {M, alignUp(M, 4), M + 5}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " ld=" << ld);
        std::vector<float> buf(G * ld + 1, -1.0f);
        auto v = colMajorView(buf.data(), M, G, ld).value();
        EXPECT_EQ(v.stride(0), 1);
        EXPECT_EQ(v.stride(1), ld);
        EXPECT_EQ(v.ld(), ld);
        EXPECT_EQ(v.requiredSpan(), G * ld) << "padding slots are addressed memory, also at M == 0";
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) v(m, g) = valueAt(m, g);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) ASSERT_EQ(buf[g * ld + m], valueAt(m, g));
        for (index_t g = 0; g < G; ++g)
          for (index_t m = M; m < ld; ++m) ASSERT_EQ(buf[g * ld + m], -1.0f) << "view wrote a padding slot";
      }
}

TEST(ScaleView, DefaultLdIsTheContiguousOne) {
  std::vector<float> buf(64);
  EXPECT_EQ(rowMajorView(buf.data(), 5, 7).value().ld(), 7);
  EXPECT_EQ(colMajorView(buf.data(), 5, 7).value().ld(), 5);
}

TEST(ScaleView, ConstructionRejectsLdBelowTheExtent) {
  std::vector<float> buf(64);
  auto r = rowMajorView(buf.data(), 4, 6, 5);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(r.status().argument(), "ld");
  EXPECT_EQ(r.status().value(), 5);
  EXPECT_EQ(r.status().limit(), 6);
  EXPECT_EQ(r.value().data(), nullptr) << "a failed result holds an empty view";

  auto c = colMajorView(buf.data(), 5, 2, 4);
  ASSERT_FALSE(c.isOk());
  EXPECT_EQ(c.status().code(), StatusCode::kLdTooSmall);
  EXPECT_EQ(c.status().limit(), 5);
}

TEST(ScaleView, ConstructionRejectsNegativeExtentsAndNullData) {
  std::vector<float> buf(8);
  EXPECT_EQ(rowMajorView(buf.data(), -1, 2).status().code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(rowMajorView(buf.data(), -1, 2).status().argument(), "rows");
  EXPECT_STREQ(colMajorView(buf.data(), 2, -2, 2).status().argument(), "cols");
  EXPECT_EQ(colMajorView<float>(nullptr, 2, 2).status().code(), StatusCode::kNullPointer);
  // M == 0 is valid input, with or without a pointer.
  EXPECT_TRUE(colMajorView<float>(nullptr, 0, 56).isOk());
  EXPECT_TRUE(rowMajorView<float>(nullptr, 0, 56).isOk());
  // ...but at M == 0 a column-major view with ld > 0 has padding slots, which
  // producers write: a null pointer there is refused (it was accepted, and the
  // padding tile then stored through it).
  auto padded = colMajorView<float>(nullptr, 0, 56, 4);
  ASSERT_FALSE(padded.isOk());
  EXPECT_EQ(padded.status().code(), StatusCode::kNullPointer);
  EXPECT_STREQ(padded.status().argument(), "data");
  EXPECT_TRUE(colMajorView<float>(nullptr, 0, 0, 4).isOk());  // no groups, no slots
}

TEST(ScaleView, ConstViewFromMutableView) {
  std::vector<float> buf(6, 2.0f);
  ScaleView<const float, RowMajor> c = rowMajorView(buf.data(), 2, 3).value();
  EXPECT_EQ(c(1, 2), 2.0f);
  EXPECT_EQ(c.data(), buf.data());
}

TEST(ScaleView, PerTensorBroadcastsOneScale) {
  float s = 0.25f;
  auto v = perTensorView(&s, 129, 56).value();
  EXPECT_EQ(v.stride(0), 0);
  EXPECT_EQ(v.stride(1), 0);
  EXPECT_EQ(v(128, 55), 0.25f);
  EXPECT_EQ(&v(3, 4), &s);
}

// ---- P1 -> P2 -----------------------------------------------------------------

// A producer with TRANSPOSE_SCALE writes [G][M] bytes into a tensor a framework
// allocated as contiguous (M, G): P1. Reading it back as ColMajor{M} (P2) must
// equal what row-major emission followed by materialize gives.
TEST(ScaleView, P1ToP2EqualsMaterializeValueForValue) {
  for (index_t M : kRows)
    for (index_t G : kGroups) {
      SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G);
      std::vector<float> rowMajorBytes(M * G), transposedBytes(M * G), materialized(M * G, -7.0f);
      auto rm = rowMajorView(rowMajorBytes.data(), M, G).value();
      auto writer = colMajorView(transposedBytes.data(), M, G).value();
      for (index_t m = 0; m < M; ++m)
        for (index_t g = 0; g < G; ++g) rm(m, g) = writer(m, g) = valueAt(m, g);

      auto p1 = transposedContiguousView(transposedBytes.data(), M, G).value();
      EXPECT_EQ(p1.stride(0), G) << "P1 is presented with contiguous strides";
      EXPECT_EQ(p1.stride(1), 1);
      auto p2 = asColumnMajor(p1);
      EXPECT_EQ(p2.data(), transposedBytes.data()) << "P1 -> P2 copies nothing";
      EXPECT_EQ(p2.stride(0), 1);
      EXPECT_EQ(p2.stride(1), M);

      auto mat = materializeHost(rm, materialized.data(), M).value();
      for (index_t m = 0; m < M; ++m)
        for (index_t g = 0; g < G; ++g) ASSERT_EQ(p2(m, g), mat(m, g)) << "m=" << m << " g=" << g;
    }
}

// The bug class the types exist for: reading a true row-major buffer through
// the transposed re-view scrambles it as soon as M >= 2 and G >= 2.
TEST(ScaleView, ReinterpretingRowMajorBytesAsTransposedScramblesThem) {
  for (index_t M : {2, 3, 17})
    for (index_t G : {2, 56}) {
      std::vector<float> buf(M * G);
      auto rm = rowMajorView(buf.data(), M, G).value();
      for (index_t m = 0; m < M; ++m)
        for (index_t g = 0; g < G; ++g) rm(m, g) = valueAt(m, g);
      auto wrong = asColumnMajor(reinterpretAsTransposedBytes(rm).value());
      int differing = 0;
      for (index_t m = 0; m < M; ++m)
        for (index_t g = 0; g < G; ++g) differing += wrong(m, g) != valueAt(m, g);
      EXPECT_GT(differing, 0) << "M=" << M << " G=" << G;
    }
}

TEST(ScaleView, ReinterpretAsTransposedBytesNeedsAContiguousPresentation) {
  std::vector<float> buf(3 * 8);
  auto padded = rowMajorView(buf.data(), 3, 5, 8).value();
  auto r = reinterpretAsTransposedBytes(padded);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(r.status().argument(), "ld");
}

// At M == 1 (and at G == 1) both layouts are the same bytes.
TEST(ScaleView, SingleRowOrSingleGroupHasIdenticalBytesBothWays) {
  for (auto [M, G] : std::vector<std::pair<index_t, index_t>>{{1, 1}, {1, 2}, {1, 56}, {2, 1}, {17, 1}, {129, 1}}) {
    std::vector<float> a(M * G), b(M * G);
    auto rm = rowMajorView(a.data(), M, G).value();
    auto cm = colMajorView(b.data(), M, G).value();
    for (index_t m = 0; m < M; ++m)
      for (index_t g = 0; g < G; ++g) rm(m, g) = cm(m, g) = valueAt(m, g);
    EXPECT_EQ(a, b) << "M=" << M << " G=" << G;
  }
}

// ---- QuantizedTensor ---------------------------------------------------------

TEST(QuantizedTensor, ViewTransposedScaleReviewsOnlyTheScale) {
  const index_t M = 5, K = 256;
  std::vector<std::uint8_t> q(M * K, 0x11);
  std::vector<float> s(M * 2);
  QuantizedTensor<E4M3FN, TransposedContiguous> p1{{q.data(), M, K, K},
                                                   transposedContiguousView(s.data(), M, 2).value(), 128};
  auto p2 = viewTransposedScale(p1);
  static_assert(std::is_same<decltype(p2), QuantizedTensor<E4M3FN, ColMajor>>::value, "");
  EXPECT_EQ(p2.data.data, q.data());
  EXPECT_EQ(p2.data.ld, K);
  EXPECT_EQ(p2.scale.data(), s.data());
  EXPECT_EQ(p2.scale.stride(0), 1);
  EXPECT_EQ(p2.scale.stride(1), M);
  EXPECT_EQ(p2.groupSize, 128);
  // Applying it again changes nothing.
  auto again = viewTransposedScale(p2);
  EXPECT_EQ(again.scale.data(), s.data());
  EXPECT_EQ(again.scale.ld(), M);
}

TEST(QuantizedTensor, PerTensorScalePassesThroughUnchanged) {
  std::vector<std::uint8_t> q(4 * 128);
  float s = 3.0f;
  QuantizedTensor<E4M3FNUZ, PerTensor> t{{q.data(), 4, 128, 128}, perTensorView(&s, 4, 1).value(), 128};
  auto u = viewTransposedScale(t);
  EXPECT_EQ(u.scale.data(), &s);
  EXPECT_EQ(u.data.data, q.data());
  EXPECT_EQ(u.scale(3, 0), 3.0f);
}

// The mapping's padding slots, checked by counting: for each layout that owns
// its whole span (column-major fp32, the two exponent layouts), every element
// of [0, requiredSpan) is either the offset of exactly one (m, g) or exactly
// one slot of the padded rectangle's padding, never both; and the padding
// routines (zeroPadding: writeScalePadding over the columns, writeRowPadding
// over the rows) write exactly those slots. Extents: the tile and word edges
// M = 0, 1, 3, 127, 128, 129 and G = 1, 3, 4, 5, 56.
template <class Layout>
void expectPaddingPartitionsTheSpan(Layout layout, index_t rows, index_t cols) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols);
  const index_t span = layout.requiredSpan(rows, cols);
  std::vector<int> scales(static_cast<size_t>(span), 0), padding(static_cast<size_t>(span), 0);
  for (index_t m = 0; m < rows; ++m)
    for (index_t g = 0; g < cols; ++g) {
      const index_t o = layout.offset(m, g);
      ASSERT_TRUE(o >= 0 && o < span) << "(" << m << ", " << g << ") at " << o;
      ++scales[static_cast<size_t>(o)];
    }
  const detail::PaddedRect rect = layout.padded(rows, cols);
  for (index_t i = 0; i < rect.count(); ++i) {
    index_t m = 0, g = 0;
    rect.slot(i, m, g);
    const index_t o = layout.offset(m, g);
    ASSERT_TRUE(o >= 0 && o < span) << "padding slot " << i << " at " << o;
    ++padding[static_cast<size_t>(o)];
  }
  for (index_t o = 0; o < span; ++o)
    ASSERT_EQ(scales[static_cast<size_t>(o)] + padding[static_cast<size_t>(o)], 1) << "element " << o;

  using T = typename Layout::Element;
  std::vector<T> buf(static_cast<size_t>(span), T(7));
  zeroPadding(ScaleView<T, Layout>::fromValidated(buf.data(), rows, cols, layout));
  for (index_t o = 0; o < span; ++o)
    ASSERT_EQ(buf[static_cast<size_t>(o)], padding[static_cast<size_t>(o)] ? T(0) : T(7)) << "element " << o;
}

TEST(LayoutMapping, PaddingSlotsAreTheAddressedElementsThatHoldNoScale) {
  for (index_t rows : {0, 1, 3, 127, 128, 129})
    for (index_t cols : {1, 3, 4, 5, 56}) {
      expectPaddingPartitionsTheSpan(ColMajor{rows}, rows, cols);
      expectPaddingPartitionsTheSpan(ColMajor{alignUp(rows, 4)}, rows, cols);
      expectPaddingPartitionsTheSpan(ColMajor{rows + 7}, rows, cols);
      expectPaddingPartitionsTheSpan(PackedUe8m0{PackedUe8m0::minLd(rows, cols)}, rows, cols);
      expectPaddingPartitionsTheSpan(PackedUe8m0{PackedUe8m0::minLd(rows, cols) + 8}, rows, cols);
      expectPaddingPartitionsTheSpan(Swizzled128x4::forCols(cols), rows, cols);
    }
  // Hand-worked: ColMajor{4} of 3 rows and 2 groups pads row 3 of both
  // columns (elements 3 and 7); PackedUe8m0{4} of 1 row and 5 groups pads,
  // in row 0, groups 5..7 (bytes 17, 18, 19 of word 4), then rows 1..3 of
  // both word columns (bytes 4..15 and 20..31).
  const auto slot = [](auto layout, index_t rows, index_t cols, index_t i) {
    index_t m = 0, g = 0;
    layout.padded(rows, cols).slot(i, m, g);
    return layout.offset(m, g);
  };
  EXPECT_EQ(ColMajor{4}.padded(3, 2).count(), 2);
  EXPECT_EQ(slot(ColMajor{4}, 3, 2, 0), 3);
  EXPECT_EQ(slot(ColMajor{4}, 3, 2, 1), 7);
  EXPECT_EQ(PackedUe8m0{4}.padded(1, 5).count(), 32 - 5);
  EXPECT_EQ(slot(PackedUe8m0{4}, 1, 5, 0), 17);  // row 0, group 5 (byte 1 of word 4)
  EXPECT_EQ(slot(PackedUe8m0{4}, 1, 5, 3), 4);   // row 1, group 0
  EXPECT_EQ(Swizzled128x4::forCols(1).padded(1, 1).count(), 512 - 1);
  // Layouts without padding slots report none.
  EXPECT_EQ(RowMajor{9}.padded(5, 7).count(), 0);
  EXPECT_EQ(PerTensor{}.padded(5, 7).count(), 0);
  EXPECT_EQ(TransposedContiguous{}.padded(5, 7).count(), 0);
}

// A broadcast view spans one element whatever its extents: counting its
// padding must not multiply them (the fuzzer found rows * cols overflowing).
TEST(LayoutMapping, PaddingCountOfABroadcastViewOfHugeExtentsDoesNotOverflow) {
  float s = 1.0f;
  const auto v = perTensorView(&s, index_t{1} << 62, 3);
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v.value().padded().count(), 0);
  EXPECT_FALSE(v.value().hasPadding());
  EXPECT_FALSE(v.value().hasPaddingRows());
}

TEST(LayoutMapping, ZeroPaddingWritesOnlyThePaddingSlots) {
  std::vector<float> buf(3 * 8, -1.0f);
  auto v = colMajorView(buf.data(), 5, 3, 8).value();
  zeroPadding(v);
  for (index_t g = 0; g < 3; ++g)
    for (index_t m = 0; m < 8; ++m) EXPECT_EQ(buf[static_cast<size_t>(g * 8 + m)], m < 5 ? -1.0f : 0.0f);
  std::vector<float> rows(2 * 9, -1.0f);
  zeroPadding(rowMajorView(rows.data(), 2, 7, 9).value());  // the row gaps are not the view's
  for (float f : rows) EXPECT_EQ(f, -1.0f);
}

}  // namespace
}  // namespace fp8scale
