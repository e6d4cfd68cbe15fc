// The materialize kernel against materializeHost (the reference), for the
// contract's M list, G in {1, 2, 56}, ld = M and ld = align(M, 4), fp32 and
// packed-byte scales; padding written 0 over garbage; no-op cases return the
// source pointer and launch nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "device_test_util.cuh"
#include "fp8scale/layout_policy.hpp"

namespace fp8scale::test {
namespace {

const std::vector<index_t> kRows = {0, 1, 2, 3, 4, 5, 16, 17, 129};
const std::vector<index_t> kGroups = {1, 2, 56};

template <class T>
T valueAt(index_t m, index_t g) {
  if constexpr (std::is_same<T, float>::value) return 1.0f + static_cast<float>(m) * 0.5f + static_cast<float>(g) * 1000.0f;
  else return static_cast<T>((m * 7 + g * 31 + 1) % 251 + 1);  // never 0: padding is 0
}

template <class T>
class MaterializeDevice : public DeviceTest {};
using ScaleTypes = ::testing::Types<float, std::uint8_t>;
TYPED_TEST_SUITE(MaterializeDevice, ScaleTypes);

TYPED_TEST(MaterializeDevice, KernelEqualsHostReferenceIncludingPadding) {
  using T = TypeParam;
  Stream stream;
  FP8SCALE_DEVICE_CHECK(runtime::streamCreate(&stream, false));
  int cases = 0;
  for (index_t M : kRows) {
    for (index_t G : kGroups) {
      for (index_t ld : {M, alignUp(M, 4)}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << " ld=" << ld);
        std::vector<T> hSrc(M * G);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g) hSrc[m * G + g] = valueAt<T>(m, g);
        DeviceBuffer<T> dSrc(hSrc.size() + 1), dDst(G * ld + 1);
        std::vector<T> padded = hSrc;
        padded.push_back(T(0));
        dSrc.upload(padded);
        dDst.poison(0xAB);

        auto src = rowMajorView(dSrc.get(), M, G).value();
        auto r = materialize(src, dDst.get(), ld, stream);
        ASSERT_TRUE(r.isOk()) << r.status().message();
        FP8SCALE_DEVICE_CHECK(runtime::streamSynchronize(stream));

        std::vector<T> hDst(G * ld, T(0x5A));
        auto ref = materializeHost(rowMajorView(hSrc.data(), M, G).value(), hDst.data(), ld);
        ASSERT_TRUE(ref.isOk());
        const bool noop = ref.value().data() == hSrc.data();
        EXPECT_EQ(r.value().data() == dSrc.get(), noop) << "device and host disagree on the no-op";
        EXPECT_EQ(r.value().stride(0), 1);
        EXPECT_EQ(r.value().stride(1), ld);
        EXPECT_EQ(r.value().rows(), M);
        EXPECT_EQ(r.value().cols(), G);

        const auto got = noop ? dSrc.download() : dDst.download();
        const std::vector<T>& want = noop ? padded : hDst;
        for (index_t g = 0; g < G; ++g)
          for (index_t m = 0; m < ld; ++m) {
            ASSERT_EQ(got[g * ld + m], want[g * ld + m]) << "at g=" << g << " m=" << m;
            if (!noop && m >= M) ASSERT_EQ(got[g * ld + m], T(0)) << "padding slot not zeroed";
          }
        if (!noop) {
          // One element past the view stays untouched: no out-of-bounds write.
          const auto tail = dDst.download();
          unsigned char poisonByte;
          std::memcpy(&poisonByte, &tail.back(), 1);
          EXPECT_EQ(poisonByte, 0xAB) << "kernel wrote past G * ld";
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, static_cast<int>(kRows.size() * kGroups.size() * 2));
  FP8SCALE_DEVICE_CHECK(runtime::streamDestroy(stream));
}

// Row-major or column-major fp32 UE8M0 scales into the exponent layouts on
// the device: every byte of the destination's span equal to
// materializeHost's (exponent bytes and padding slots 0 over garbage), at
// the word and tile edges, and nothing written past the span.
template <class DstLayout>
class MaterializeExponentsDevice : public DeviceTest {};
TYPED_TEST_SUITE(MaterializeExponentsDevice, ExponentLayoutTypes);

TYPED_TEST(MaterializeExponentsDevice, KernelEqualsHostReferenceIncludingPadding) {
  using DstLayout = TypeParam;
  int cases = 0;
  for (index_t M : {0, 1, 3, 4, 5, 17, 127, 128, 129, 1000}) {
    for (index_t G : {1, 3, 4, 5, 56}) {
      for (bool colSrc : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "M=" << M << " G=" << G << (colSrc ? " column-major" : " row-major"));
        const index_t ldSrc = colSrc ? alignUp(M, 4) : G;
        const index_t srcSpan = colSrc ? G * ldSrc : M * G;
        std::vector<float> hSrc(static_cast<size_t>(srcSpan), 0.0f);
        for (index_t m = 0; m < M; ++m)
          for (index_t g = 0; g < G; ++g)  // 2^e, e in [-40, 20]: UE8M0-rule scales
            hSrc[static_cast<size_t>(colSrc ? g * ldSrc + m : m * G + g)] =
                std::ldexp(1.0f, static_cast<int>((m * 13 + g * 7) % 61) - 40);
        const DstLayout layout = exponentLayout<DstLayout>(M, G);
        const index_t span = layout.requiredSpan(M, G);
        DeviceBuffer<float> dSrc(hSrc.size() + 1);
        DeviceBuffer<std::uint8_t> dDst(static_cast<size_t>(span) + 16);  // a guard past the span
        dSrc.upload([&] { auto v = hSrc; v.push_back(0.0f); return v; }());
        dDst.poison(0xAB);
        auto dst = ScaleView<std::uint8_t, DstLayout>::make(dDst.get(), M, G, layout).value();
        Status st = colSrc ? materialize(colMajorView(dSrc.get(), M, G, ldSrc).value(), dst, nullptr)
                           : materialize(rowMajorView(dSrc.get(), M, G).value(), dst, nullptr);
        ASSERT_TRUE(st.isOk()) << st.message();
        FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
        // The host reference on a 16-byte aligned buffer of other garbage.
        std::vector<std::uint8_t> host(static_cast<size_t>(span) + 16, 0x5A);
        std::uint8_t* base = host.data() + (16 - reinterpret_cast<std::uintptr_t>(host.data()) % 16) % 16;
        auto ref = ScaleView<std::uint8_t, DstLayout>::make(base, M, G, layout).value();
        Status hs = colSrc ? materializeHost(colMajorView(hSrc.data(), M, G, ldSrc).value(), ref)
                           : materializeHost(rowMajorView(hSrc.data(), M, G).value(), ref);
        ASSERT_TRUE(hs.isOk()) << hs.message();
        const auto got = dDst.download();
        for (index_t b = 0; b < span; ++b)
          ASSERT_EQ(static_cast<int>(got[static_cast<size_t>(b)]), static_cast<int>(base[b])) << "byte " << b;
        EXPECT_EQ(got[static_cast<size_t>(span)], 0xAB) << "kernel wrote past the span";
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 10 * 5 * 2);
}

TEST(MaterializeExponentsChecks, ExtentsAndOverlapAreRefusedBeforeAnyLaunch) {
  alignas(16) static std::uint8_t bytes[4096];
  alignas(16) static float scales[64];
  auto dst = packedUe8m0View(bytes, 4, 8).value();
  Status s = materialize(rowMajorView(scales, 4, 7).value(), dst, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(s.argument(), "dst");
  auto overlapping = packedUe8m0View(reinterpret_cast<std::uint8_t*>(scales), 4, 8).value();
  s = materialize(rowMajorView(scales, 4, 8).value(), overlapping, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(s.argument(), "dst");
}

class MaterializeDeviceNoop : public DeviceTest {};

TEST_F(MaterializeDeviceNoop, ColumnMajorWithSameLdReturnsSourceAndLeavesDestinationUntouched) {
  const index_t M = 17, G = 56, ld = alignUp(M, 4);
  DeviceBuffer<float> src(G * ld), dst(G * ld);
  src.poison(0x11);
  dst.poison(0xCD);
  auto view = colMajorView(src.get(), M, G, ld).value();
  auto r = materialize(view, dst.get(), ld, nullptr);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value().data(), src.get());
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  for (float v : dst.download()) {
    unsigned char b;
    std::memcpy(&b, &v, 1);
    ASSERT_EQ(b, 0xCD);
  }
  // Idempotent: materializing the result again returns the same pointer.
  auto again = materialize(r.value(), dst.get(), ld, nullptr);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again.value().data(), src.get());
}

TEST_F(MaterializeDeviceNoop, RowMajorSingleRowIsReturnedAsIs) {
  DeviceBuffer<float> src(56), dst(56);
  auto r = materialize(rowMajorView(src.get(), 1, 56).value(), dst.get(), 1, nullptr);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r.value().data(), src.get());
  EXPECT_EQ(r.value().ld(), 1);
}

TEST_F(MaterializeDeviceNoop, MaterializedViewIsStableUnderRepeat) {
  const index_t M = 129, G = 56;
  DeviceBuffer<float> src(M * G), dst(G * M), other(G * M);
  src.poison(0x3F);
  auto first = materialize(rowMajorView(src.get(), M, G).value(), dst.get(), M, nullptr);
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ(first.value().data(), dst.get());
  auto second = materialize(first.value(), other.get(), M, nullptr);
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ(second.value().data(), dst.get());
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
}

TEST_F(MaterializeDeviceNoop, BadLdIsRefusedBeforeAnyLaunch) {
  DeviceBuffer<float> src(5 * 2), dst(2 * 8);
  dst.poison(0xEE);
  auto r = materialize(rowMajorView(src.get(), 5, 2).value(), dst.get(), 4, nullptr);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(r.status().argument(), "ld");
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  for (float v : dst.download()) {
    unsigned char b;
    std::memcpy(&b, &v, 1);
    ASSERT_EQ(b, 0xEE);
  }
}

}  // namespace
}  // namespace fp8scale::test
