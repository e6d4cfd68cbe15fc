// Helpers for the CUDA device tests: error checks, a device buffer, and a
// fixture that skips (not fails) on a machine without a GPU, so CI can build
// and run the binary while only the H200 executes the kernels.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fp8scale::test {

#define FP8SCALE_CUDA_CHECK(call)                                                      \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);             \
  } while (0)

inline bool hasCudaDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hasCudaDevice()) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

/// Owning device allocation of n elements of T.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(&ptr_, n_ * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
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
    if (n_) FP8SCALE_CUDA_CHECK(cudaMemcpy(ptr_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) {
      const cudaError_t e = cudaMemcpy(h.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
      EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    }
    return h;
  }
  /// Fills every byte with `byte` (garbage the kernel must overwrite or leave)
  /// and waits for it: cudaMemset does not block the host, and kernels on a
  /// non-blocking stream would not wait for it either.
  void poison(unsigned char byte) const {
    if (n_) FP8SCALE_CUDA_CHECK(cudaMemset(ptr_, byte, n_ * sizeof(T)));
    FP8SCALE_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace fp8scale::test
