// fp8scale: host references of the fused producers, on the same per-group
// step as reference::groupQuant. Device results may differ from these by one
// fp8 step on a small fraction of elements (exp, rsqrt and the order of the
// sum of squares differ between host and device); the specification is
// semantics stated in spec/silu_clamp_quant.hpp and producers/rmsnorm_quant.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../spec/rmsnorm_quant.hpp"
#include "../spec/silu_clamp_quant.hpp"
#include "group_quant.hpp"

namespace fp8scale {
namespace reference {

/// How closely the fused producers (RMSNorm quant, SiLU-clamp quant, the
/// fused allreduce) follow these references, the bounds the device tests and
/// fp8scale-allreduce-ranks check: every fp8 value within one step, at most
/// kFusedMaxDifferingFraction of them differing; fp32-rule scales within a
/// relative bound per producer (their last bits differ: amax goes through
/// exp or rsqrt, and the row sum is fp64 here); UE8M0 scales identical,
/// except that a group whose fp32 scale lies within that bound of a power of
/// two may round up to the neighbouring power (a "boundary flip": both
/// results are right for their amax; none in the H200 test data, and rare by
/// estimate: the fp32 scales differ by about 1e-7 relative in a third of the
/// groups, so a power of two falls between them for about 5e-8 of the
/// groups), at most kFusedMaxUe8m0FlipFraction of the groups (or one).
constexpr double kFusedMaxDifferingFraction = 0.01;
constexpr double kFusedMaxUe8m0FlipFraction = 1e-4;
constexpr double kSiluMaxScaleRel = 1.0 / (1 << 19);
constexpr double kRmsNormMaxScaleRel = 1.0 / (1 << 16);

/// SiLU-clamp quant of `in` into q[M, I] and scale (M, I / groupSize), in
/// any layout groupQuant's reference writes.
template <class Format, class Rule, class In, class Layout>
Status siluClampQuant(const SiluClampInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                      int groupSize, float fmax = Format::kMax, float eps = kDefaultAmaxEps) {
  const QuantOptions opt = referenceOptions<Rule>(groupSize, fmax, eps);
  float checkedFmax = 0.0f;
  if (Status s = detail::checkSiluClampQuant("reference::siluClampQuant", in, q, scale, opt, checkedFmax); !s)
    return s;
  std::vector<float> a(static_cast<std::size_t>(groupSize));  // one group: no allocation that grows with I
  for (index_t m = 0; m < in.rows; ++m) {
    for (index_t g = 0; g < in.intermediate / groupSize; ++g) {  // no pointer arithmetic on x when I == 0
      const In* gate = in.x + m * in.ldx + g * groupSize;
      const In* up = gate + in.intermediate;
      for (int i = 0; i < groupSize; ++i) a[i] = siluClamp(toFloat(gate[i]), toFloat(up[i]), in.limit);
      scale(m, g) = encodeScale<typename Layout::Element>(
          quantizeGroup<Format, Rule>(a.data(), groupSize, &q(m, g * groupSize), checkedFmax, eps));
    }
  }
  zeroPadding(scale);
  return Status::ok();
}

/// RMSNorm quant of `in` (residual updated in place, normOut written when
/// given) into q[M, K] and scale (M, K / groupSize), in any layout
/// groupQuant's reference writes. The sum of squares and
/// the rsqrt are taken in double, so the reference sits closer to the exact
/// value than any fp32 summation order.
template <class Format, class Rule, class In, class Layout>
Status rmsNormQuant(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q, ScaleOutput<Layout> scale,
                    int groupSize, float fmax = Format::kMax, float eps = kDefaultAmaxEps) {
  const QuantOptions opt = referenceOptions<Rule>(groupSize, fmax, eps);
  float checkedFmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant("reference::rmsNormQuant", in, q, scale, opt, checkedFmax); !s) return s;
  std::vector<float> h(static_cast<std::size_t>(in.cols));
  for (index_t m = 0; m < in.rows; ++m) {
    double sumSq = 0.0;
    for (index_t k = 0; k < in.cols; ++k) {
      float v = toFloat(in.x[m * in.ldx + k]);
      if (in.residual != nullptr) {
        In& r = in.residual[m * in.ldResidual + k];
        v += toFloat(r);
        r = fromFloat<In>(v);
      }
      h[k] = v;
      sumSq += static_cast<double>(v) * v;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(sumSq / static_cast<double>(in.cols) + in.normEps));
    for (index_t k = 0; k < in.cols; ++k) {
      h[k] = h[k] * inv * toFloat(in.weight[k]);
      if (in.normOut != nullptr) in.normOut[m * in.ldNormOut + k] = fromFloat<In>(h[k]);
    }
    for (index_t g = 0; g < in.cols / groupSize; ++g)
      scale(m, g) = encodeScale<typename Layout::Element>(
          quantizeGroup<Format, Rule>(h.data() + g * groupSize, groupSize, &q(m, g * groupSize), checkedFmax, eps));
  }
  zeroPadding(scale);
  return Status::ok();
}

}  // namespace reference
}  // namespace fp8scale
