// fp8scale spec: SiLU-clamp quant's input, its fused math siluClamp() and
// its argument checks. Host code only (no kernels): the device producer
// (producers/silu_clamp_quant.hpp) and the host reference
// (reference/fused_quant.hpp) both include it.
#pragma once

#include <cmath>

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../platform.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"
#include "group_quant.hpp"
#include "quant_options.hpp"

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

/// Argument checks of SiLU-clamp quant (the launcher's and the reference's),
/// in this order: options, I and ldx, limit, the fp8 output's extents, then
/// checkQuantArgs.
template <class Format, class In, class Layout>
Status checkSiluClampQuant(const char* fn, const SiluClampInput<In>& in, const Fp8Matrix<Format>& q,
                           const ScaleOutput<Layout>& scale, const QuantOptions& opt, float& fmax) {
  if (Status s = checkProducerOptions<Format, Layout>(fn, opt, fmax); !s) return s;
  if (in.intermediate < 0)
    return Status::error(StatusCode::kInvalidShape, fn, "intermediate", "extent is negative", in.intermediate);
  if (spanMul(2, in.intermediate) < 0)
    return Status::error(StatusCode::kInvalidShape, fn, "intermediate", "2 * I spans more than 2^48 elements",
                         in.intermediate);
  if (in.ldx < 2 * in.intermediate)
    return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "row stride is smaller than 2 * I", in.ldx,
                         2 * in.intermediate);
  if (!(in.limit == in.limit)) return Status::errorFloat(StatusCode::kInvalidValue, fn, "limit", "is NaN", in.limit);
  if (q.rows != in.rows || q.cols != in.intermediate)
    return Status::error(StatusCode::kInvalidShape, fn, "q", "fp8 output extents differ from (M, I)",
                         q.rows != in.rows ? q.rows : q.cols, q.rows != in.rows ? in.rows : in.intermediate);
  QuantArgs a = quantArgs(in.x, in.rows, in.intermediate, in.ldx, static_cast<int>(sizeof(In)), q, scale,
                          opt.groupSize);
  a.colsName = "I";
  a.inputSpan = stridedSpan(in.rows, 2 * in.intermediate, in.ldx);  // gate and up halves
  // The up half starts I elements in; I is a multiple of the group size (>= 32),
  // so it is as aligned as the gate half.
  return checkQuantArgs(fn, a, 16, kGroupTileStoreBytes<In>);
}

}  // namespace detail
}  // namespace fp8scale
