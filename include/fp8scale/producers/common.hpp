// fp8scale: what every producer shares: options, the compile-time dispatch of
// runtime choices, and the device step that turns one group's fp32 values
// into fp8 bytes and a scale written through the view.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../detail/checks.hpp"
#include "../detail/reduce.hpp"
#include "../detail/vec.hpp"
#include "../fp8.hpp"
#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"

namespace fp8scale {

/// The L2 cache policy of a producer's scale stores (NVIDIA sm_80+ with
/// CUDA 11.4+; elsewhere, AMD included, both are a plain store).
enum class ScaleStorePolicy {
  /// A plain st.global: the L2's normal priority. The default: the call
  /// leaves no lasting mark on the L2.
  kEvictNormal,
  /// createpolicy.fractional.L2::evict_last + st.global.L2::cache_hint. On
  /// the H200 column-major RMSNorm quant ran 3.7-4.9% faster at
  /// M = 8192 .. 65536 and group quant 1.4-3.1% at M = 8192 / 16384
  /// (SiLU-clamp: no consistent change; the fused allreduce: not measured;
  /// benchmarks/results/h200_ab_scale_evict_last.txt). The cost is outside
  /// the call: the lines, up to M * G * 4 bytes (14.7 MB for K = 7168 at
  /// M = 65536), keep evict_last priority after the kernel, like lines of a
  /// persisting access window, until they are rewritten, reset
  /// (cudaCtxResetPersistingL2Cache) or evicted after all normal lines of
  /// their set; calls into many different scale buffers add up and crowd
  /// the next kernels' working sets. Opt in where the scale buffer is reused
  /// call after call (one workspace) or read right after.
  kEvictLast,
};

/// Per-call quantization options shared by every producer.
struct QuantOptions {
  /// fp32 (s = amax / fmax) or UE8M0 (s rounded up to a power of two).
  ScaleRule rule = ScaleRule::kFp32;
  /// Columns per scale: 32, 64 or 128 (the DeepSeek-V3 1x128 hot path).
  int groupSize = 128;
  /// Largest magnitude after scaling; 0 selects the format's max (448 for
  /// e4m3fn, 240 for e4m3fnuz). Some engines pass 224 on e4m3fnuz.
  float fmax = 0.0f;
  /// Floor on amax, so an all-zero group gets a finite scale.
  float eps = kDefaultAmaxEps;
  /// Programmatic dependent launch (CUDA sm_90+; ignored on AMD): the kernel
  /// is scheduled while the previous kernel on the stream finishes and waits
  /// for it (griddepcontrol.wait) before any memory access, so the results
  /// are the same; it also lets the next PDL launch start early. Saves launch
  /// latency at small M (README "Measured"). Off by default: the previous
  /// kernel's last blocks then share the SMs with this grid's waiting blocks.
  /// The producer triggers its own dependents at entry: a PDL-launched kernel
  /// after it must not read its outputs before that kernel's own wait
  /// (griddepcontrol.wait / cudaGridDependencySynchronize).
  bool programmaticLaunch = false;
  /// L2 policy of the scale stores; see ScaleStorePolicy.
  ScaleStorePolicy scaleStore = ScaleStorePolicy::kEvictNormal;
};

namespace detail {
/// The options of a producer call: checkQuantOptions (fmax, eps, rule), and
/// a known scaleStore (kInvalidValue naming it otherwise).
template <class Format>
inline Status checkProducerOptions(const char* fn, const QuantOptions& o, float& fmax) {
  if (Status s = checkQuantOptions<Format>(fn, o, fmax); !s) return s;
  if (o.scaleStore != ScaleStorePolicy::kEvictNormal && o.scaleStore != ScaleStorePolicy::kEvictLast)
    return Status::error(StatusCode::kInvalidValue, fn, "scaleStore", "unknown scale store policy",
                         static_cast<int>(o.scaleStore));
  return Status::ok();
}

/// Whether the scale stores carry the evict_last policy.
inline bool storesScalesEvictLast(ScaleStorePolicy policy) { return policy == ScaleStorePolicy::kEvictLast; }
}  // namespace detail

/// The scale layout a TRANSPOSE_SCALE flag selects.
template <bool TRANSPOSE_SCALE>
using ScaleLayoutFor = std::conditional_t<TRANSPOSE_SCALE, ColMajor, RowMajor>;

namespace detail {

/// Calls f(Rule{}, std::integral_constant<int, kGroup>{}) for the runtime
/// rule and group size (both already validated).
template <class F>
inline Status dispatchRuleAndGroup(ScaleRule rule, int groupSize, F&& f) {
  auto byGroup = [&](auto ruleTag) {
    switch (groupSize) {
      case 32: return f(ruleTag, std::integral_constant<int, 32>{});
      case 64: return f(ruleTag, std::integral_constant<int, 64>{});
      default: return f(ruleTag, std::integral_constant<int, 128>{});
    }
  };
  return rule == ScaleRule::kUE8M0 ? byGroup(ScaleUE8M0{}) : byGroup(ScaleFp32{});
}

#if defined(FP8SCALE_HAS_DEVICE)

/// One group's slice in this thread: reduces amax over the kLanes lanes that
/// hold the group, scales, converts and (when `store`) stores the kN values at
/// `dst` (kN bytes, aligned). Returns the group's scale (every lane gets it).
/// `store` false lets a lane past the row's end take part in the reduction
/// with zeros, so that callers keep the shuffles out of divergent branches.
template <class Format, class Rule, int kLanes, int kN>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE float quantizeGroupSlice(float (&v)[kN], std::uint8_t* dst, float fmax,
                                                               float eps, bool store = true) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kN; ++i) amax = amaxStep(amax, v[i]);
  amax = groupAllMax<kLanes>(amax);
  const float s = scaleFromAmax<Rule>(amax, fmax, eps);
  const float inv = inverseScale(s);
#pragma unroll
  for (int i = 0; i < kN; ++i) v[i] = v[i] * inv;
  if (store) storeFp8<Format, kN>(dst, v);
  return s;
}

/// Writes scale (m, g) through the view (called by one lane of the group).
/// evictLast (ScaleStorePolicy::kEvictLast, uniform over the grid):
/// where FP8SCALE_HAS_L2_CACHE_HINT, the store carries an L2 evict_last
/// policy; elsewhere it is a plain store. The view must point into global
/// memory (device, managed, host-mapped or peer allocations; every launcher
/// passes the caller's scale buffer): the address is converted with
/// cvta.to.global. Why and what it measured: ScaleStorePolicy and
/// benchmarks/results/h200_ab_scale_evict_last.txt.
template <class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeScale(const ScaleView<float, Layout>& scale, index_t m, index_t g,
                                                     float s, bool evictLast) {
  float* const p = &scale(m, g);  // (M, G)
#if FP8SCALE_HAS_L2_CACHE_HINT
  if (evictLast) {
    asm volatile(
        "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_last.b64 policy, 1.0;\n\t"
        "st.global.L2::cache_hint.f32 [%0], %1, policy;\n\t}" ::"l"(__cvta_generic_to_global(p)),
        "f"(s)
        : "memory");
    return;
  }
#endif
  (void)evictLast;
  *p = s;
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail
}  // namespace fp8scale
