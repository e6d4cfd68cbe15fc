// fp8scale: what every device producer shares: the compile-time dispatch of
// runtime choices and the device step that turns one group's fp32 values
// into fp8 bytes and a scale written through the view. The options and
// checks they share are in spec/quant_options.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../detail/reduce.hpp"
#include "../detail/vec.hpp"
#include "../fp8.hpp"
#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../spec/quant_options.hpp"
#include "../status.hpp"

namespace fp8scale {

/// The scale layout a TRANSPOSE_SCALE flag selects: the design's spelling of
/// the choice. Launchers and kernels take the layout type itself.
template <bool TRANSPOSE_SCALE>
using ScaleLayoutFor = std::conditional_t<TRANSPOSE_SCALE, ColMajor, RowMajor>;

namespace detail {

/// Calls f(Rule{}, std::integral_constant<int, kGroup>{}) for the runtime
/// rule and group size (both already validated). kExponentLayout: the UE8M0
/// rule and group sizes 32 and 128 alone are compiled (the exponent layouts,
/// whose checks refuse the rest: isExponentLayoutGroupSize).
template <bool kExponentLayout = false, class F>
inline Status dispatchRuleAndGroup(ScaleRule rule, int groupSize, F&& f) {
  auto byGroup = [&](auto ruleTag) {
    if (groupSize == 32) return f(ruleTag, std::integral_constant<int, 32>{});
    if constexpr (!kExponentLayout) {
      if (groupSize == 64) return f(ruleTag, std::integral_constant<int, 64>{});
    }
    return f(ruleTag, std::integral_constant<int, 128>{});
  };
  if constexpr (kExponentLayout) {
    (void)rule;
    return byGroup(ScaleUE8M0{});
  } else {
    return rule == ScaleRule::kUE8M0 ? byGroup(ScaleUE8M0{}) : byGroup(ScaleFp32{});
  }
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

/// Writes scale (m, g) through the view (called by one lane of the group):
/// the fp32 scale, or its UE8M0 exponent byte (encodeScale); with the row's
/// last scale, the row's padding groups (writeRowPadding; exponent layouts
/// only). evictLast
/// (ScaleStorePolicy::kEvictLast, uniform over the grid): where
/// FP8SCALE_HAS_L2_CACHE_HINT, the store carries an L2 evict_last policy;
/// elsewhere it is a plain store. The view must point into global memory
/// (device, managed, host-mapped or peer allocations; every launcher passes
/// the caller's scale buffer): the address is converted with cvta.to.global.
/// Why and what it measured: ScaleStorePolicy.
template <class T, class Layout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void storeScale(const ScaleView<T, Layout>& scale, index_t m, index_t g,
                                                     float s, bool evictLast) {
  T* const p = &scale(m, g);  // (M, G)
  if constexpr (Layout::kGroupAlignment > 1) {  // writeRowPadding, from the address at hand
    if (g + 1 == scale.cols()) zeroWordTail<Layout>(p, scale.cols());
  }
#if FP8SCALE_HAS_L2_CACHE_HINT
  if (evictLast) {
    if constexpr (sizeof(T) == 1) {
      asm volatile(
          "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_last.b64 policy, 1.0;\n\t"
          "st.global.L2::cache_hint.u8 [%0], %1, policy;\n\t}" ::"l"(__cvta_generic_to_global(p)),
          "h"(static_cast<unsigned short>(encodeScale<T>(s)))
          : "memory");
    } else {
      asm volatile(
          "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_last.b64 policy, 1.0;\n\t"
          "st.global.L2::cache_hint.f32 [%0], %1, policy;\n\t}" ::"l"(__cvta_generic_to_global(p)),
          "f"(s)
          : "memory");
    }
    return;
  }
#endif
  (void)evictLast;
  *p = encodeScale<T>(s);
}

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace detail
}  // namespace fp8scale
