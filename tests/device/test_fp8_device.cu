// The device fp8 conversion (fp8scale::cvtPack2, hardware instruction on
// sm_89+) against the host encode and against the committed golden data that
// the H200 itself produced (tests/data, see gen_fp8_golden.cu).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/golden.hpp"
#include "device_test_util.cuh"
#include "fp8scale/fp8.hpp"

namespace fp8scale::test {
namespace {

template <class Format>
__global__ void convertWithLibrary(const float* in, std::uint8_t* out, int n) {
  const int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const Fp8x2 r = cvtPack2<Format>(in[i], i + 1 < n ? in[i + 1] : 0.0f);
  out[i] = static_cast<std::uint8_t>(r.bits & 0xFF);
  if (i + 1 < n) out[i + 1] = static_cast<std::uint8_t>(r.bits >> 8);
}

std::vector<GoldenRecord> loadAllGolden() {
  std::vector<GoldenRecord> all, part;
  for (const char* name : {kGoldenBf16File, kGoldenFp32File}) {
    EXPECT_TRUE(readGolden(goldenPath(dataDir(), name), part)) << "missing golden file " << name;
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

template <class Format>
std::vector<std::uint8_t> convertOnDevice(const std::vector<GoldenRecord>& records) {
  const int n = static_cast<int>(records.size());
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = bitCast<float>(records[i].inputBits);
  DeviceBuffer<float> dIn(n);
  DeviceBuffer<std::uint8_t> dOut(n);
  dIn.upload(in);
  dOut.poison(0x5A);
  convertWithLibrary<Format><<<(n / 2 + 255) / 256 + 1, 256>>>(dIn.get(), dOut.get(), n);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dOut.download();
}

class Fp8Device : public DeviceTest {};

TEST_F(Fp8Device, E4M3FNDeviceConversionEqualsHardwareGoldenAndHostEncode) {
  const auto records = loadAllGolden();
  ASSERT_EQ(records.size() > 65536u, true);
  const auto dev = convertOnDevice<E4M3FN>(records);
  std::size_t vsGolden = 0, vsHost = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::uint8_t host = encode<E4M3FN>(bitCast<float>(records[i].inputBits));
    if (dev[i] != records[i].output && vsGolden++ < 8)
      ADD_FAILURE() << std::hex << "input 0x" << records[i].inputBits << ": device 0x" << int(dev[i])
                    << " golden 0x" << int(records[i].output);
    if (dev[i] != host && vsHost++ < 8)
      ADD_FAILURE() << std::hex << "input 0x" << records[i].inputBits << ": device 0x" << int(dev[i])
                    << " host 0x" << int(host);
  }
  EXPECT_EQ(vsGolden, 0u);
  EXPECT_EQ(vsHost, 0u);
  std::printf("[ e4m3fn  ] %zu inputs: device == H200 golden == host encode\n", records.size());
}

TEST_F(Fp8Device, E4M3FNUZDeviceConversionEqualsHostEncode) {
  const auto records = loadAllGolden();
  const auto dev = convertOnDevice<E4M3FNUZ>(records);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::uint8_t host = encode<E4M3FNUZ>(bitCast<float>(records[i].inputBits));
    if (dev[i] != host && bad++ < 8)
      ADD_FAILURE() << std::hex << "input 0x" << records[i].inputBits << ": device 0x" << int(dev[i])
                    << " host 0x" << int(host);
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace fp8scale::test
