// Helpers for the device tests: error checks, a device buffer, and a fixture
// that skips (not fails) on a machine without a GPU, so CI can build and run
// the binary while only a GPU machine executes the kernels. One source for
// both builds: every runtime call goes through fp8scale::runtime
// (platform.hpp), which is the CUDA runtime under nvcc and HIP under clang.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "fp8scale/layouts.hpp"
#include "fp8scale/platform.hpp"

namespace fp8scale::test {

#define FP8SCALE_DEVICE_CHECK(call)                                                    \
  do {                                                                                 \
    const ::fp8scale::DeviceError e_ = (call);                                         \
    ASSERT_EQ(e_, ::fp8scale::kDeviceSuccess) << #call << ": " << ::fp8scale::deviceErrorString(e_); \
  } while (0)

/// The GPU this build runs on, in the words of the skip messages.
#if defined(FP8SCALE_PLATFORM_HIP)
constexpr const char* kGpuKind = "AMD GPU";
#else
constexpr const char* kGpuKind = "CUDA device";
#endif

/// Whether the runtime sees a GPU.
inline bool runtimeSeesDevice() {
  int n = 0;
  const bool any = runtime::getDeviceCount(&n) == kDeviceSuccess && n > 0;
  (void)deviceLastError();  // a failed query leaves an error the next check would read
  return any;
}

/// Whether the device tests run: a GPU is there and this build may use it
/// (a HIP build without ROCm's device libraries, FP8SCALE_HIP_NOGPULIB, links
/// stand-ins that are not meant for a GPU, and never uses one).
inline bool hasDevice() {
#if defined(FP8SCALE_HIP_NO_DEVICE_LIBS)
  return false;
#else
  return runtimeSeesDevice();
#endif
}

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(FP8SCALE_HIP_NO_DEVICE_LIBS)
    GTEST_SKIP() << "no " << kGpuKind << " used: built without ROCm's device libraries (FP8SCALE_HIP_NOGPULIB)";
#else
    if (!hasDevice()) GTEST_SKIP() << "no " << kGpuKind << " on this machine";
#endif
  }
};

/// Owning device allocation of n elements of T.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    if (n_ > 0 && runtime::malloc(&p, n_ * sizeof(T)) == kDeviceSuccess) ptr_ = static_cast<T*>(p);
  }
  ~DeviceBuffer() {
    if (ptr_) (void)runtime::free(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) {
    o.ptr_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }

  void upload(const std::vector<T>& h) const {
    ASSERT_EQ(h.size(), n_);
    if (n_) FP8SCALE_DEVICE_CHECK(runtime::memcpy(ptr_, h.data(), n_ * sizeof(T), runtime::Copy::HostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) {
      const DeviceError e = runtime::memcpy(h.data(), ptr_, n_ * sizeof(T), runtime::Copy::DeviceToHost);
      EXPECT_EQ(e, kDeviceSuccess) << deviceErrorString(e);
    }
    return h;
  }
  /// Fills every byte with `byte` (garbage the kernel must overwrite or leave)
  /// and waits for it: a memset does not block the host, and kernels on a
  /// non-blocking stream would not wait for it either.
  void poison(unsigned char byte) const {
    if (n_) FP8SCALE_DEVICE_CHECK(runtime::memset(ptr_, byte, n_ * sizeof(T)));
    FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  }

 private:
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

/// The UE8M0 exponent layouts, for typed tests.
using ExponentLayoutTypes = ::testing::Types<PackedUe8m0, Swizzled128x4>;

/// The consumer's own layout of (M, G) exponents: ld = align(M, 4) words, or
/// the 128 x 4 tiles.
template <class Layout>
Layout exponentLayout(index_t M, index_t G) {
  if constexpr (std::is_same<Layout, PackedUe8m0>::value) return PackedUe8m0{alignUp(M, 4)};
  else return Swizzled128x4::forCols(G);
}

}  // namespace fp8scale::test
