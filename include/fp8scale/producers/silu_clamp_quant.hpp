// fp8scale: clamp + SiLU(gate) * up + per-group fp8 quantization, with a
// compile-time TRANSPOSE_SCALE (the MoE down-projection input site).
//
// x[M, 2I] = [gate | up]. With limit > 0: gate = min(gate, limit),
// up = clamp(up, -limit, limit) (the swiglu_limit of gpt-oss style MoE; NaN
// stays NaN, as with torch.clamp); with limit <= 0 no clamp.
// a = silu(gate) * up = gate / (1 + exp(-gate)) * up in
// fp32, quantized without rounding to bf16 first, into q[M, I] and scales
// (M, I / groupSize) through the view. Same tiled body as group quant.
#pragma once

#include <cmath>
#include <cstdint>

#include "group_quant.hpp"

namespace fp8scale {

/// The input of SiLU-clamp quant: gate(m, i) = x[m * ldx + i], up(m, i) =
/// x[m * ldx + I + i], i < I.
template <class In>
struct SiluClampInput {
  const In* x = nullptr;
  index_t rows = 0;          ///< M
  index_t intermediate = 0;  ///< I (output columns)
  index_t ldx = 0;           ///< row stride of x, >= 2 I
  float limit = 0.0f;        ///< swiglu_limit; <= 0 disables the clamp
};

/// silu(min(gate, limit)) * clamp(up, -limit, limit) in fp32 (no clamp for
/// limit <= 0). The host reference and the device kernel both call it. The
/// device pass takes the hardware exponential and a fast division (__expf:
/// 2^(x log2 e) by ex2.approx; __fdividef: x * rcp(y) on CUDA, an IEEE
/// division on HIP), the host exp and an IEEE division: the SiLU producer
/// is bound by these instructions otherwise (H200, I = 2048, M = 65536:
/// 214 us with expf and '/', 157 us with these). CUDA documents __expf
/// within 2 + floor(1.173 |x|) ulp, so silu is within about
/// (4 + 1.2 |gate|) 2^-24 relative of the host's: up to ~6e-6 for
/// |gate| near 80, far below an fp8 step (2^-3). The device tests, on
/// activation-like data with outliers, hold fp8 within one step and fp32
/// scales within 2^-19 (measured: at most 11 of 12.3 million values one
/// step apart, scales 4.2e-7); a group whose amax comes from gates far
/// below zero can exceed 2^-19 (still within the bound above).
FP8SCALE_HOST_DEVICE FP8SCALE_FORCEINLINE float siluClamp(float gate, float up, float limit) {
  // The clamp by comparisons, not fmin/fmax: a NaN gate or up stays NaN (as
  // torch.clamp keeps it), where fmin(NaN, limit) would turn it into limit.
  if (limit > 0.0f) {
    gate = gate > limit ? limit : gate;
    up = up > limit ? limit : (up < -limit ? -limit : up);
  }
#if FP8SCALE_DEVICE_PASS
  return __fdividef(gate, 1.0f + __expf(-gate)) * up;
#else
  return gate / (1.0f + std::exp(-gate)) * up;
#endif
}

namespace detail {

#if defined(FP8SCALE_HAS_DEVICE)

/// SiLU-clamp quant's input access (groupTile's Load): the gate and up
/// halves' raw bytes of a slice, then silu(gate) * up in fp32.
template <class In>
struct SiluClampLoad {
  SiluClampInput<In> in;
  template <int kElems>
  struct Raw {
    RawSlice<In, kElems> gate, up;
  };

  template <int kElems>
  FP8SCALE_DEVICE FP8SCALE_FORCEINLINE Raw<kElems> fetch(index_t m, index_t k) const {
    const In* gate = in.x + m * in.ldx + k;  // x(m, k)
    const In* up = gate + in.intermediate;   // x(m, I + k)
    return Raw<kElems>{loadSlice<In, kElems>(gate), loadSlice<In, kElems>(up)};
  }

  template <int kElems>
  FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void values(const Raw<kElems>& r, float (&v)[kElems]) const {
    float g[kElems], u[kElems];
    unpackSlice<In, kElems>(r.gate, g);
    unpackSlice<In, kElems>(r.up, u);
#pragma unroll
    for (int j = 0; j < kElems; ++j) v[j] = siluClamp(g[j], u[j], in.limit);
  }
};

/// groupTile over silu(gate) * up with kElems values a thread
/// (GroupTilePolicy: kElems, or kSiluSmallGridElems for small grids), a block
/// per row tile.
template <class In, class Format, class Rule, int kGroup, bool TRANSPOSE_SCALE, int kElems>
FP8SCALE_GLOBAL void __launch_bounds__(GroupTilePolicy<In>::kThreads)
    siluClampQuantKernel(SiluClampInput<In> in, Fp8Matrix<Format> q,
                         ScaleView<float, ScaleLayoutFor<TRANSPOSE_SCALE>> scale, float fmax, float eps,
                         int tileRows, int tileGroups, bool scalesEvictLast) {
  groupTile<Format, Rule, kGroup, kElems, /*kLoop*/ false>(SiluClampLoad<In>{in}, in.rows, in.intermediate / kGroup, q,
                                                           scale, fmax, eps, tileRows, tileGroups, scalesEvictLast);
}

/// SiLU-clamp's kernels for a rule and group size, as launchGroupTile names
/// them (GroupQuantKernelFor). SiLU-clamp always runs a block per row tile
/// (kLoops false: the looping kernel measured slower, GroupTilePolicy); its
/// small grids take GroupTilePolicy::kSiluSmallGridElems values a thread.
template <class In, class Format, bool TRANSPOSE_SCALE>
struct SiluClampQuantKernelFor {
  template <class Rule, int kGroup>
  struct Of {
    static constexpr int kSmallGridElems = GroupTilePolicy<In>::kSiluSmallGridElems;
    static constexpr bool kLoops = false;
    template <int kElems, bool kLoop>
    static auto kernel() {
      static_assert(!kLoop, "SiLU-clamp has no looping kernel");
      return &siluClampQuantKernel<In, Format, Rule, kGroup, TRANSPOSE_SCALE, kElems>;
    }
  };
};

#endif  // FP8SCALE_HAS_DEVICE

template <class Format, class In, class Layout>
Status checkSiluClampQuant(const char* fn, const SiluClampInput<In>& in, const Fp8Matrix<Format>& q,
                           const ScaleView<float, Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkProducerOptions<Format>(fn, opt, fmax); !s) return s;
  if (in.intermediate < 0)
    return Status::error(StatusCode::kInvalidShape, fn, "intermediate", "extent is negative", in.intermediate);
  if (in.ldx < 2 * in.intermediate)
    return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "row stride is smaller than 2 * I", in.ldx,
                         2 * in.intermediate);
  if (!(in.limit == in.limit)) return Status::error(StatusCode::kInvalidValue, fn, "limit", "is NaN");
  if (q.rows != in.rows || q.cols != in.intermediate)
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from (M, I)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.intermediate);
  QuantArgs a = quantArgs(in.x, in.rows, in.intermediate, in.ldx, static_cast<int>(sizeof(In)), q, scale,
                          opt.groupSize);
  a.colsName = "I";
  // The up half starts I elements in; I is a multiple of the group size (>= 32),
  // so it is as aligned as the gate half.
  return checkQuantArgs(fn, a, 16, GroupTilePolicy<In>::kElems);
}

}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// SiLU-clamp quant on `stream`: q[M, I] and scales (M, I / groupSize) in
/// `Layout` (RowMajor: TRANSPOSE_SCALE false; ColMajor: true, padding zeroed).
/// Alignment and errors as groupQuant(), plus kLdTooSmall ('ldx' < 2 I) and
/// kInvalidValue ('limit' NaN). M == 0 as groupQuant().
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> siluClampQuant(const SiluClampInput<In>& in, Fp8Matrix<Format> q,
                                                       ScaleView<float, Layout> scale, const QuantOptions& opt,
                                                       Stream stream) {
  static_assert(std::is_same<Layout, RowMajor>::value || std::is_same<Layout, ColMajor>::value,
                "producers write RowMajor or ColMajor scales");
  constexpr bool TRANSPOSE_SCALE = Layout::kColumnMajor;
  float fmax = 0.0f;
  if (Status s = detail::checkSiluClampQuant("siluClampQuant", in, q, scale, opt, fmax); !s) return s;
  return detail::runGroupTileProducer<In, detail::SiluClampQuantKernelFor<In, Format, TRANSPOSE_SCALE>::template Of>(
      "siluClampQuant", in, in.rows, in.intermediate / opt.groupSize, q, scale, opt, fmax,
      /*loopWaves: no cap, a block per row tile*/ 0, stream);
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
