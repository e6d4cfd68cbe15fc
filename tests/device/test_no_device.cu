// The launchers on a machine without a GPU (CI): every call returns, never
// crashes. A call the shared argument checks refuse is refused with the
// same status (nothing reaches the runtime); a valid call with work to do
// fails with kDeviceError from the first runtime call (the device query or
// the launch); a valid call with nothing to launch succeeds. The pointers
// are aligned addresses that are never dereferenced on the host. With a GPU
// present these tests skip: the path they test is not reachable there
// (ctest: launchers_without_gpu).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "device_test_util.cuh"
#include "fp8scale/consumers/weight_block_quant.hpp"
#include "fp8scale/fp8scale.hpp"

namespace fp8scale {
namespace {

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::runtimeSeesDevice()) GTEST_SKIP() << "a GPU is present (" << test::kGpuKind << "): the launchers' no-device path is not reachable";
  }
};

template <class T>
T* fake(std::uintptr_t offset = 0) {
  return reinterpret_cast<T*>((std::uintptr_t{1} << 40) + offset);
}

// The launcher's status against the checks': the same refusal, or a device
// error when there is work, or ok when there is none.
void expectLauncher(const Status& launched, const Status& checked, bool work, const std::string& what) {
  if (!checked) {
    EXPECT_EQ(launched.code(), checked.code()) << what << ": " << launched.message();
    EXPECT_STREQ(launched.argument(), checked.argument()) << what << ": " << launched.message();
    EXPECT_STREQ(launched.function(), checked.function()) << what;
    return;
  }
  if (work) {
    EXPECT_EQ(launched.code(), StatusCode::kDeviceError) << what << ": " << launched.message();
  } else {
    EXPECT_TRUE(launched.isOk()) << what << ": " << launched.message();
  }
}

template <class In, class Layout>
void groupQuantCases() {
  for (const index_t M : {0, 1, 3, 1000}) {
    for (const index_t K : {0, 128, 7168}) {
      const index_t G = K / 128;
      // Column-major: ld = align(M, 4), and ld = 4 at M = 0 (padding slots
      // only, which the producers launch a padding tile for).
      const index_t ld = Layout::kColumnMajor ? (M == 0 ? 4 : alignUp(M, 4)) : G;
      const auto scale = ScaleView<float, Layout>::make(fake<float>(1 << 30), M, G, Layout{ld}).value();
      const Fp8Matrix<E4M3FN> q{fake<std::uint8_t>(1 << 29), M, K, K};
      const bool work = G > 0 && (M > 0 || scale.hasPadding());
      for (int bad = 0; bad < 4; ++bad) {
        QuantOptions opt;
        auto input = GroupQuantInput<In>::matrix(fake<const In>(), M, K, K);
        if (bad == 1) opt.fmax = 500.0f;
        if (bad == 2) opt.groupSize = 96;
        if (bad == 3) input.x = nullptr;
        float fmax = 0.0f;
        const Status checked = detail::checkGroupQuant("groupQuant", input, q, scale, opt, fmax);
        const std::string what = "groupQuant M " + std::to_string(M) + " K " + std::to_string(K) + " case " +
                                 std::to_string(bad);
        expectLauncher(groupQuant(input, q, scale, opt, Stream{}).status(), checked, work, what);

        SiluClampInput<In> silu{fake<const In>(), M, K, 2 * K, 0.0f};
        if (bad == 3) silu.x = nullptr;
        const Status siluChecked = detail::checkSiluClampQuant("siluClampQuant", silu, q, scale, opt, fmax);
        expectLauncher(siluClampQuant(silu, q, scale, opt, Stream{}).status(), siluChecked, work, "silu " + what);

        auto rms = RmsNormQuantInput<In>::matrix(fake<const In>(), M, K, K, fake<const In>(1 << 28));
        if (bad == 3) rms.x = nullptr;
        const Status rmsChecked = detail::checkRmsNormQuant("rmsNormQuant", rms, q, scale, opt, fmax);
        const Status rmsLaunched = rmsNormQuant(rms, q, scale, opt, Stream{}).status();
        // M == 0: the padding row's block when the view has padding slots.
        expectLauncher(rmsLaunched, rmsChecked, K > 0 && (M > 0 || scale.hasPadding()), "rms " + what);
      }
    }
  }
}

TEST_F(NoDevice, ProducersRefuseOrFailWithADeviceError) {
  groupQuantCases<BFloat16, RowMajor>();
  groupQuantCases<BFloat16, ColMajor>();
  groupQuantCases<float, ColMajor>();
}

TEST_F(NoDevice, MaterializeAndWeightQuantRefuseOrFailWithADeviceError) {
  const auto src = rowMajorView(fake<float>(), 3, 56).value();
  expectLauncher(materialize(src, fake<float>(1 << 30), 4, Stream{}).status(), Status::ok(), true, "materialize");
  const auto refused = materialize(src, fake<float>(1 << 30), 2, Stream{}).status();
  EXPECT_EQ(refused.code(), StatusCode::kLdTooSmall) << refused.message();
  for (const index_t N : {0, 256}) {
    const WeightQuantInput<BFloat16> w{fake<const BFloat16>(), N, 7168, 7168};
    const Fp8Matrix<E4M3FN> q{fake<std::uint8_t>(1 << 29), N, 7168, 7168};
    const auto scale = weightScaleView(fake<float>(1 << 30), N, 7168).value();
    float fmax = 0.0f;
    WeightQuantOptions opt;
    const Status checked = detail::checkWeightBlockQuant("weightBlockQuant", w, q, scale, opt, fmax, 16, 8);
    expectLauncher(weightBlockQuant(w, q, scale, opt, Stream{}).status(), checked, N > 0, "weightBlockQuant");
    opt.eps = 0.0f;
    const Status badChecked = detail::checkWeightBlockQuant("weightBlockQuant", w, q, scale, opt, fmax, 16, 8);
    ASSERT_FALSE(badChecked.isOk());
    expectLauncher(weightBlockQuant(w, q, scale, opt, Stream{}).status(), badChecked, N > 0, "weightBlockQuant eps");
  }
}

}  // namespace
}  // namespace fp8scale
