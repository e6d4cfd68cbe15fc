// fp8scale: the 16-bit input types as plain bit containers.
//
// Producers read bf16 / fp16 activations as raw bits and widen them to fp32
// themselves, so that one source builds against CUDA's and HIP's headers alike
// and the host reference uses the very same widening.
#pragma once

#include <cstdint>

#include "platform.hpp"

namespace fp8scale {

/// bfloat16 storage (1 sign, 8 exponent, 7 mantissa bits).
struct BFloat16 {
  std::uint16_t bits;
  static constexpr const char* kName = "bf16";
};

/// IEEE binary16 storage (1 sign, 5 exponent, 10 mantissa bits).
struct Float16 {
  std::uint16_t bits;
  static constexpr const char* kName = "fp16";
};

/// Exact widening to fp32.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float toFloat(float v) { return v; }
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float toFloat(BFloat16 v) {
  return bitCast<float>(static_cast<std::uint32_t>(v.bits) << 16);
}
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float toFloat(Float16 v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v.bits & 0x8000u) << 16;
  const std::uint32_t e = (v.bits >> 10) & 0x1Fu;
  const std::uint32_t m = v.bits & 0x3FFu;
  if (e == 0x1Fu) return bitCast<float>(sign | 0x7F800000u | (m << 13));  // inf / NaN
  if (e != 0u) return bitCast<float>(sign | ((e + 112u) << 23) | (m << 13));
  // zero or subnormal: m * 2^-24, exact in fp32
  const float mag = static_cast<float>(m) * bitCast<float>(0x33800000u);
  return sign ? -mag : mag;
}

/// fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE BFloat16 toBFloat16(float v) {
  const std::uint32_t b = bitCast<std::uint32_t>(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return BFloat16{static_cast<std::uint16_t>((b >> 16) | 0x0040u)};
  const std::uint32_t rounded = b + 0x7FFFu + ((b >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(rounded >> 16)};
}

}  // namespace fp8scale
