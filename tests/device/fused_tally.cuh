// Comparison of fused-producer output with the host reference: every element
// within one fp8 step, the fraction that differs tallied and printed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "fp8scale/reference/fused_quant.hpp"
#include "producer_harness.cuh"

namespace fp8scale::test {

/// Differences against the reference, accumulated over a suite and printed.
struct FusedTally {
  std::size_t elements = 0, differing = 0, beyondOneStep = 0, scales = 0, scalesDiffering = 0;
  std::size_t failures = 0;
  double worstScaleRel = 0.0;
  void print(const char* what) const {
    std::printf("[ %s ] %zu fp8 values: %zu (%.4f%%) differ from the host reference, %zu by more than one step; "
                "%zu of %zu scales differ, worst relative %.3g\n",
                what, elements, differing, elements ? 100.0 * differing / elements : 0.0, beyondOneStep,
                scalesDiffering, scales, worstScaleRel);
  }
};

// Bounds the issue asks to state (reference/fused_quant.hpp): every differing
// element within one fp8 step; at most 1% of elements differ. fp32-rule
// scales within a relative bound per producer: SiLU 2^-19, RMSNorm 2^-16.
// UE8M0 scales identical (a factor of 2 would move every value of the group
// by eight fp8 steps).
constexpr double kMaxDifferingFraction = reference::kFusedMaxDifferingFraction;
using reference::kRmsNormMaxScaleRel;
using reference::kSiluMaxScaleRel;

/// One unit in the last place of `a` in the input type.
template <class In>
inline float inputUlp(float a) {
  const int mantissaBits = std::is_same<In, float>::value ? 23 : std::is_same<In, BFloat16>::value ? 7 : 10;
  return std::ldexp(std::fabs(a), -mantissaBits);
}

template <class Format, class Rule>
void tallyFused(const ContractOutput& got, const std::vector<std::uint8_t>& refQ, const std::vector<float>& refS,
                FusedTally& tally, double maxScaleRel) {
  std::size_t beyond = 0;
  const std::size_t diff = countFp8StepDiffs<Format>(got.q, refQ, beyond);
  tally.elements += refQ.size();
  tally.differing += diff;
  tally.beyondOneStep += beyond;
  EXPECT_EQ(beyond, 0u) << "fp8 values more than one step from the host reference";
  for (std::size_t i = 0; i < refS.size(); ++i) {
    ++tally.scales;
    if (std::memcmp(&refS[i], &got.rowMajorScale[i], 4) == 0) continue;
    ++tally.scalesDiffering;
    const double rel = std::fabs(double(got.rowMajorScale[i]) - refS[i]) / std::fabs(double(refS[i]));
    tally.worstScaleRel = std::max(tally.worstScaleRel, rel);
    if (std::is_same<Rule, ScaleUE8M0>::value) {
      if (tally.failures++ < 3) ADD_FAILURE() << "UE8M0 scale " << got.rowMajorScale[i] << " vs " << refS[i];
    } else if (!(rel <= maxScaleRel) && tally.failures++ < 3) {
      ADD_FAILURE() << "scale " << got.rowMajorScale[i] << " vs " << refS[i] << ": relative " << rel << " > "
                    << maxScaleRel;
    }
  }
}

inline void expectFractionsWithinBounds(const FusedTally& t) {
  EXPECT_LE(static_cast<double>(t.differing), kMaxDifferingFraction * static_cast<double>(t.elements));
  EXPECT_EQ(t.failures, 0u);
}

}  // namespace fp8scale::test
