// Writes the golden fp8 data: the H200's own cvt.rn.satfinite.e4m3x2.f32
// result for every bf16 bit pattern and for the boundary set of
// tests/common/golden.hpp. Uses CUDA's __nv_cvt_float2_to_fp8x2 (cuda_fp8.h),
// not fp8scale code, so that the data is independent of the library.
//
//   gen_fp8_golden OUT_DIR      (run on the GPU; commit OUT_DIR's two files
//                                into tests/data)
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "../common/golden.hpp"

namespace {

__global__ void hardwareConvert(const float* in, unsigned char* out, int n) {
  const int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float hi = i + 1 < n ? in[i + 1] : 0.0f;
  const __nv_fp8x2_storage_t r = __nv_cvt_float2_to_fp8x2(make_float2(in[i], hi), __NV_SATFINITE, __NV_E4M3);
  out[i] = static_cast<unsigned char>(r & 0xFF);
  if (i + 1 < n) out[i + 1] = static_cast<unsigned char>(r >> 8);
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

std::vector<fp8scale::test::GoldenRecord> convertOnDevice(const std::vector<std::uint32_t>& bits) {
  const int n = static_cast<int>(bits.size());
  float* dIn = nullptr;
  unsigned char* dOut = nullptr;
  CHECK(cudaMalloc(&dIn, n * sizeof(float)));
  CHECK(cudaMalloc(&dOut, n));
  CHECK(cudaMemcpy(dIn, bits.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  hardwareConvert<<<(n / 2 + 255) / 256 + 1, 256>>>(dIn, dOut, n);
  CHECK(cudaGetLastError());
  std::vector<unsigned char> out(n);
  CHECK(cudaMemcpy(out.data(), dOut, n, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dIn));
  CHECK(cudaFree(dOut));
  std::vector<fp8scale::test::GoldenRecord> records(n);
  for (int i = 0; i < n; ++i) records[i] = {bits[i], out[i]};
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("device: %s (sm_%d%d)\n", p.name, p.major, p.minor);
  using namespace fp8scale::test;
  const auto bf16 = convertOnDevice(bf16SweepInputs());
  const auto fp32 = convertOnDevice(boundaryInputs());
  const std::string dir = argv[1];
  if (!writeGolden(goldenPath(dir, kGoldenBf16File), bf16) || !writeGolden(goldenPath(dir, kGoldenFp32File), fp32)) {
    std::fprintf(stderr, "cannot write into %s\n", dir.c_str());
    return 1;
  }
  std::printf("wrote %zu bf16 and %zu fp32 records\n", bf16.size(), fp32.size());
  return 0;
}
