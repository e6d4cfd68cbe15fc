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

#include <cstdint>

#include "../spec/silu_clamp_quant.hpp"
#include "group_quant.hpp"
#include "../detail/kernel_instances.hpp"

namespace fp8scale {

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
template <class In, class Format, class Rule, int kGroup, class Layout, int kElems, bool kPadding>
FP8SCALE_GLOBAL void __launch_bounds__(GroupTilePolicy<In>::kThreads)
    siluClampQuantKernel(SiluClampInput<In> in, Fp8Matrix<Format> q,
                         ScaleOutput<Layout> scale, float fmax, float eps,
                         int tileRows, int tileGroups, bool scalesEvictLast) {
  groupTile<Format, Rule, kGroup, kElems, /*kLoop*/ false, kPadding>(SiluClampLoad<In>{in}, in.rows,
                                                                     in.intermediate / kGroup, q, scale, fmax, eps,
                                                                     tileRows, tileGroups, scalesEvictLast);
}

/// SiLU-clamp's kernels for a rule and group size, as launchGroupTile names
/// them (GroupQuantKernelFor). SiLU-clamp always runs a block per row tile
/// (kLoops false: the looping kernel measured slower, GroupTilePolicy); its
/// small grids take GroupTilePolicy::kSiluSmallGridElems values a thread.
template <class In, class Format, class Layout>
struct SiluClampQuantKernelFor {
  template <class Rule, int kGroup>
  struct Of {
    static constexpr int kSmallGridElems = GroupTilePolicy<In>::kSiluSmallGridElems;
    static constexpr bool kLoops = false;
    template <int kElems, bool kLoop, bool kPadding>
    static auto kernel() {
      static_assert(!kLoop, "SiLU-clamp has no looping kernel");
      return &siluClampQuantKernel<In, Format, Rule, kGroup, Layout, kElems, kPadding>;
    }
  };
};

#endif  // FP8SCALE_HAS_DEVICE
}  // namespace detail

#if defined(FP8SCALE_HAS_DEVICE)

/// SiLU-clamp quant on `stream`: q[M, I] and scales (M, I / groupSize) in
/// `Layout` (RowMajor: TRANSPOSE_SCALE false; ColMajor: true, padding zeroed;
/// the exponent layouts as groupQuant() writes them).
/// Alignment and errors as groupQuant(), plus kLdTooSmall ('ldx' < 2 I) and
/// kInvalidValue ('limit' NaN). M == 0 as groupQuant().
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> siluClampQuant(const SiluClampInput<In>& in, Fp8Matrix<Format> q,
                                                       ScaleOutput<Layout> scale, const QuantOptions& opt,
                                                       Stream stream) {
  float fmax = 0.0f;
  if (Status s = detail::checkSiluClampQuant("siluClampQuant", in, q, scale, opt, fmax); !s) return s;
  return {detail::launchGroupTile<In, detail::SiluClampQuantKernelFor<In, Format, Layout>::template Of>(
              "siluClampQuant", in, in.rows, in.intermediate / opt.groupSize, q, scale, fmax, opt, stream,
              /*loopWaves: no cap, a block per row tile*/ 0),
          QuantizedTensor<Format, Layout>{q, scale, opt.groupSize}};
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_SILU_CLAMP_QUANT_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
