// Programmatic dependent launch (QuantOptions::programmaticLaunch): a producer
// launched with PDL right behind the kernel that writes its input must read
// that kernel's output, not the previous iteration's, and give the same bits
// as a plain launch. Each round a copy kernel overwrites the input (and the
// residual) with new data, then the producer runs with PDL into its own output
// buffers; the rounds run back to back on one stream with no host sync. The
// copy lets its dependents launch at once and writes only ~20 us later, so a
// producer that read before its wait would see the previous round (the
// control test shows that a kernel without the wait does).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "producer_harness.cuh"

namespace fp8scale::test {
namespace {

/// The staging copy lets its PDL dependents launch at once, then holds its
/// data back for about 20 us (clock64 at ~2 GHz) before writing: a dependent
/// that read its input before griddepcontrol.wait would see the old data.
__global__ void copyWords(const std::uint32_t* src, std::uint32_t* dst, std::size_t n) {
  allowDependentLaunch();
  const long long start = clock64();
  while (clock64() - start < 40000) {
  }
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

/// Enqueues a copy of `bytes` (a multiple of 4) as a kernel, so that the next
/// PDL launch has a kernel to overlap.
void copyAsKernel(const void* src, void* dst, std::size_t bytes, Stream s) {
  copyWords<<<264, 256, 0, s>>>(static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), bytes / 4);
}

constexpr int kRounds = 4;

/// What one producer call wrote: fp8 bytes and the [G][ld] scale buffer.
struct Written {
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  std::vector<BFloat16> residual;
};

/// Runs kRounds rounds of (copy kernel(s) writing round r's input, producer)
/// with `pdl`, and returns what each round wrote. `call(round, opt, q, scale,
/// stream)` launches the producer for round r; `stage(round, stream)` enqueues
/// the copy kernels.
template <class Stage, class Call>
std::vector<Written> runRounds(bool pdl, index_t M, index_t cols, Stage&& stage, Call&& call,
                               const BFloat16* residual = nullptr) {
  const index_t G = cols / 128, ld = alignUp(M, 4);
  std::vector<DeviceBuffer<std::uint8_t>> dq;
  std::vector<DeviceBuffer<float>> ds;
  for (int r = 0; r < kRounds; ++r) {
    dq.emplace_back(static_cast<std::size_t>(M * cols));
    ds.emplace_back(static_cast<std::size_t>(G * ld));
    dq.back().poison(0x7F);
    ds.back().poison(0xC3);
  }
  std::vector<Written> out(kRounds);
  Stream stream;
  EXPECT_EQ(runtime::streamCreate(&stream, true), kDeviceSuccess);
  QuantOptions opt;
  opt.programmaticLaunch = pdl;
  for (int r = 0; r < kRounds; ++r) {
    stage(r, stream);
    const auto scale = colMajorView(ds[r].get(), M, G, ld).value();
    const Status st = call(r, opt, Fp8Matrix<E4M3FN>{dq[r].get(), M, cols, cols}, scale, stream);
    EXPECT_TRUE(st) << st.message();
    if (residual != nullptr) {  // the residual is updated in place: keep round r's
      out[r].residual.resize(static_cast<std::size_t>(M * cols));
      EXPECT_EQ(runtime::memcpyAsync(out[r].residual.data(), residual, out[r].residual.size() * 2, runtime::Copy::DeviceToHost,
                                stream),
                kDeviceSuccess);
    }
  }
  EXPECT_EQ(runtime::streamSynchronize(stream), kDeviceSuccess);
  EXPECT_EQ(runtime::streamDestroy(stream), kDeviceSuccess);
  for (int r = 0; r < kRounds; ++r) {
    out[r].q = dq[r].download();
    out[r].s = ds[r].download();
  }
  return out;
}

void expectSameBits(const std::vector<Written>& pdl, const std::vector<Written>& plain) {
  ASSERT_EQ(pdl.size(), plain.size());
  for (std::size_t r = 0; r < pdl.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "round " << r);
    EXPECT_EQ(pdl[r].q, plain[r].q);
    ASSERT_EQ(pdl[r].s.size(), plain[r].s.size());
    EXPECT_EQ(std::memcmp(pdl[r].s.data(), plain[r].s.data(), pdl[r].s.size() * 4), 0);
    ASSERT_EQ(pdl[r].residual.size(), plain[r].residual.size());
    EXPECT_EQ(std::memcmp(pdl[r].residual.data(), plain[r].residual.data(), pdl[r].residual.size() * 2), 0);
  }
  // Rounds differ from each other, so reading a stale input would show.
  if (pdl.size() > 1) EXPECT_NE(pdl[0].q, pdl[1].q);
}

/// kRounds different inputs of `elems` bf16 each, staged on the device.
DeviceBuffer<BFloat16> makeStaging(index_t rows, index_t cols, unsigned seed) {
  std::vector<BFloat16> all;
  for (int r = 0; r < kRounds; ++r) {
    const auto x = makeActivations<BFloat16>(rows, cols, cols, seed + 101u * r, 8.0f);
    all.insert(all.end(), x.begin(), x.end());
  }
  DeviceBuffer<BFloat16> d(all.size());
  d.upload(all);
  return d;
}

class ProgrammaticLaunchDevice : public DeviceTest {};

/// The control: a PDL-launched kernel that reads its input WITHOUT
/// griddepcontrol.wait, behind the delayed staging copy.
__global__ void readWithoutWait(const std::uint32_t* src, std::uint32_t* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// The harness can fail: without the wait, a PDL launch behind the staging
// copy reads the data from before the copy. (Under compute-sanitizer the
// kernels are serialized and this control fails by design: leave it out of
// sanitizer runs.)
TEST_F(ProgrammaticLaunchDevice, ControlAKernelWithoutTheWaitReadsStaleInput) {
#if defined(FP8SCALE_PLATFORM_HIP)
  GTEST_SKIP() << "NVIDIA only: HIP has no programmatic launch, the flag is a plain launch there";
#endif
  const std::size_t n = 1 << 16;
  std::vector<std::uint32_t> oldData(n, 0x11111111u), newData(n, 0x22222222u);
  DeviceBuffer<std::uint32_t> x(n), staged(n), seen(n);
  x.upload(oldData);
  staged.upload(newData);
  Stream stream;
  FP8SCALE_DEVICE_CHECK(runtime::streamCreate(&stream, true));
  // Load both kernels first: a kernel's first launch (lazy module loading)
  // does not overlap the work before it.
  copyAsKernel(staged.get(), seen.get(), 4, stream);
  FP8SCALE_DEVICE_CHECK(launchKernelPdl(true, readWithoutWait, dim3(1), dim3(32), 0, stream,
                                      static_cast<const std::uint32_t*>(staged.get()), seen.get(), std::size_t{1}));
  FP8SCALE_DEVICE_CHECK(runtime::streamSynchronize(stream));
  std::size_t stale = 0;
  for (int attempt = 0; attempt < 3 && stale == 0; ++attempt) {
    x.upload(oldData);
    copyAsKernel(staged.get(), x.get(), n * 4, stream);
    FP8SCALE_DEVICE_CHECK(launchKernelPdl(true, readWithoutWait, dim3(64), dim3(256), 0, stream,
                                        static_cast<const std::uint32_t*>(x.get()), seen.get(), n));
    FP8SCALE_DEVICE_CHECK(runtime::streamSynchronize(stream));
    for (std::uint32_t v : seen.download()) stale += v == 0x11111111u;
    std::printf("[pdl control] attempt %d: %zu of %zu words read before the staging copy wrote them\n", attempt,
                stale, n);
  }
  FP8SCALE_DEVICE_CHECK(runtime::streamDestroy(stream));
  EXPECT_GT(stale, 0u) << "the staging copy did not overlap its PDL dependent: the PDL tests below prove nothing";
}

TEST_F(ProgrammaticLaunchDevice, GroupQuantReadsThePreviousKernelsOutput) {
  for (index_t M : {1, 17, 1000}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const index_t K = 7168;
    const auto staging = makeStaging(M, K, 5u + static_cast<unsigned>(M));
    DeviceBuffer<BFloat16> x(static_cast<std::size_t>(M * K));
    auto stage = [&](int r, Stream s) {
      copyAsKernel(staging.get() + r * M * K, x.get(), static_cast<std::size_t>(M * K) * 2, s);
    };
    auto call = [&](int, const QuantOptions& opt, Fp8Matrix<E4M3FN> q, ScaleView<float, ColMajor> scale,
                    Stream s) {
      return groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(x.get(), M, K, K), q, scale, opt, s).status();
    };
    expectSameBits(runRounds(true, M, K, stage, call), runRounds(false, M, K, stage, call));
  }
}

TEST_F(ProgrammaticLaunchDevice, SiluClampQuantReadsThePreviousKernelsOutput) {
  for (index_t M : {1, 17, 1000}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const index_t I = 2048;
    const auto staging = makeStaging(M, 2 * I, 9u + static_cast<unsigned>(M));
    DeviceBuffer<BFloat16> x(static_cast<std::size_t>(M * 2 * I));
    auto stage = [&](int r, Stream s) {
      copyAsKernel(staging.get() + r * M * 2 * I, x.get(), static_cast<std::size_t>(M * 2 * I) * 2, s);
    };
    auto call = [&](int, const QuantOptions& opt, Fp8Matrix<E4M3FN> q, ScaleView<float, ColMajor> scale,
                    Stream s) {
      return siluClampQuant<E4M3FN>(SiluClampInput<BFloat16>{x.get(), M, I, 2 * I, 7.0f}, q, scale, opt, s).status();
    };
    expectSameBits(runRounds(true, M, I, stage, call), runRounds(false, M, I, stage, call));
  }
}

TEST_F(ProgrammaticLaunchDevice, RmsNormQuantReadsThePreviousKernelsOutput) {
  // Block per row, past kRowsMinRows the large-M kernel, and there also the
  // row-looping kernel launched directly (AMD's large-M kernel; on CUDA the
  // launcher takes the staged block per row).
  using Policy = RmsNormPolicy<BFloat16>;
  const std::pair<index_t, bool> cases[] = {  // (M, row loop launched directly)
      {1, false}, {17, false}, {1000, false}, {Policy::kRowsMinRows + 3, false}, {Policy::kRowsMinRows + 3, true}};
  for (const auto& c : cases) {
    const index_t M = c.first;
    const bool rowLoop = c.second;
    SCOPED_TRACE(::testing::Message() << "M=" << M << (rowLoop ? " row loop" : ""));
    const index_t K = 7168;
    const auto stagingX = makeStaging(M, K, 13u + static_cast<unsigned>(M));
    const auto stagingR = makeStaging(M, K, 17u + static_cast<unsigned>(M));
    std::vector<BFloat16> w(K);
    for (index_t k = 0; k < K; ++k) w[k] = toBFloat16(0.5f + static_cast<float>(k % 7) * 0.125f);
    DeviceBuffer<BFloat16> dw(K);
    dw.upload(w);
    DeviceBuffer<BFloat16> x(static_cast<std::size_t>(M * K)), residual(static_cast<std::size_t>(M * K));
    auto stage = [&](int r, Stream s) {
      copyAsKernel(stagingX.get() + r * M * K, x.get(), static_cast<std::size_t>(M * K) * 2, s);
      copyAsKernel(stagingR.get() + r * M * K, residual.get(), static_cast<std::size_t>(M * K) * 2, s);
    };
    auto call = [&](int, const QuantOptions& opt, Fp8Matrix<E4M3FN> q, ScaleView<float, ColMajor> scale,
                    Stream s) {
      const auto in = RmsNormQuantInput<BFloat16>::matrix(x.get(), M, K, K, dw.get()).withResidual(residual.get(), K);
      if (rowLoop)
        return detail::launchRmsNormQuantRowLoop<E4M3FN>(in, q, scale, opt, E4M3FN::kMax, s);
      return rmsNormQuant<E4M3FN>(in, q, scale, opt, s).status();
    };
    expectSameBits(runRounds(true, M, K, stage, call, residual.get()),
                   runRounds(false, M, K, stage, call, residual.get()));
  }
}

}  // namespace
}  // namespace fp8scale::test
