// Shared pieces of the producer device tests: the type combinations, input
// generators with awkward values planted, poisoned buffers, and
// the comparisons (bitwise, and "within one fp8 step" for fused producers).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_test_util.cuh"
#include "fp8scale/fp8scale.hpp"

namespace fp8scale::test {

/// One (input type, fp8 format, scale rule) combination of a typed suite.
template <class In_, class Format_, class Rule_>
struct Combo {
  using In = In_;
  using Format = Format_;
  using Rule = Rule_;
  static constexpr ScaleRule kRule = std::is_same<Rule_, ScaleUE8M0>::value ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
};

using AllCombos = ::testing::Types<
    Combo<BFloat16, E4M3FN, ScaleFp32>, Combo<BFloat16, E4M3FN, ScaleUE8M0>, Combo<BFloat16, E4M3FNUZ, ScaleFp32>,
    Combo<BFloat16, E4M3FNUZ, ScaleUE8M0>, Combo<Float16, E4M3FN, ScaleFp32>, Combo<Float16, E4M3FN, ScaleUE8M0>,
    Combo<Float16, E4M3FNUZ, ScaleFp32>, Combo<Float16, E4M3FNUZ, ScaleUE8M0>, Combo<float, E4M3FN, ScaleFp32>,
    Combo<float, E4M3FN, ScaleUE8M0>, Combo<float, E4M3FNUZ, ScaleFp32>, Combo<float, E4M3FNUZ, ScaleUE8M0>>;

template <class In>
const char* inputName() {
  if constexpr (std::is_same<In, float>::value) return "fp32";
  else return In::kName;
}

struct ComboNames {
  template <class C>
  static std::string GetName(int) {
    return std::string(inputName<typename C::In>()) + "_" + C::Format::kName + "_" + C::Rule::kName;
  }
};


const std::vector<index_t> kContractRows = {0, 1, 2, 3, 4, 5, 8, 16, 17, 33, 129, 1000};

template <class In>
In fromF(float v) {
  return fromFloat<In>(v);
}

/// Activation-like values: N(0, 1) with a few outlier channels 100-1000x
/// larger, then awkward values planted at fixed places:
/// row 0 group 0 all zero; row 1 entirely zero; NaN and +-inf in row 2;
/// row 3 group 0 at exact saturation (a power-of-two multiple of fmax), and
/// fp32/bf16 subnormals in row 4. Rows past those are plain activations.
template <class In>
std::vector<In> makeActivations(index_t M, index_t cols, index_t ld, unsigned seed, float fmax) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<In> x(static_cast<std::size_t>(M * ld), fromF<In>(0.0f));
  const index_t outliers[] = {7 % cols, (cols / 3) | 1, cols - 5};
  for (index_t m = 0; m < M; ++m)
    for (index_t k = 0; k < cols; ++k) {
      float v = normal(rng);
      for (index_t o : outliers)
        if (k == o) v *= 100.0f + 900.0f * static_cast<float>(m % 7) / 6.0f;
      x[m * ld + k] = fromF<In>(v);
    }
  const float inf = std::numeric_limits<float>::infinity();
  if (M > 0)
    for (index_t k = 0; k < std::min<index_t>(cols, 128); ++k) x[k] = fromF<In>(0.0f);
  if (M > 1)
    for (index_t k = 0; k < cols; ++k) x[ld + k] = fromF<In>(0.0f);
  if (M > 2 && cols >= 256) {
    x[2 * ld + 3] = fromF<In>(std::numeric_limits<float>::quiet_NaN());
    x[2 * ld + 130] = fromF<In>(inf);
    x[2 * ld + 200] = fromF<In>(-inf);
  }
  if (M > 3) {
    for (index_t k = 0; k < std::min<index_t>(cols, 32); ++k)
      x[3 * ld + k] = fromF<In>((k % 2 ? -1.0f : 1.0f) * fmax * 0.25f * static_cast<float>(k % 5));
    x[3 * ld + 1] = fromF<In>(-fmax * 4.0f);  // exactly 4 fmax: lands on fmax after scaling
  }
  if (M > 4)
    for (index_t k = 0; k < std::min<index_t>(cols, 64); ++k)
      x[4 * ld + k] = fromF<In>(std::ldexp(1.0f, -130 + static_cast<int>(k % 8)) * (k % 2 ? -1.0f : 1.0f));
  return x;
}

/// Device buffer filled with garbage before every producer call.
constexpr unsigned char kGarbage = 0xAB;

/// Bitwise equality of two float vectors (NaN == NaN when the bits match).
inline std::size_t countBitDiffs(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], 4) != 0;
  return n;
}

/// Position of an fp8 code on the number line as an integer, so that
/// neighbouring values differ by 1 (sign-magnitude -> ordered; both formats).
inline int fp8Ordinal(std::uint8_t b) {
  const int mag = b & 0x7F;
  return (b & 0x80) ? -mag : mag;
}

/// Compares n fused-producer fp8 values with the host reference's: every
/// element within one fp8 step, NaN where the reference has NaN. Returns the
/// number of elements that differ at all; beyondOneStep counts those of them
/// more than one step apart or NaN on one side only.
template <class Format>
std::size_t countFp8StepDiffs(const std::uint8_t* dev, const std::uint8_t* ref, std::size_t n,
                              std::size_t& beyondOneStep) {
  std::size_t diff = 0;
  beyondOneStep = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (dev[i] == ref[i]) continue;
    ++diff;
    const bool devNaN = std::isnan(decode<Format>(dev[i]));
    const bool refNaN = std::isnan(decode<Format>(ref[i]));
    if (devNaN || refNaN || std::abs(fp8Ordinal(dev[i]) - fp8Ordinal(ref[i])) > 1) ++beyondOneStep;
  }
  return diff;
}

/// What one contract run leaves on the host: the row-major run's fp8 data and
/// scales (for the reference comparison).
struct ContractOutput {
  std::vector<std::uint8_t> q;
  std::vector<float> rowMajorScale;
};

/// The library's core contract for one shape: the producer with
/// TRANSPOSE_SCALE = true, read through its zero-copy view, gives the same fp8
/// bytes and the same scale values (padding included) as TRANSPOSE_SCALE =
/// false followed by materialize. `launch(q, scaleView)` runs the producer
/// with the layout of the view it is given. All outputs start as garbage.
template <class Format, class Launch>
ContractOutput checkTransposeContract(index_t M, index_t K, int groupSize, index_t ld, const Launch& launch) {
  const index_t G = K / groupSize;
  const index_t ldq = K + 32;  // padded fp8 rows: the gap must stay untouched
  ContractOutput out;
  DeviceBuffer<std::uint8_t> qRow(M * ldq + 16), qCol(M * ldq + 16);
  // Poisoned guards past both scale buffers, wide enough that a write by a
  // whole group tile past the last column (up to 64 columns of ld slots, or
  // rows of G) would land in them and be seen, not just fall off the
  // allocation.
  const index_t colGuard = 64 * (ld > 0 ? ld : 1) + 16, rowGuard = 64 * (G > 0 ? G : 1) + 16;
  DeviceBuffer<float> sRow(M * G + rowGuard), sCol(G * ld + colGuard), sMat(G * ld + 1);
  qRow.poison(kGarbage);
  qCol.poison(kGarbage);
  sRow.poison(kGarbage);
  sCol.poison(kGarbage);
  sMat.poison(kGarbage);

  auto row = launch(Fp8Matrix<Format>{qRow.get(), M, K, ldq}, rowMajorView(sRow.get(), M, G).value());
  auto col = launch(Fp8Matrix<Format>{qCol.get(), M, K, ldq}, colMajorView(sCol.get(), M, G, ld).value());
  EXPECT_TRUE(row.isOk()) << row.status().message();
  EXPECT_TRUE(col.isOk()) << col.status().message();
  if (!row.isOk() || !col.isOk()) return out;
  // The producer's own buffer, read through strides (1, ld): no copy.
  EXPECT_EQ(col.value().scale.data(), sCol.get());
  EXPECT_EQ(col.value().scale.stride(0), 1);
  EXPECT_EQ(col.value().scale.stride(1), ld);
  EXPECT_EQ(col.value().data.data, qCol.get());
  auto mat = materialize(row.value().scale, sMat.get(), ld, nullptr);
  EXPECT_TRUE(mat.isOk()) << mat.status().message();
  EXPECT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);

  // fp8 rows: equal between the runs; the row gaps and the tail untouched.
  const std::vector<std::uint8_t> q1 = qRow.download(), q2 = qCol.download();
  out.q.resize(M * K);
  std::size_t qDiffs = 0, gapWrites = 0;
  for (index_t m = 0; m < M; ++m) {
    for (index_t k = 0; k < K; ++k) {
      out.q[m * K + k] = q1[m * ldq + k];
      qDiffs += q1[m * ldq + k] != q2[m * ldq + k];
    }
    for (index_t k = K; k < ldq; ++k) gapWrites += (q1[m * ldq + k] != kGarbage) + (q2[m * ldq + k] != kGarbage);
  }
  for (index_t i = M * ldq; i < M * ldq + 16; ++i) gapWrites += (q1[i] != kGarbage) + (q2[i] != kGarbage);
  EXPECT_EQ(qDiffs, 0u) << "fp8 data differs between TRANSPOSE_SCALE true and false";
  EXPECT_EQ(gapWrites, 0u) << "a producer wrote outside its [M, K] rows of q";

  // Floats of the guards still hold the poison byte in all four bytes.
  const auto guardWrites = [](const std::vector<float>& v, std::size_t from) {
    std::size_t n = 0;
    for (std::size_t i = from; i < v.size(); ++i) {
      unsigned char b[4];
      std::memcpy(b, &v[i], 4);
      n += b[0] != kGarbage || b[1] != kGarbage || b[2] != kGarbage || b[3] != kGarbage;
    }
    return n;
  };
  const std::vector<float> rowScales = sRow.download();
  out.rowMajorScale.assign(rowScales.begin(), rowScales.begin() + M * G);
  EXPECT_EQ(guardWrites(rowScales, M * G), 0u) << "the producer wrote past the row-major scales";

  // Materialized (or aliased, when materialize was a no-op) [G][ld] bytes.
  std::vector<float> materialized = mat.value().data() == sRow.get() ? rowScales : sMat.download();
  materialized.resize(G * ld);
  std::vector<float> transposed = sCol.download();
  EXPECT_EQ(guardWrites(transposed, G * ld), 0u) << "the producer wrote past G * ld";
  transposed.resize(G * ld);
  std::size_t scaleDiffs = 0, paddingDiffs = 0;
  for (index_t g = 0; g < G; ++g)
    for (index_t m = 0; m < ld; ++m) {
      const float t = transposed[g * ld + m], w = materialized[g * ld + m];
      if (std::memcmp(&t, &w, 4) != 0 && scaleDiffs++ < 3)
        ADD_FAILURE() << "scale (" << m << ", " << g << "): transposed emit " << t << ", materialized " << w;
      if (m >= M && t != 0.0f && paddingDiffs++ < 3)
        ADD_FAILURE() << "padding slot (" << m << ", " << g << ") holds " << t << ", not 0";
    }
  EXPECT_EQ(scaleDiffs, 0u) << "scales differ from row-major + materialize";
  EXPECT_EQ(paddingDiffs, 0u) << "padding slots not zeroed";
  return out;
}

/// ld of the column-major run: exactly M for even M, align(M, 4) for odd M,
/// so both consumer conventions are covered across the M list.
inline index_t contractLd(index_t M) { return M % 2 ? alignUp(M, 4) : M; }

/// The rows just below and at the group-tile producers' small-grid boundary
/// on this device, for `groups` groups of `groupSize` `In` values a row: the
/// largest M whose full-size grid (GroupTilePolicy::kThreads-thread blocks of
/// kElems values) has fewer blocks than the device has SMs, the launch
/// plan's rule (planGroupTile), so that it runs the small-grid kernel, and M + 1, which runs the full-size
/// one; for each scale layout (their tiles differ), deduplicated. Taken from
/// the device, so the boundary is tested whatever its SM count.
template <class In>
std::vector<index_t> smallGridBoundaryRows(index_t groups, int groupSize) {
  int sms = 0, device = 0;
  EXPECT_EQ(detail::cachedSmCount(&sms, &device), kDeviceSuccess);
  std::vector<index_t> rows;
  auto blocks = [&](auto transpose, index_t M) {
    const detail::GroupTileGrid grid =
        detail::groupTileGrid("test", decltype(transpose)::value, M, groups, groupSize, GroupTilePolicy<In>::kThreads,
                              GroupTilePolicy<In>::kElems, 0, 0, GroupTilePolicy<In>::kSectorScales);
    EXPECT_TRUE(grid.status.isOk());
    return grid.gridX * grid.gridY;
  };
  auto add = [&](auto transpose) {
    index_t M = 1;
    while (blocks(transpose, M + 1) < sms) ++M;
    for (index_t r : {M, M + 1})
      if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
  };
  add(std::false_type{});
  add(std::true_type{});
  return rows;
}

}  // namespace fp8scale::test
