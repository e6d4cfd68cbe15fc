// fp8scale: 16-byte vector loads and stores between memory and fp32 registers.
// Producers move every byte through these, so the access width is decided in
// one place: one 128-bit transaction per call (LDG.128 / global_load_dwordx4),
// or 64-bit for the half-vector slices of small grids (Bytes8).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../platform.hpp"

namespace fp8scale {
namespace detail {

/// 16 raw bytes, aligned as a 128-bit access.
struct alignas(16) Bytes16 {
  std::uint32_t w[4];
};

/// 8 raw bytes, aligned as a 64-bit access: half a vector.
struct alignas(8) Bytes8 {
  std::uint32_t w[2];
};

#if defined(FP8SCALE_HAS_DEVICE)

/// Loads the raw bytes of one Bytes16 (default) or Bytes8 at an address
/// aligned to its size (a load that a producer issues early and converts
/// later: 4 or 2 registers in flight).
template <class Piece = Bytes16, class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE Piece loadRaw(const In* src) {
  static_assert(std::is_same<Piece, Bytes16>::value || std::is_same<Piece, Bytes8>::value, "a vector or half of one");
  return *reinterpret_cast<const Piece*>(src);
}

/// One bf16 / fp16 value widened to fp32: the bits of numeric.hpp toFloat.
/// On NVIDIA sm_80+ an fp16 value takes one cvt.f32.f16 (exact for every
/// finite value, subnormals included) and a select that gives a NaN the host
/// rule's bits (sign, quiet bit and payload shifted up), in place of the host
/// rule's integer rebias and subnormal subtraction.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float widen16(std::uint16_t bits) {
#if FP8SCALE_HAS_F2FP_ROUNDING
  if constexpr (std::is_same<In, Float16>::value) {
    float hw;
    asm("cvt.f32.f16 %0, %1;" : "=f"(hw) : "h"(bits));
    const std::uint32_t nan = (static_cast<std::uint32_t>(bits & 0x8000u) << 16) | 0x7F800000u |
                              (static_cast<std::uint32_t>(bits & 0x3FFu) << 13);
    return (bits & 0x7FFFu) > 0x7C00u ? bitCast<float>(nan) : hw;
  }
#endif
  return toFloat(In{bits});
}

/// Widens the inputs held in kWords 32-bit words, in memory order, to fp32
/// (kWords or 2 kWords values).
template <class In, int kWords>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void unpackWords(const std::uint32_t (&w)[kWords], float* out) {
  if constexpr (sizeof(In) == 4) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) out[i] = bitCast<float>(w[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      out[2 * i] = widen16<In>(static_cast<std::uint16_t>(w[i] & 0xFFFFu));
      out[2 * i + 1] = widen16<In>(static_cast<std::uint16_t>(w[i] >> 16));
    }
  }
}

/// Widens the kVecElems<In> inputs held in `b` to fp32.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void unpackVec(const Bytes16& b, float* out) {
  unpackWords<In>(b.w, out);
}

/// Widens the kVecElems<In> / 2 inputs held in `b` to fp32.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void unpackVec(const Bytes8& b, float* out) {
  unpackWords<In>(b.w, out);
}

/// Loads kVecElems<In> inputs from a 16-byte aligned address, widened to fp32.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void loadVec(const In* src, float* out) {
  unpackVec<In>(loadRaw(src), out);
}

/// The host rule's bf16 / fp16 bits of a NaN `v` (numeric.hpp fromFloat):
/// bf16 keeps the sign and top 7 payload bits with the quiet bit set, fp16
/// is sign | 0x7E00.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint32_t nanBits16(float v) {
  const std::uint32_t b = bitCast<std::uint32_t>(v);
  if constexpr (std::is_same<In, BFloat16>::value)
    return ((b >> 16) | 0x0040u) & 0xFFFFu;
  else
    return ((b >> 16) & 0x8000u) | 0x7E00u;
}

#if FP8SCALE_HAS_F2FP_ROUNDING
/// `lo` and `hi` as `In` (bf16 / fp16) in one word, lo in the low half: one
/// cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32 (F2FP), round to nearest even; a NaN
/// becomes the instruction's canonical NaN (packVec puts the host rule's
/// NaN bits in its place).
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint32_t roundPair(float lo, float hi) {
  std::uint32_t w;
  if constexpr (std::is_same<In, BFloat16>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
#endif

/// kVecElems<In> fp32 values as `In`, rounded to nearest even by the host
/// rule (numeric.hpp fromFloat), bit for bit, packed in memory order.
/// On NVIDIA sm_80+ a pair is one F2FP (roundPair), against about seven
/// integer instructions per value for the host rule. The instruction gives
/// every NaN the canonical pattern, where the host rule keeps a bf16 NaN's
/// sign and top 7 payload bits with the quiet bit set (fp16: sign | 0x7E00):
/// a vector holding a NaN takes a select per value that puts those bits in
/// a NaN's place. The common vector, no NaN, branches past the selects:
/// RMSNorm quant stores its residual with this right before the row's
/// reduction, where the selects' 25 more instructions a thread cost 4-7% a
/// call at M <= 512 (H100).
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE Bytes16 packVec(const float* v) {
  Bytes16 b;
  if constexpr (sizeof(In) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) b.w[i] = bitCast<std::uint32_t>(v[i]);
    return b;
  } else {
#if FP8SCALE_HAS_F2FP_ROUNDING
    bool anyNaN = false;
#pragma unroll
    for (int i = 0; i < 8; ++i) anyNaN |= v[i] != v[i];
    if (!anyNaN) {
#pragma unroll
      for (int i = 0; i < 4; ++i) b.w[i] = roundPair<In>(v[2 * i], v[2 * i + 1]);
      return b;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t w = roundPair<In>(v[2 * i], v[2 * i + 1]);
      const std::uint32_t lo = v[2 * i] != v[2 * i] ? nanBits16<In>(v[2 * i]) : (w & 0xFFFFu);
      const std::uint32_t hi = v[2 * i + 1] != v[2 * i + 1] ? nanBits16<In>(v[2 * i + 1]) : (w >> 16);
      b.w[i] = lo | (hi << 16);
    }
#else
#pragma unroll
    for (int i = 0; i < 4; ++i)
      b.w[i] = std::uint32_t(fromFloat<In>(v[2 * i]).bits) | (std::uint32_t(fromFloat<In>(v[2 * i + 1]).bits) << 16);
#endif
    return b;
  }
}

/// Stores kVecElems<In> fp32 values as `In` (round to nearest even, packVec)
/// to a 16-byte aligned address.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeVec(In* dst, const float* v) {
  *reinterpret_cast<Bytes16*>(dst) = packVec<In>(v);
}

/// Rounds kVecElems<In> fp32 values to `In` in place (still held as fp32):
/// the bits storeVec would store, widened back exactly.
template <class In>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void roundVec(float* v) {
  if constexpr (sizeof(In) != 4) unpackVec<In>(packVec<In>(v), v);
}

/// Converts kN fp32 values (kN in {4, 8, 16}) to fp8 and stores them with one
/// aligned store of kN bytes.
template <class Format, int kN>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeFp8(std::uint8_t* dst, const float* v) {
  static_assert(kN == 4 || kN == 8 || kN == 16, "fp8 stores are 4, 8 or 16 bytes");
  std::uint32_t w[kN / 4];
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    const Fp8x2 lo = cvtPack2<Format>(v[4 * i], v[4 * i + 1]);
    const Fp8x2 hi = cvtPack2<Format>(v[4 * i + 2], v[4 * i + 3]);
    w[i] = std::uint32_t(lo.bits) | (std::uint32_t(hi.bits) << 16);
  }
  if constexpr (kN == 16) {
    Bytes16 b{{w[0], w[1], w[2], w[3]}};
    *reinterpret_cast<Bytes16*>(dst) = b;
  } else if constexpr (kN == 8) {
    *reinterpret_cast<Bytes8*>(dst) = Bytes8{{w[0], w[1]}};
  } else {
    *reinterpret_cast<std::uint32_t*>(dst) = w[0];
  }
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail
}  // namespace fp8scale
