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
  std::size_t ue8m0BoundaryFlips = 0;
  std::size_t failures = 0;
  double worstScaleRel = 0.0;
  void print(const char* what) const {
    std::printf("[ %s ] %zu fp8 values: %zu (%.4f%%) differ from the host reference, %zu by more than one step; "
                "%zu of %zu scales differ, worst relative %.3g",
                what, elements, differing, elements ? 100.0 * differing / elements : 0.0, beyondOneStep,
                scalesDiffering, scales, worstScaleRel);
    if (ue8m0BoundaryFlips > 0) std::printf(" (besides %zu UE8M0 boundary flips)", ue8m0BoundaryFlips);
    std::printf("\n");
  }
};

// Bounds the issue asks to state (reference/fused_quant.hpp): every differing
// element within one fp8 step; at most 1% of elements differ. fp32-rule
// scales within a relative bound per producer: SiLU 2^-19, RMSNorm 2^-16.
// UE8M0 scales identical, except boundary flips (isUe8m0BoundaryFlip), at
// most kFusedMaxUe8m0FlipFraction of the groups.
constexpr double kMaxDifferingFraction = reference::kFusedMaxDifferingFraction;
using reference::kFusedMaxUe8m0FlipFraction;
using reference::kRmsNormMaxScaleRel;
using reference::kSiluMaxScaleRel;

/// One unit in the last place of `a` in the input type.
template <class In>
inline float inputUlp(float a) {
  const int mantissaBits = std::is_same<In, float>::value ? 23 : std::is_same<In, BFloat16>::value ? 7 : 10;
  return std::ldexp(std::fabs(a), -mantissaBits);
}

/// One fp8 step at code c (a value that is not NaN): the larger distance from
/// |decode(c)| to its neighbouring magnitudes that are not NaN.
template <class Format>
inline float fp8StepAt(std::uint8_t c) {
  const int mag = c & 0x7F;
  const float v = std::fabs(decode<Format>(c));
  float step = 0.0f;
  for (int n : {mag - 1, mag + 1}) {
    if (n < 0 || n > 0x7F) continue;
    const float w = std::fabs(decode<Format>(static_cast<std::uint8_t>(n)));
    if (!std::isnan(w)) step = std::max(step, std::fabs(w - v));
  }
  return step;
}

/// Whether a UE8M0 group of n values whose scale differs from the reference's
/// is a boundary flip, not an error: its fp32 scale lies within the
/// producer's fp32 error (exp, rsqrt, sum order) of a power of two, so the
/// device and the host round it up to neighbouring powers. Then the scales
/// are exactly a factor of 2 apart; the group's largest magnitude is fmax / 2
/// (rounded to fp8) on the side with the larger scale and fmax on the other
/// (a UE8M0 scale leaves amax / scale in (fmax / 2, fmax]; only an amax
/// within a rounding of fmax x a power of two puts it at fmax / 2 on one
/// side and fmax on the other); and both sides quantize the same values: each
/// value of the side with the smaller scale within one step (of the coarser
/// grid there) of twice the other side's, NaN where NaN.
template <class Format>
bool isUe8m0BoundaryFlip(const std::uint8_t* dev, const std::uint8_t* ref, std::size_t n, float sDev, float sRef,
                         float fmax) {
  if (!(sDev == 2.0f * sRef || sRef == 2.0f * sDev)) return false;
  const std::uint8_t* coarse = sDev > sRef ? dev : ref;
  const std::uint8_t* fine = sDev > sRef ? ref : dev;
  float coarseMax = 0.0f, fineMax = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float c = decode<Format>(coarse[i]), f = decode<Format>(fine[i]);
    if (!std::isnan(c)) coarseMax = std::max(coarseMax, std::fabs(c));
    if (!std::isnan(f)) fineMax = std::max(fineMax, std::fabs(f));
  }
  if (coarseMax != decode<Format>(encode<Format>(fmax / 2.0f)) || fineMax != decode<Format>(encode<Format>(fmax)))
    return false;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = decode<Format>(fine[i]), b = 2.0f * decode<Format>(coarse[i]);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return false;
      continue;
    }
    if (std::fabs(a - b) > std::max(fp8StepAt<Format>(fine[i]), 2.0f * fp8StepAt<Format>(coarse[i]))) return false;
  }
  return true;
}

/// Tallies the row-major run of a fused producer against the host reference
/// (refQ [M, K] packed, refS (M, G) row-major): scales per rule (UE8M0
/// boundary flips counted apart, their groups checked by isUe8m0BoundaryFlip),
/// and the other groups' fp8 values within one step.
template <class Format, class Rule>
void tallyFused(const ContractOutput& got, const std::vector<std::uint8_t>& refQ, const std::vector<float>& refS,
                FusedTally& tally, double maxScaleRel) {
  const std::size_t groupSize = refS.empty() ? 0 : refQ.size() / refS.size();
  ASSERT_EQ(groupSize * refS.size(), refQ.size()) << "fp8 values are not a whole number of groups";
  tally.elements += refQ.size();
  std::size_t beyond = 0;
  for (std::size_t i = 0; i < refS.size(); ++i) {
    const std::uint8_t* dev = got.q.data() + i * groupSize;  // group i = (m, g): values [i * groupSize, +groupSize)
    const std::uint8_t* ref = refQ.data() + i * groupSize;
    ++tally.scales;
    if (std::memcmp(&refS[i], &got.rowMajorScale[i], 4) != 0) {
      ++tally.scalesDiffering;
      const double rel = std::fabs(double(got.rowMajorScale[i]) - refS[i]) / std::fabs(double(refS[i]));
      if (std::is_same<Rule, ScaleUE8M0>::value) {
        if (isUe8m0BoundaryFlip<Format>(dev, ref, groupSize, got.rowMajorScale[i], refS[i], Format::kMax)) {
          --tally.scalesDiffering;
          ++tally.ue8m0BoundaryFlips;
          std::size_t apart = 0;  // a flipped group's values are apart by the factor 2 (checked above)
          tally.differing += countFp8StepDiffs<Format>(dev, ref, groupSize, apart);
          continue;
        }
        if (tally.failures++ < 3) ADD_FAILURE() << "UE8M0 scale " << got.rowMajorScale[i] << " vs " << refS[i];
      } else if (!(rel <= maxScaleRel) && tally.failures++ < 3) {
        ADD_FAILURE() << "scale " << got.rowMajorScale[i] << " vs " << refS[i] << ": relative " << rel << " > "
                      << maxScaleRel;
      }
      tally.worstScaleRel = std::max(tally.worstScaleRel, rel);
    }
    std::size_t groupBeyond = 0;
    tally.differing += countFp8StepDiffs<Format>(dev, ref, groupSize, groupBeyond);
    beyond += groupBeyond;
  }
  tally.beyondOneStep += beyond;
  EXPECT_EQ(beyond, 0u) << "fp8 values more than one step from the host reference";
}

inline void expectFractionsWithinBounds(const FusedTally& t) {
  EXPECT_LE(static_cast<double>(t.differing), kMaxDifferingFraction * static_cast<double>(t.elements));
  EXPECT_LE(static_cast<double>(t.ue8m0BoundaryFlips), kFusedMaxUe8m0FlipFraction * static_cast<double>(t.scales))
      << "UE8M0 boundary flips";
  EXPECT_EQ(t.failures, 0u);
}

}  // namespace fp8scale::test
