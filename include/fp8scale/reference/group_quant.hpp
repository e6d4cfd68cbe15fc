// fp8scale: host per-group quantization, the executable specification.
//
// Every device producer is tested against this function: pure group quant bit
// for bit, fused producers through the same per-group step applied to their
// fp32 intermediate. The rules (docs/numerics.md):
//   amax = max(max |v| ignoring NaN, eps); s = rule(amax / fmax);
//   inv = 1 / s; q = encode(v * inv).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../spec/group_quant.hpp"
#include "../status.hpp"

namespace fp8scale {
namespace reference {

/// Quantizes one group of fp32 values: writes `n` fp8 bytes to `q` and returns
/// the group's scale. The single step every producer's reference uses.
template <class Format, class Rule>
float quantizeGroup(const float* v, int n, std::uint8_t* q, float fmax, float eps) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = amaxStep(amax, v[i]);
  const float s = scaleFromAmax<Rule>(amax, fmax, eps);
  const float inv = inverseScale(s);
  for (int i = 0; i < n; ++i) q[i] = encode<Format>(v[i] * inv);
  return s;
}

/// The launcher options the references check their arguments with, so that a
/// reference refuses exactly what its launcher refuses, with the same message
/// (the function named "reference::..."), for scales of `Rule`.
template <class Rule>
QuantOptions referenceOptions(int groupSize, float fmax, float eps) {
  QuantOptions opt;
  opt.rule = std::is_same<Rule, ScaleUE8M0>::value ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
  opt.groupSize = groupSize;
  opt.fmax = fmax;
  opt.eps = eps;
  return opt;
}

/// Per-token-group quantization of x[M, K] (row stride ldx) into
/// q[M, K] (row stride q.ld, bytes) and scale (M, K / groupSize) in any
/// RowMajor / ColMajor layout, or as the UE8M0 exponent bytes of a
/// PackedUe8m0 / Swizzled128x4 view (Rule ScaleUE8M0, group size 32 or 128),
/// padding slots 0. `InT` is float, BFloat16 or Float16.
///
/// @param fmax  the largest magnitude after scaling, in (0, Format::kMax]:
///              Format::kMax by default, 0 selects it too (some engines pass
///              224 on e4m3fnuz)
/// @param eps   floor on amax (kDefaultAmaxEps), > 0
/// Errors: exactly those of the groupQuant() launcher on the same matrix
/// input (detail::checkGroupQuant: options, q's extents, spans, null
/// pointers, 16-byte alignment of x and ldx, of q and ldq to one fp8 store),
/// with the function named "reference::groupQuant".
template <class Format, class Rule, class InT, class Layout>
Status groupQuant(const InT* x, index_t M, index_t K, index_t ldx, int groupSize, Fp8Matrix<Format> q,
                  ScaleOutput<Layout> scale, float fmax = Format::kMax, float eps = kDefaultAmaxEps) {
  float checkedFmax = 0.0f;
  const Status s = detail::checkGroupQuant("reference::groupQuant", GroupQuantInput<InT>::matrix(x, M, K, ldx), q,
                                           scale, referenceOptions<Rule>(groupSize, fmax, eps), checkedFmax);
  if (!s) return s;
  fmax = checkedFmax;
  std::vector<float> v(static_cast<std::size_t>(groupSize));
  for (index_t m = 0; m < M; ++m) {
    for (index_t g = 0; g < K / groupSize; ++g) {
      const InT* src = x + m * ldx + g * groupSize;
      for (int i = 0; i < groupSize; ++i) v[i] = toFloat(src[i]);
      scale(m, g) = encodeScale<typename Layout::Element>(
          quantizeGroup<Format, Rule>(v.data(), groupSize, &q(m, g * groupSize), fmax, eps));
    }
  }
  zeroPadding(scale);
  return Status::ok();
}

}  // namespace reference
}  // namespace fp8scale
