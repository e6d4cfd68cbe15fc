// fp8scale: the scale rules of the numeric specification (docs/numerics.md),
// identical on the host and every device.
//
// For one group of values v:
//   amax = max(max_i |v_i| ignoring NaN, eps)             (fmaxf semantics)
//   fp32 rule : s = amax / fmax                            (IEEE division, RN)
//   UE8M0 rule: s = the fp32 s rounded UP to a power of two on its bits:
//               exponent + 1 if any mantissa bit is set, exponent clamped to
//               [1, 254]; exact powers of two stay. (DeepGEMM / OCP MX
//               "UE8M0" scales; never computed through log2/exp2.)
//   inv = 1 / s (IEEE division, RN);  q = cvt(v * inv).
#pragma once

#include <cmath>
#include <cstdint>

#include "platform.hpp"

namespace fp8scale {

/// Scale stored as an fp32 value, s = amax / fmax.
struct ScaleFp32 {
  static constexpr const char* kName = "fp32";
};
/// Scale rounded up to a power of two (8-bit exponent, "UE8M0"), stored as the
/// fp32 value 2^e (see ue8m0Exponent() for the packed byte).
struct ScaleUE8M0 {
  static constexpr const char* kName = "ue8m0";
};

/// Runtime tag for launchers that dispatch to the rule types above.
enum class ScaleRule : std::uint8_t { kFp32, kUE8M0 };

/// Default floor on amax, so that an all-zero group gets a finite, non-zero scale.
constexpr float kDefaultAmaxEps = 1e-10f;

/// amax accumulation step: max(acc, |v|) with NaN ignored.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float amaxStep(float acc, float v) {
#if FP8SCALE_DEVICE_PASS
  return fmaxf(acc, fabsf(v));
#else
  return std::fmax(acc, std::fabs(v));
#endif
}

/// Rounds a positive fp32 scale up to a power of two on its bits. Exact powers
/// of two map to themselves; subnormal or zero inputs give 2^-126; inputs at or
/// above 2^127 (and inf) give 2^127. The sign bit is dropped.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float ue8m0RoundUp(float s) {
  const std::uint32_t bits = bitCast<std::uint32_t>(s);
  std::uint32_t exponent = (bits >> 23) & 0xFFu;
  if ((bits & 0x007FFFFFu) != 0u && exponent != 0xFFu) exponent += 1u;
  if (exponent < 1u) exponent = 1u;
  if (exponent > 254u) exponent = 254u;
  return bitCast<float>(exponent << 23);
}

/// The biased exponent byte of a UE8M0 scale (the packed form some GEMMs read):
/// ue8m0RoundUp(s) == 2^(ue8m0Exponent(s) - 127).
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE std::uint8_t ue8m0Exponent(float s) {
  return static_cast<std::uint8_t>(bitCast<std::uint32_t>(ue8m0RoundUp(s)) >> 23);
}

/// What a scale slot of element type T holds for scale s: the fp32 scale
/// itself (float slots), or its UE8M0 exponent byte (std::uint8_t slots of
/// the exponent layouts; s from the UE8M0 rule, where the byte is exact).
template <class T>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE T encodeScale(float s) {
  if constexpr (sizeof(T) == 1) {
    return ue8m0Exponent(s);
  } else {
    return s;
  }
}

/// IEEE round-to-nearest a / b, also under --use_fast_math on NVIDIA.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float divRn(float a, float b) {
#if FP8SCALE_CUDA_DEVICE_PASS
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

/// The group's scale from its amax (already NaN-filtered), per the rule.
template <class Rule>
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float scaleFromAmax(float amax, float fmax, float eps) {
#if FP8SCALE_DEVICE_PASS
  const float a = fmaxf(amax, eps);
#else
  const float a = std::fmax(amax, eps);
#endif
  const float s = divRn(a, fmax);
  if constexpr (std::is_same<Rule, ScaleUE8M0>::value) {
    return ue8m0RoundUp(s);
  } else {
    static_assert(std::is_same<Rule, ScaleFp32>::value, "Rule is ScaleFp32 or ScaleUE8M0");
    return s;
  }
}

/// The multiplier applied before conversion: 1 / s, IEEE round-to-nearest.
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float inverseScale(float s) { return divRn(1.0f, s); }

}  // namespace fp8scale
