// fp8scale: the two 8-bit float formats of LLM inference, and conversions.
//
//   E4M3FN   (OCP 8-bit float spec, "fn" = finite + NaN): bias 7, max 448
//            (0x7E), NaN 0x7F / 0xFF, has -0 (0x80), no infinities.
//            NVIDIA sm_89+ and AMD gfx950 convert to it in hardware.
//   E4M3FNUZ (Graphcore / AMD MI300 "fnuz" = finite, NaN, unsigned zero):
//            bias 8, max 240 (0x7F), 0x80 is the only NaN, no -0, no
//            infinities. AMD gfx940/941/942 convert to it in hardware.
//
// Conversion from fp32 everywhere in this library: round to nearest, ties to
// even; finite values beyond the format saturate to +-max; +-inf saturate to
// +-max (the `.satfinite` behaviour of cvt.rn.satfinite.e4m3x2.f32); NaN maps
// to the format's NaN. encode() is the bit-exact software version (host and
// devices without the instruction); cvtPack2() uses the hardware instruction
// where the device pass has it. tests/data holds the H200's own outputs for
// every bf16 pattern and for the rounding boundaries, and CI checks encode()
// against them.
#pragma once

#include <cstdint>

#include "platform.hpp"

namespace fp8scale {

/// OCP E4M3FN. Constants are the format's; `kMaxCode` is the largest finite
/// magnitude's bit pattern.
struct E4M3FN {
  static constexpr const char* kName = "e4m3fn";
  static constexpr int kExponentBias = 7;
  static constexpr float kMax = 448.0f;
  static constexpr std::uint8_t kMaxCode = 0x7E;
  static constexpr std::uint8_t kNaN = 0x7F;
  static constexpr bool kHasNegativeZero = true;
};

/// E4M3FNUZ as used by AMD gfx942 (MI300). 0x80 is NaN, so there is no -0.
struct E4M3FNUZ {
  static constexpr const char* kName = "e4m3fnuz";
  static constexpr int kExponentBias = 8;
  static constexpr float kMax = 240.0f;
  static constexpr std::uint8_t kMaxCode = 0x7F;
  static constexpr std::uint8_t kNaN = 0x80;
  static constexpr bool kHasNegativeZero = false;
};

/// Runtime tag for launchers that dispatch to the format types above.
enum class Fp8Format : std::uint8_t { kE4M3FN, kE4M3FNUZ };

/// Finite maximum of a runtime format (448 or 240).
FP8SCALE_HOST_DEVICE constexpr float fp8Max(Fp8Format f) {
  return f == Fp8Format::kE4M3FN ? E4M3FN::kMax : E4M3FNUZ::kMax;
}

/// Bit-exact software conversion fp32 -> fp8 (round to nearest even,
/// saturating, NaN -> kNaN). Works on the host and on any device.
template <class Format>
FP8SCALE_HOST_DEVICE inline std::uint8_t encode(float x) {
  constexpr int kMinExp = 1 - Format::kExponentBias;  // exponent of the smallest normal
  const std::uint32_t bits = bitCast<std::uint32_t>(x);
  const std::uint32_t sign = bits >> 31;
  const std::uint32_t absBits = bits & 0x7FFFFFFFu;

  if (absBits > 0x7F800000u) return Format::kNaN;

  std::uint32_t code;
  if (absBits >= 0x7F800000u) {
    code = Format::kMaxCode;  // +-inf saturates (satfinite)
  } else if (absBits < 0x00800000u) {
    code = 0;  // fp32 zero or subnormal: far below half the smallest fp8 subnormal
  } else {
    const int exp = static_cast<int>(absBits >> 23) - 127;
    if (exp > 9) {
      code = Format::kMaxCode;  // >= 1024: beyond either format's range
    } else {
      // Count units of the fp8 ulp at the target exponent (subnormals share
      // the smallest normal exponent), rounding to nearest even.
      const int targetExp = exp < kMinExp ? kMinExp : exp;
      const std::uint32_t significand = (absBits & 0x007FFFFFu) | 0x00800000u;  // 24 bits
      const int shift = 20 + (targetExp - exp);  // drop to 3 fraction bits
      std::uint32_t units;
      if (shift >= 25) {
        units = 0;  // below half of the smallest subnormal
      } else {
        units = significand >> shift;
        const std::uint32_t rest = significand & ((1u << shift) - 1u);
        const std::uint32_t half = 1u << (shift - 1);
        if (rest > half || (rest == half && (units & 1u))) ++units;
      }
      // units in [0, 16]: 8..15 are normal significands, 16 carries into the
      // next exponent, which the addition below handles.
      code = (static_cast<std::uint32_t>(targetExp - kMinExp) << 3) + units;
      if (code > Format::kMaxCode) code = Format::kMaxCode;
    }
  }
  if (!Format::kHasNegativeZero && code == 0) return 0;
  return static_cast<std::uint8_t>(code | (sign << 7));
}

/// fp8 -> fp32, exact (every fp8 value is representable in fp32).
template <class Format>
FP8SCALE_HOST_DEVICE inline float decode(std::uint8_t b) {
  if (Format::kHasNegativeZero) {
    if ((b & 0x7F) == 0x7F) return bitCast<float>(0x7FC00000u | (std::uint32_t(b >> 7) << 31));
  } else if (b == 0x80) {
    return bitCast<float>(0x7FC00000u);
  }
  const std::uint32_t sign = b >> 7;
  const std::uint32_t e = (b >> 3) & 0xF;
  const std::uint32_t m = b & 0x7;
  float magnitude;
  if (e == 0) {
    // m * 2^(1 - bias - 3), built from bits: exact.
    magnitude = static_cast<float>(m) *
                bitCast<float>(static_cast<std::uint32_t>(127 + 1 - Format::kExponentBias - 3) << 23);
  } else {
    magnitude = bitCast<float>(((e - Format::kExponentBias + 127) << 23) | (m << 20));
  }
  return sign ? -magnitude : magnitude;
}

/// Two fp8 bytes packed little-endian: element 0 in bits 0..7.
struct Fp8x2 {
  std::uint16_t bits;
};

#if defined(FP8SCALE_HAS_DEVICE)
/// Device conversion of two floats: (lo, hi) -> bytes (0, 1). Uses the hardware
/// instruction when the device pass has one for `Format` (PTX
/// cvt.rn.satfinite.e4m3x2.f32; AMDGCN v_cvt_pk_fp8_f32), else encode().
/// Bit-identical to encode<Format>() on every input.
template <class Format>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE Fp8x2 cvtPack2(float lo, float hi) {
#if defined(FP8SCALE_HW_CVT_PTX)
  if constexpr (Format::kHasNegativeZero) {
    std::uint16_t r;
    // The first source lands in the upper byte.
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return Fp8x2{r};
  }
#endif
#if defined(FP8SCALE_HW_CVT_AMDGCN)
  if constexpr ((Format::kHasNegativeZero && FP8SCALE_HW_CVT_E4M3FN) ||
                (!Format::kHasNegativeZero && FP8SCALE_HW_CVT_E4M3FNUZ)) {
    // The instruction rounds to nearest even but does not saturate without the
    // clamp modifier, which the builtin cannot set: clamp finite values first.
    // The select keeps NaN a NaN (fminf/fmaxf alone would turn it into max).
    const float m = Format::kMax;
    const float l = (lo != lo) ? lo : __builtin_fminf(__builtin_fmaxf(lo, -m), m);
    const float h = (hi != hi) ? hi : __builtin_fminf(__builtin_fmaxf(hi, -m), m);
    const int packed = __builtin_amdgcn_cvt_pk_fp8_f32(l, h, 0, false);
    return Fp8x2{static_cast<std::uint16_t>(packed & 0xFFFF)};
  }
#endif
  return Fp8x2{static_cast<std::uint16_t>(encode<Format>(lo) |
                                          (std::uint16_t(encode<Format>(hi)) << 8))};
}
#endif

}  // namespace fp8scale
