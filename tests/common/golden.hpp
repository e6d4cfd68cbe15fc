// Golden conversion data: fp32 inputs and the fp8 byte a converter gave for
// each. Shared by the generator that runs on the GPU (tests/device/
// gen_fp8_golden.cu), the host tests and the device tests.
//
// File layout (little-endian): 16-byte magic "FP8SCALE-GOLDEN\0", u32 version
// (1), u32 count, then count records of {u32 fp32 input bits, u8 output}.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp8scale/fp8.hpp"

namespace fp8scale::test {

struct GoldenRecord {
  std::uint32_t inputBits;
  std::uint8_t output;
};

inline constexpr char kGoldenMagic[16] = "FP8SCALE-GOLDEN";

inline bool writeGolden(const std::string& path, const std::vector<GoldenRecord>& records) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const std::uint32_t version = 1, count = static_cast<std::uint32_t>(records.size());
  bool ok = std::fwrite(kGoldenMagic, 1, 16, f) == 16 && std::fwrite(&version, 4, 1, f) == 1 &&
            std::fwrite(&count, 4, 1, f) == 1;
  for (const auto& r : records) {
    ok = ok && std::fwrite(&r.inputBits, 4, 1, f) == 1 && std::fwrite(&r.output, 1, 1, f) == 1;
  }
  return std::fclose(f) == 0 && ok;
}

/// Reads a golden file; returns false (and leaves `records` empty) on any
/// malformed header or short read.
inline bool readGolden(const std::string& path, std::vector<GoldenRecord>& records) {
  records.clear();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[16];
  std::uint32_t version = 0, count = 0;
  bool ok = std::fread(magic, 1, 16, f) == 16 && std::memcmp(magic, kGoldenMagic, 16) == 0 &&
            std::fread(&version, 4, 1, f) == 1 && version == 1 && std::fread(&count, 4, 1, f) == 1;
  if (ok) {
    records.resize(count);
    for (auto& r : records) ok = ok && std::fread(&r.inputBits, 4, 1, f) == 1 && std::fread(&r.output, 1, 1, f) == 1;
  }
  std::fclose(f);
  if (!ok) records.clear();
  return ok;
}

inline std::uint32_t floatBits(float v) { return bitCast<std::uint32_t>(v); }

/// Every bf16 bit pattern, widened to fp32 (65,536 inputs, in pattern order).
inline std::vector<std::uint32_t> bf16SweepInputs() {
  std::vector<std::uint32_t> in(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) in[b] = b << 16;
  return in;
}

/// fp32 inputs around every rounding boundary of both formats (each midpoint
/// between neighbouring fp8 values, and the overflow midpoint past max, with
/// +-1..4 fp32 ulps around each), the values themselves, specials, and a
/// seeded random spread over the formats' exponent range. Both signs.
inline std::vector<std::uint32_t> boundaryInputs() {
  std::vector<float> v;
  auto around = [&v](float x) {
    float lo = x, hi = x;
    v.push_back(x);
    for (int i = 0; i < 4; ++i) {
      lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
      hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
      v.push_back(lo);
      v.push_back(hi);
    }
  };
  auto formatBoundaries = [&](auto fmt) {
    using F = decltype(fmt);
    for (int c = 0; c <= F::kMaxCode; ++c) {
      const float a = decode<F>(static_cast<std::uint8_t>(c));
      around(a);
      // The next fp8 magnitude; past max, the value max + ulp would have had.
      const float b = c < F::kMaxCode ? decode<F>(static_cast<std::uint8_t>(c + 1))
                                      : a + (a - decode<F>(static_cast<std::uint8_t>(c - 1)));
      around(0.5f * (a + b));  // exact: one more significand bit than fp8 has
    }
  };
  formatBoundaries(E4M3FN{});
  formatBoundaries(E4M3FNUZ{});
  for (float x : {448.0f, 464.0f, 465.0f, 480.0f, 496.0f, 512.0f, 1024.0f, 1e4f, 1e6f, 240.0f, 248.0f, 256.0f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-30f, 1e-3f})
    around(x);
  v.push_back(std::numeric_limits<float>::infinity());
  std::vector<std::uint32_t> bits;
  for (float x : v) {
    bits.push_back(floatBits(x));
    bits.push_back(floatBits(-x));
  }
  for (std::uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) bits.push_back(nan);
  std::mt19937 rng(20261129u);  // mt19937's sequence is fixed by the standard
  for (int i = 0; i < 60000; ++i) {
    const std::uint32_t r = static_cast<std::uint32_t>(rng());
    const std::uint32_t exponent = 127u - 14u + (r % 27u);  // 2^-14 .. 2^12
    bits.push_back((r & 0x80000000u) | (exponent << 23) | (static_cast<std::uint32_t>(rng()) & 0x7FFFFFu));
  }
  return bits;
}

inline std::string goldenPath(const std::string& dir, const char* name) { return dir + "/" + name; }

/// tests/data: the FP8SCALE_TEST_DATA_DIR environment variable when set (a
/// binary run from another checkout), else the path compiled in.
inline std::string dataDir() {
  const char* env = std::getenv("FP8SCALE_TEST_DATA_DIR");
#ifdef FP8SCALE_TEST_DATA_DIR
  return env != nullptr ? env : FP8SCALE_TEST_DATA_DIR;
#else
  return env != nullptr ? env : "tests/data";
#endif
}

inline constexpr const char* kGoldenBf16File = "e4m3fn_h200_bf16.golden";
inline constexpr const char* kGoldenFp32File = "e4m3fn_h200_fp32.golden";

}  // namespace fp8scale::test
