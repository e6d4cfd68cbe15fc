// fp8scale: the 16-bit input types as plain bit containers.
//
// Producers read bf16 / fp16 activations as raw bits and widen them to fp32
// themselves, so that one source builds against CUDA's and HIP's headers alike
// and the host reference uses the very same widening.
#pragma once

#include <cstdint>
#include <type_traits>

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

/// fp32 -> fp16, round to nearest even, overflow to inf, NaN stays a NaN.
FP8SCALE_HOST_DEVICE inline Float16 toFloat16(float v) {
  const std::uint32_t b = bitCast<std::uint32_t>(v);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t abs = b & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return Float16{static_cast<std::uint16_t>(sign | 0x7E00u)};
  if (abs >= 0x477FF000u) return Float16{static_cast<std::uint16_t>(sign | 0x7C00u)};  // rounds past 65504
  if (abs < 0x38800000u) {
    // fp16 subnormal (or zero): units of 2^-24, round to nearest even.
    if (abs < 0x33000000u) return Float16{static_cast<std::uint16_t>(sign)};  // <= 2^-25: rounds to 0
    const std::uint32_t e = abs >> 23;
    const std::uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // value = sig * 2^(e - 150); units of 2^-24: sig >> (126 - e)
    std::uint32_t units = sig >> shift;
    const std::uint32_t rest = sig & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (units & 1u))) ++units;
    return Float16{static_cast<std::uint16_t>(sign | units)};
  }
  std::uint32_t r = abs + 0xFFFu + ((abs >> 13) & 1u);  // round the 13 dropped bits to even
  return Float16{static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13))};
}

/// fp32 -> In (float, BFloat16, Float16), round to nearest even.
template <class In>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE In fromFloat(float v) {
  if constexpr (sizeof(In) == 4) {
    return v;
  } else if constexpr (std::is_same<In, BFloat16>::value) {
    return toBFloat16(v);
  } else {
    return toFloat16(v);
  }
}

namespace detail {
/// Elements of `In` in one 16-byte vector (the width every producer loads
/// and the argument checks align to): 8 for bf16 / fp16, 4 for fp32.
template <class In>
constexpr int kVecElems = 16 / static_cast<int>(sizeof(In));
}  // namespace detail

}  // namespace fp8scale
