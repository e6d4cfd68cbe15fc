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
/// fp16: the exponent rebiased in place (a NaN keeps its payload, quiet or
/// not: sign | 0x7F800000 | m << 13); a subnormal m * 2^-24 renormalized by
/// one exact fp32 subtraction, whatever the denormal mode. Written as
/// selects over integer bits: HIP compiles the fp16 producers in about half
/// the time of a branch per exponent class (docs/building.md).
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float toFloat(Float16 v) {
  std::uint32_t o = (static_cast<std::uint32_t>(v.bits) & 0x7FFFu) << 13;  // exponent and mantissa in fp32's place
  const std::uint32_t e = o & 0x0F800000u;
  o += 0x38000000u;                                      // exponent bias 15 -> 127
  if (e == 0x0F800000u) {
    o += 0x38000000u;                                    // inf / NaN: exponent 255
  } else if (e == 0u) {                                  // zero / subnormal: (1 + m 2^-10) 2^-14 - 2^-14
    o = bitCast<std::uint32_t>(bitCast<float>(o + 0x00800000u) - bitCast<float>(0x38800000u));
  }
  return bitCast<float>(o | ((static_cast<std::uint32_t>(v.bits) & 0x8000u) << 16));
}

/// fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE BFloat16 toBFloat16(float v) {
  const std::uint32_t b = bitCast<std::uint32_t>(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return BFloat16{static_cast<std::uint16_t>((b >> 16) | 0x0040u)};
  const std::uint32_t rounded = b + 0x7FFFu + ((b >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(rounded >> 16)};
}

/// fp32 -> fp16, round to nearest even, overflow to inf, NaN to sign | 0x7E00.
/// Normal results round the 13 dropped bits in integer arithmetic (a carry
/// out of the mantissa steps the exponent, up to inf past 65504); fp16
/// subnormals are rounded by one fp32 addition of 0.5, which lines 2^-24 up
/// with the sum's last bit (its result is normal, so no denormal mode
/// matters). Selects, no per-case shifts: see toFloat(Float16).
FP8SCALE_HOST_DEVICE inline Float16 toFloat16(float v) {
  std::uint32_t f = bitCast<std::uint32_t>(v);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7FFFFFFFu;
  std::uint32_t o;
  if (f >= 0x47800000u) {  // >= 65536 (rounds past 65504 too), inf, NaN
    o = f > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (f < 0x38800000u) {  // below 2^-14: fp16 subnormal or zero
    o = bitCast<std::uint32_t>(bitCast<float>(f) + 0.5f) - 0x3F000000u;
  } else {  // rebias 127 -> 15 and add half an ulp (+1 when the kept last bit is odd: ties to even)
    o = (f + 0xC8000FFFu + ((f >> 13) & 1u)) >> 13;
  }
  return Float16{static_cast<std::uint16_t>(o | sign)};
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
