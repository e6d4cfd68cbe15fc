// The materialize kernel against materializeHost (the reference), for the
// contract's M list, G in {1, 2, 56}, ld = M and ld = align(M, 4), fp32 and
// packed-byte scales; padding written 0 over garbage; no-op cases return the
// source pointer and launch nothing.
#include <gtest/gtest.h>

#include <cstdint>
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
