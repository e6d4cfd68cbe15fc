// The device fp8 conversion (fp8scale::cvtPack2, hardware instruction on
// sm_89+) against the host encode and against the committed golden data that
// the H200 itself produced (tests/data, see gen_fp8_golden.cu); the device's
// fp32 -> bf16 / fp16 rounding (detail::packVec, hardware F2FP with NaN
// lanes fixed by a select) against the host rule, fromFloat; and its bf16 /
// fp16 -> fp32 widening (detail::unpackVec) against toFloat.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../common/golden.hpp"
#include "device_test_util.cuh"
#include "fp8scale/detail/vec.hpp"
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
  EXPECT_EQ(deviceLastError(), kDeviceSuccess);
  EXPECT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
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

// packVec / roundVec on whole 16-byte vectors (8 values a thread); *hardware
// = 1 when the device pass compiled the F2FP path (FP8SCALE_HAS_F2FP_ROUNDING).
template <class In>
__global__ void packWithLibrary(const float* in, std::uint32_t* packed, float* rounded, int vecs, int* hardware) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
#if FP8SCALE_HAS_F2FP_ROUNDING
  if (v == 0) *hardware = 1;
#else
  (void)hardware;
#endif
  if (v >= vecs) return;
  float x[8];
  for (int j = 0; j < 8; ++j) x[j] = in[8 * v + j];
  const detail::Bytes16 b = detail::packVec<In>(x);
  for (int i = 0; i < 4; ++i) packed[4 * v + i] = b.w[i];
  detail::roundVec<In>(x);
  for (int j = 0; j < 8; ++j) rounded[8 * v + j] = x[j];
}

// fp32 inputs that exercise both 16-bit roundings: every 16-bit pattern as
// the top half with low halves below, at and above the bf16 tie (this covers
// zeros, subnormals, overflow to inf, inf and NaNs with sign and payload);
// every finite fp16 value with the fp32 values half an fp16 step above it
// (a tie; above the largest finite value, 65520, the overflow boundary) and
// one fp32 ulp either side of that. Shuffled with a fixed seed so that
// NaNs share vectors with ordinary values (their lanes take the select)
// while most vectors hold none.
std::vector<float> roundingInputs() {
  std::vector<std::uint32_t> bits;
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) bits.push_back(hi << 16 | lo);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = toFloat(Float16{static_cast<std::uint16_t>(h)});
    if (std::isnan(a) || std::isinf(a)) continue;
    // Half the step from a to the next fp16 away from zero; past the largest
    // finite value (0x7BFF) the step below it, which puts the tie at 65520.
    const bool top = (h & 0x7FFFu) == 0x7BFFu;
    const float b = toFloat(Float16{static_cast<std::uint16_t>(top ? h - 1 : h + 1)});
    const float mid = top ? a + (a - b) / 2.0f : (a + b) / 2.0f;  // exact: fp16 steps are far coarser
    for (float f : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2.0f * mid)})
      bits.push_back(bitCast<std::uint32_t>(f));
  }
  std::mt19937 rng(2026);
  std::shuffle(bits.begin(), bits.end(), rng);
  while (bits.size() % 8 != 0) bits.push_back(0u);
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = bitCast<float>(bits[i]);
  return out;
}

template <class In>
void checkDeviceRounding() {
  const std::vector<float> in = roundingInputs();
  const int vecs = static_cast<int>(in.size() / 8);
  DeviceBuffer<float> dIn(in.size()), dRounded(in.size());
  DeviceBuffer<std::uint32_t> dPacked(in.size() / 2);
  DeviceBuffer<int> dHardware(1);
  dIn.upload(in);
  dPacked.poison(0x5A);
  dRounded.poison(0x5A);
  dHardware.upload(std::vector<int>{0});
  packWithLibrary<In><<<(vecs + 255) / 256, 256>>>(dIn.get(), dPacked.get(), dRounded.get(), vecs, dHardware.get());
  ASSERT_EQ(deviceLastError(), kDeviceSuccess);
  ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
#if defined(FP8SCALE_PLATFORM_HIP)
  // AMD has no F2FP instruction: the rounding is the portable path's.
  EXPECT_EQ(dHardware.download()[0], 0) << "the F2FP path was compiled on AMD";
#else
  EXPECT_EQ(dHardware.download()[0], 1) << "the F2FP path was not compiled (device pass below sm_80)";
#endif
  const auto packed = dPacked.download();
  const auto rounded = dRounded.download();
  std::size_t badPacked = 0, badRounded = 0, nans = 0, nanVectors = 0;
  for (int v = 0; v < vecs; ++v) {
    bool vectorHasNaN = false;
    for (int j = 0; j < 8; ++j) {
      const std::size_t i = 8 * static_cast<std::size_t>(v) + j;
      const std::uint16_t host = fromFloat<In>(in[i]).bits;
      const std::uint16_t dev = static_cast<std::uint16_t>(packed[i / 2] >> (16 * (i % 2)));
      vectorHasNaN |= std::isnan(in[i]);
      nans += std::isnan(in[i]);
      if (dev != host && badPacked++ < 8)
        ADD_FAILURE() << std::hex << "packVec of 0x" << bitCast<std::uint32_t>(in[i]) << ": device 0x" << dev
                      << " host 0x" << host;
      const std::uint32_t hostRounded = bitCast<std::uint32_t>(toFloat(In{host}));
      if (bitCast<std::uint32_t>(rounded[i]) != hostRounded && badRounded++ < 8)
        ADD_FAILURE() << std::hex << "roundVec of 0x" << bitCast<std::uint32_t>(in[i]) << ": device 0x"
                      << bitCast<std::uint32_t>(rounded[i]) << " host 0x" << hostRounded;
    }
    nanVectors += vectorHasNaN;
  }
  EXPECT_EQ(badPacked, 0u);
  EXPECT_EQ(badRounded, 0u);
  // Vectors with and without NaNs ran: most hold none, some do; the fp16
  // overflow tie (65520) is among the inputs.
  EXPECT_GT(nanVectors, 1000u);
  EXPECT_LT(nanVectors, static_cast<std::size_t>(vecs) / 2);
  EXPECT_NE(std::find(in.begin(), in.end(), 65520.0f), in.end());
  EXPECT_NE(std::find(in.begin(), in.end(), -65520.0f), in.end());
  std::printf("[ %-7s ] %zu values (%zu NaN, in %zu of %d vectors): packVec and roundVec == host fromFloat\n",
              In::kName, in.size(), nans, nanVectors, vecs);
}

TEST_F(Fp8Device, Bf16RoundingEqualsHostRule) { checkDeviceRounding<BFloat16>(); }
TEST_F(Fp8Device, Fp16RoundingEqualsHostRule) { checkDeviceRounding<Float16>(); }

template <class In>
__global__ void widenWithLibrary(const std::uint32_t* words, float* out, int vecs) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= vecs) return;
  detail::unpackVec<In>(detail::loadRaw(words + 4 * v), out + 8 * v);
}

/// Every 16-bit pattern widened on the device (unpackVec: on NVIDIA fp16 is
/// the conversion instruction with NaNs fixed by a select) equals toFloat bit
/// for bit: signed zeros, subnormals, inf, and NaNs with every payload, the
/// signalling ones among them.
template <class In>
void checkDeviceWidening() {
  std::vector<std::uint32_t> words(0x10000 / 2);
  for (std::uint32_t i = 0; i < words.size(); ++i) words[i] = (2 * i) | ((2 * i + 1) << 16);
  const int vecs = static_cast<int>(words.size() / 4);
  DeviceBuffer<std::uint32_t> dWords(words.size());
  DeviceBuffer<float> dOut(0x10000);
  dWords.upload(words);
  dOut.poison(0x5A);
  widenWithLibrary<In><<<(vecs + 255) / 256, 256>>>(dWords.get(), dOut.get(), vecs);
  ASSERT_EQ(deviceLastError(), kDeviceSuccess);
  ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
  const auto out = dOut.download();
  std::size_t bad = 0, nans = 0;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const std::uint32_t host = bitCast<std::uint32_t>(toFloat(In{static_cast<std::uint16_t>(h)}));
    nans += std::isnan(bitCast<float>(host));
    if (bitCast<std::uint32_t>(out[h]) != host && bad++ < 8)
      ADD_FAILURE() << std::hex << "unpackVec of 0x" << h << ": device 0x" << bitCast<std::uint32_t>(out[h])
                    << " host 0x" << host;
  }
  EXPECT_EQ(bad, 0u);
  constexpr std::size_t kNaNs = std::is_same<In, Float16>::value ? 2 * 1023 : 2 * 127;  // both signs
  EXPECT_EQ(nans, kNaNs);
}

TEST_F(Fp8Device, Bf16WideningEqualsHostRule) { checkDeviceWidening<BFloat16>(); }
TEST_F(Fp8Device, Fp16WideningEqualsHostRule) { checkDeviceWidening<Float16>(); }

}  // namespace
}  // namespace fp8scale::test
