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
  std::size_t ue8m0BoundaryFlips = 0, flippedValues = 0;  // flipped groups and their values, apart
  std::size_t failures = 0;
  double worstScaleRel = 0.0;
  void print(const char* what) const {
    std::printf("[ %s ] %zu fp8 values: %zu (%.4f%%) differ from the host reference, %zu by more than one step; "
                "%zu of %zu scales differ, worst relative %.3g",
                what, elements, differing, elements ? 100.0 * differing / elements : 0.0, beyondOneStep,
                scalesDiffering, scales, worstScaleRel);
    if (ue8m0BoundaryFlips > 0)
      std::printf(" (besides %zu UE8M0 boundary flips, %zu values)", ue8m0BoundaryFlips, flippedValues);
    std::printf("\n");
  }
};

// The stated bounds (reference/fused_quant.hpp): every differing
// element within one fp8 step; at most 1% of elements differ. fp32-rule
// scales within a relative bound per producer: SiLU 2^-19, RMSNorm 2^-16.
// UE8M0 scales identical, except boundary flips (isUe8m0BoundaryFlip), at
// most kFusedMaxUe8m0FlipFraction of the groups (or one).
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

/// The fp8 value at position o of the number line (fp8Ordinal's inverse).
template <class Format>
inline float fp8AtOrdinal(int o) {
  return decode<Format>(static_cast<std::uint8_t>(o >= 0 ? o : (0x80 | -o)));
}

/// Whether v lies within one fp8 step of scale x decode(code) (a value that
/// is not NaN): between scale x its two neighbours on the fp8 number line,
/// a neighbour that is NaN or past the end counting as the value itself.
template <class Format>
inline bool withinOneStep(std::uint8_t code, float v, float scale) {
  const int o = fp8Ordinal(code);
  const float at = decode<Format>(code);
  float lo = o > -0x7F ? fp8AtOrdinal<Format>(o - 1) : at;
  float hi = o < 0x7F ? fp8AtOrdinal<Format>(o + 1) : at;
  if (std::isnan(lo)) lo = at;
  if (std::isnan(hi)) hi = at;
  return v >= scale * lo && v <= scale * hi;
}

/// Whether a UE8M0 group of n values whose scale differs from the reference's
/// is a boundary flip, not an error: the group's fp32-rule scale lies within
/// the producer's fp32 bound (maxScaleRel: exp, rsqrt, sum order) of a power
/// of two, so the device and the host round it up to neighbouring powers.
/// Checked: the scales are exactly a factor of 2 apart; the host's fp32-rule
/// scale of the group (s32Ref) is within maxScaleRel of the smaller one; the
/// group's largest magnitude is fmax / 2 (rounded to fp8) on the side with
/// the larger scale and fmax on the other (where amax / scale lands when amax
/// sits at fmax x that power of two); and both sides quantize the same
/// values: each value of the side with the smaller scale within one step of
/// twice the other side's, or twice that within one step of it on its own
/// (coarser) grid, NaN where NaN.
template <class Format>
bool isUe8m0BoundaryFlip(const std::uint8_t* dev, const std::uint8_t* ref, std::size_t n, float sDev, float sRef,
                         float s32Ref, double maxScaleRel, float fmax) {
  if (!(sDev == 2.0f * sRef || sRef == 2.0f * sDev)) return false;
  const float power = std::min(sDev, sRef);  // the fp32 bound as tallyFused applies it: relative to s32Ref
  if (!(std::fabs(static_cast<double>(s32Ref) - power) <= maxScaleRel * std::fabs(static_cast<double>(s32Ref))))
    return false;
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
    if (!withinOneStep<Format>(fine[i], b, 1.0f) && !withinOneStep<Format>(coarse[i], a, 2.0f)) return false;
  }
  return true;
}

/// Tallies the row-major run of a fused producer against the host reference
/// (refQ [M, K] packed, refS (M, G) row-major): scales per rule, and each
/// group's fp8 values within one step. UE8M0 runs given the host's fp32-rule
/// scales of the same groups (refScaleFp32, (M, G)) count a group whose scale
/// differs as a boundary flip when isUe8m0BoundaryFlip holds (its values
/// checked there, apart from the others); without them UE8M0 scales must be
/// identical. fmax: the one the run used.
template <class Format, class Rule>
void tallyFused(const ContractOutput& got, const std::vector<std::uint8_t>& refQ, const std::vector<float>& refS,
                FusedTally& tally, double maxScaleRel, const std::vector<float>* refScaleFp32 = nullptr,
                float fmax = Format::kMax) {
  const std::size_t groupSize = refS.empty() ? 0 : refQ.size() / refS.size();
  ASSERT_EQ(groupSize * refS.size(), refQ.size()) << "fp8 values are not a whole number of groups";
  if (refScaleFp32 != nullptr) ASSERT_EQ(refScaleFp32->size(), refS.size());
  tally.elements += refQ.size();
  std::size_t beyond = 0;
  for (std::size_t i = 0; i < refS.size(); ++i) {
    const std::uint8_t* dev = got.q.data() + i * groupSize;  // group i = (m, g): values [i * groupSize, +groupSize)
    const std::uint8_t* ref = refQ.data() + i * groupSize;
    ++tally.scales;
    if (std::memcmp(&refS[i], &got.rowMajorScale[i], 4) != 0) {
      const double rel = std::fabs(double(got.rowMajorScale[i]) - refS[i]) / std::fabs(double(refS[i]));
      if (std::is_same<Rule, ScaleUE8M0>::value) {
        if (refScaleFp32 != nullptr && isUe8m0BoundaryFlip<Format>(dev, ref, groupSize, got.rowMajorScale[i], refS[i],
                                                                   (*refScaleFp32)[i], maxScaleRel, fmax)) {
          ++tally.ue8m0BoundaryFlips;  // its values, apart by the factor 2, were checked there
          tally.flippedValues += groupSize;
          continue;
        }
        if (tally.failures++ < 3) ADD_FAILURE() << "UE8M0 scale " << got.rowMajorScale[i] << " vs " << refS[i];
      } else if (!(rel <= maxScaleRel) && tally.failures++ < 3) {
        ADD_FAILURE() << "scale " << got.rowMajorScale[i] << " vs " << refS[i] << ": relative " << rel << " > "
                      << maxScaleRel;
      }
      ++tally.scalesDiffering;
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
  // At least one flip is let through however few groups a tally holds: each
  // was checked as a flip, the bound is against their becoming common.
  EXPECT_LE(static_cast<double>(t.ue8m0BoundaryFlips),
            std::max(1.0, kFusedMaxUe8m0FlipFraction * static_cast<double>(t.scales)))
      << "UE8M0 boundary flips";
  EXPECT_EQ(t.failures, 0u);
}

}  // namespace fp8scale::test
