// fp8scale-pipeline: what a site's two paths produced, and the contract checks
// on it (done on the host for both the host and the GPU path).
//
// The checks of one site at M tokens:
//   - bit identity of the two paths: fp8 data [M, K]; every scale (m, g) read
//     through the two ColMajor{ld} views the GEMM gets, and equal to what the
//     row-major producer wrote; padding slots [M, ld) of every scale column
//     zero in both buffers; for RMSNorm the updated residual; the GEMM output
//     (GPU: all [align(M, 4), N] values; host: the checked columns);
//   - the GEMM error: the gate path's GEMM output at the checked columns
//     against the fp64 reference GEMM (reference/block_scaled_gemm.hpp) of
//     the old path's fp8 data and its row-major scales;
//   - reported, not checked: the quantization error, the same outputs against
//     an fp64 GEMM of the unquantized activation and weight.
// Both errors are row-normwise: max over rows m of
//   max_n |y(m, n) - ref(m, n)| / max_n |ref(m, n)|
// (a near-zero single output does not make it blow up; a scale read from the
// wrong slot moves it to O(1)).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fp8scale/fp8scale.hpp"
#include "fp8scale/reference/block_scaled_gemm.hpp"
#include "pipeline/site_data.hpp"

namespace fp8scale {
namespace pipeline {

/// Largest accepted GEMM error (row-normwise, see above). cuBLASLt's fp32
/// output is far inside it; the host path's is exact up to fp32 rounding.
constexpr double kGemmTolerance = 1e-2;

/// The layout the pipeline's GEMM reads (cuBLASLt's VEC128_32F operand on
/// the GPU; the host reference GEMM stands in for it): column-major scales,
/// ld = align(M, 4).
constexpr ScaleConsumer kConsumer = ScaleConsumer::kCublasLtVec128;

/// The gate, asked for this consumer (layout_policy.hpp's emitTransposed:
/// from M = 2, and at M = 1 too, since cuBLASLt's ld is then 4 and a
/// row-major emission would leave the padding slots to a relayout).
constexpr bool gateEmitsTransposed(index_t m) { return emitTransposed(kConsumer, m); }

/// What one path of a site produced for M tokens, copied to the host.
struct PathRun {
  std::vector<std::uint8_t> q;         ///< [M, K] e4m3fn, row stride K
  std::vector<float> scales;           ///< [G][ld]: the buffer of the view the GEMM read, padding included
  std::vector<std::uint8_t> residual;  ///< RMSNorm: the residual after the call, [M, K] raw bytes
  std::vector<double> gemmSampled;     ///< [M, S]: GEMM output at the checked columns
  std::vector<float> gemmFull;         ///< GPU: [align(M, 4), N], the whole output; host: empty
  int relayouts = 0;                   ///< relayout copies per call (GPU: materialize kernel launches)
  double producerUs = 0.0;             ///< producer (+ relayout), per call
  double totalUs = 0.0;                ///< producer (+ relayout) + GEMM, per call
};

/// Both paths of a site at M tokens.
struct SiteRun {
  index_t M = 0;
  index_t ld = 0;           ///< consumerScaleLd(kConsumer, M)
  bool transposed = false;  ///< the gate's choice
  PathRun gate;             ///< the gate's path
  PathRun old;              ///< row-major emit + materialize
  std::vector<float> rowMajorScales;  ///< [M][G]: the old path's scales as its producer wrote them
  std::int64_t weightMismatches = 0;  ///< GPU: device weight quant vs host reference, checked blocks
};

/// One line of the output table.
struct SiteRow {
  std::string site;
  index_t M = 0, K = 0, N = 0, G = 0, ld = 0;
  bool transposed = false;
  double gateProducerUs = 0, gateTotalUs = 0, oldProducerUs = 0, oldTotalUs = 0;
  int relayoutsGate = 0, relayoutsOld = 0;
  int relayoutsAvoided = 0;
  std::int64_t bytesNotCopied = 0;  ///< scale bytes the avoided relayout reads (M * G) and writes (G * ld), fp32
  std::int64_t fp8Mismatches = 0, scaleMismatches = 0, paddingNonZero = 0, residualMismatches = 0,
               gemmMismatches = 0, gemmCompared = 0, weightMismatches = 0;
  double gemmError = 0.0;
  double quantError = 0.0;
  bool ok = false;

  bool identical() const {
    return fp8Mismatches == 0 && scaleMismatches == 0 && paddingNonZero == 0 && residualMismatches == 0 &&
           gemmMismatches == 0;
  }
};

// ---------------------------------------------------------------------------
// Host GEMMs at the checked columns
// ---------------------------------------------------------------------------

/// fp8 bytes [rows, K] decoded to float.
inline std::vector<float> decodeRows(const std::vector<std::uint8_t>& q) {
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = decode<E4M3FN>(static_cast<std::uint8_t>(b));
  std::vector<float> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = table[q[i]];
  return out;
}

/// The fp64 block-scaled GEMM (reference::blockScaledGemmColumns) of decoded
/// activations xv [M, K] with scales `xs` (M, K / 128) against the checked
/// weight columns: y [M, S], S = ws.count, columns in WeightSample order.
template <class Layout>
std::vector<double> sampledGemm(const std::vector<float>& xv, const ScaleView<const float, Layout>& xs,
                                const WeightSample& ws, index_t M, index_t K) {
  struct Task {
    std::size_t block;
    index_t column;
  };
  std::vector<Task> tasks;
  std::vector<std::vector<double>> blockOut(ws.blocks.size());
  for (std::size_t b = 0; b < ws.blocks.size(); ++b) {
    blockOut[b].assign(static_cast<std::size_t>(M * ws.blocks[b].rows), 0.0);
    for (index_t c : ws.blocks[b].columns) tasks.push_back({b, c});
  }
  parallelFor(static_cast<index_t>(tasks.size()), [&](index_t t) {
    const WeightBlockSample& b = ws.blocks[tasks[t].block];
    const index_t c = tasks[t].column;  // local column: the block's scale row is 0 for every c < 128
    reference::blockScaledGemmColumns(xv.data(), xs, b.decoded.data(), ws.scaleView(b, K), M, K, c, c + 1,
                                      blockOut[tasks[t].block].data(), b.rows);
  });
  std::vector<double> y(static_cast<std::size_t>(M * ws.count));
  index_t s = 0;
  for (std::size_t b = 0; b < ws.blocks.size(); ++b)
    for (index_t c : ws.blocks[b].columns) {
      for (index_t m = 0; m < M; ++m) y[m * ws.count + s] = blockOut[b][m * ws.blocks[b].rows + c];
      ++s;
    }
  return y;
}

/// The fp32 values a site's producer quantizes, before quantization, [M, K]:
/// RMSNorm: (x + r) * rsqrt(mean((x + r)^2) + eps) * w (in double); group
/// quant: x; SiLU-clamp: siluClamp(gate, up, limit).
template <class In>
std::vector<float> unquantizedActivation(const SiteInput<In>& in, index_t M, float limit) {
  const SiteShape& s = in.shape;
  std::vector<float> a(static_cast<std::size_t>(M * s.K));
  parallelFor(M, [&](index_t m) {
    const In* x = in.x.data() + m * s.inputCols;
    float* out = a.data() + m * s.K;
    switch (s.producer) {
      case ProducerKind::kRmsNorm: {
        const In* r = in.residual.data() + m * s.K;
        double sumSq = 0.0;
        for (index_t k = 0; k < s.K; ++k) {
          out[k] = toFloat(x[k]) + toFloat(r[k]);
          sumSq += static_cast<double>(out[k]) * out[k];
        }
        const double inv = 1.0 / std::sqrt(sumSq / static_cast<double>(s.K) + kNormEps);
        for (index_t k = 0; k < s.K; ++k)
          out[k] = static_cast<float>(out[k] * inv * static_cast<double>(toFloat(in.normWeight[k])));
        break;
      }
      case ProducerKind::kGroupQuant:
        for (index_t k = 0; k < s.K; ++k) out[k] = toFloat(x[k]);
        break;
      case ProducerKind::kSiluClamp:
        for (index_t k = 0; k < s.K; ++k) out[k] = siluClamp(toFloat(x[k]), toFloat(x[s.K + k]), limit);
        break;
    }
  });
  return a;
}

/// fp64 GEMM of unquantized activations a [M, K] and the unquantized weight
/// at the checked columns: [M, S].
inline std::vector<double> unquantizedGemm(const std::vector<float>& a, const WeightSample& ws, index_t M, index_t K) {
  std::vector<const float*> rows;
  for (const auto& b : ws.blocks)
    for (index_t c : b.columns) rows.push_back(b.w.data() + c * K);
  std::vector<double> y(static_cast<std::size_t>(M * ws.count));
  parallelFor(ws.count, [&](index_t s) {
    const float* w = rows[s];
    for (index_t m = 0; m < M; ++m) {
      const float* x = a.data() + m * K;
      double acc = 0.0;
      for (index_t k = 0; k < K; ++k) acc += static_cast<double>(x[k]) * w[k];
      y[m * ws.count + s] = acc;
    }
  });
  return y;
}

/// Row-normwise error: max over rows of max_s |y - ref| / max_s |ref|. Entries
/// where ref is not finite are skipped (real inputs may hold inf / NaN) unless
/// y is finite there; a row of zeros in ref counts only if y is not zero too.
inline double rowRelativeError(const std::vector<double>& y, const std::vector<double>& ref, index_t M, index_t S) {
  double worst = 0.0;
  for (index_t m = 0; m < M; ++m) {
    double diff = 0.0, mag = 0.0;
    for (index_t s = 0; s < S; ++s) {
      const double r = ref[m * S + s], v = y[m * S + s];
      if (!std::isfinite(r)) {
        if (std::isfinite(v)) return std::numeric_limits<double>::infinity();
        continue;
      }
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      diff = std::fmax(diff, std::fabs(v - r));
      mag = std::fmax(mag, std::fabs(r));
    }
    if (diff == 0.0) continue;
    worst = std::fmax(worst, mag > 0.0 ? diff / mag : std::numeric_limits<double>::infinity());
  }
  return worst;
}

// ---------------------------------------------------------------------------
// The contract checks
// ---------------------------------------------------------------------------

inline std::int64_t countDifferentBytes(const void* a, const void* b, std::size_t bytes) {
  const auto* pa = static_cast<const std::uint8_t*>(a);
  const auto* pb = static_cast<const std::uint8_t*>(b);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < bytes; ++i) n += pa[i] != pb[i];
  return n;
}

inline bool sameBits(float a, float b) { return bitCast<std::uint32_t>(a) == bitCast<std::uint32_t>(b); }

/// Changes one value of the gate path's result (--corrupt, to show that the
/// checks catch it): "fp8" one byte, "scale" scale (0, 0), "padding" the first
/// padding slot of column 0 (when ld > M), "residual" one residual byte (RMSNorm
/// sites), "gemm" one GEMM output value.
inline void corruptGatePath(SiteRun& run, const std::string& what) {
  PathRun& p = run.gate;
  if (what == "fp8" && !p.q.empty()) p.q[0] ^= 0x01;
  if (what == "scale" && !p.scales.empty()) p.scales[0] = bitCast<float>(bitCast<std::uint32_t>(p.scales[0]) ^ 1u);
  if (what == "padding" && run.ld > run.M) p.scales[static_cast<std::size_t>(run.M)] = 1.0f;
  if (what == "residual" && !p.residual.empty()) p.residual[0] ^= 0x01;
  if (what == "gemm") {
    if (!p.gemmSampled.empty()) p.gemmSampled[0] += 1.0;
    if (!p.gemmFull.empty()) p.gemmFull[0] += 1.0f;
  }
}

/// Checks one site's run and fills its output row.
template <class In>
SiteRow evaluate(const SiteInput<In>& in, const SiteRun& run, const WeightSample& ws, float swigluLimit) {
  const SiteShape& s = in.shape;
  SiteRow row;
  row.site = siteName(s.id);
  row.M = run.M;
  row.K = s.K;
  row.N = s.N;
  row.G = s.K / kGroup;
  row.ld = run.ld;
  row.transposed = run.transposed;
  row.gateProducerUs = run.gate.producerUs;
  row.gateTotalUs = run.gate.totalUs;
  row.oldProducerUs = run.old.producerUs;
  row.oldTotalUs = run.old.totalUs;
  row.relayoutsGate = run.gate.relayouts;
  row.relayoutsOld = run.old.relayouts;
  row.relayoutsAvoided = run.old.relayouts - run.gate.relayouts;
  row.bytesNotCopied =
      row.relayoutsAvoided > 0 ? row.relayoutsAvoided * (row.M * row.G + row.G * row.ld) * static_cast<index_t>(sizeof(float)) : 0;
  const index_t M = run.M, K = s.K, G = row.G, ld = run.ld;

  // fp8 data
  row.fp8Mismatches = run.gate.q.size() == run.old.q.size()
                          ? countDifferentBytes(run.gate.q.data(), run.old.q.data(), run.gate.q.size())
                          : M * K;

  // Scales through the views the GEMM read, and against the row-major emission.
  const auto gateView = ScaleView<const float, ColMajor>::fromValidated(run.gate.scales.data(), M, G, ColMajor{ld});
  const auto oldView = ScaleView<const float, ColMajor>::fromValidated(run.old.scales.data(), M, G, ColMajor{ld});
  const auto rowView = ScaleView<const float, RowMajor>::fromValidated(run.rowMajorScales.data(), M, G, RowMajor{G});
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g)
      row.scaleMismatches += !sameBits(gateView(m, g), oldView(m, g)) || !sameBits(gateView(m, g), rowView(m, g));
  for (index_t g = 0; g < G; ++g)
    for (index_t m = M; m < ld; ++m)
      row.paddingNonZero += (bitCast<std::uint32_t>(run.gate.scales[g * ld + m]) != 0u) +
                            (bitCast<std::uint32_t>(run.old.scales[g * ld + m]) != 0u);

  // RMSNorm's residual
  if (run.gate.residual.size() != run.old.residual.size())
    row.residualMismatches = M * K;
  else
    row.residualMismatches =
        countDifferentBytes(run.gate.residual.data(), run.old.residual.data(), run.gate.residual.size());

  // GEMM output, bit for bit (GPU: the whole output; host: the checked columns)
  const bool full = !run.gate.gemmFull.empty() || !run.old.gemmFull.empty();
  if (full) {
    row.gemmCompared = static_cast<std::int64_t>(run.gate.gemmFull.size());
    if (run.gate.gemmFull.size() != run.old.gemmFull.size()) {
      row.gemmMismatches = row.gemmCompared;
    } else {
      for (std::size_t i = 0; i < run.gate.gemmFull.size(); ++i)
        row.gemmMismatches += !sameBits(run.gate.gemmFull[i], run.old.gemmFull[i]);
    }
  } else {
    row.gemmCompared = static_cast<std::int64_t>(run.gate.gemmSampled.size());
    if (run.gate.gemmSampled.size() != run.old.gemmSampled.size()) {
      row.gemmMismatches = row.gemmCompared;
    } else {
      for (std::size_t i = 0; i < run.gate.gemmSampled.size(); ++i)
        row.gemmMismatches +=
            bitCast<std::uint64_t>(run.gate.gemmSampled[i]) != bitCast<std::uint64_t>(run.old.gemmSampled[i]);
    }
  }

  // GEMM error: against fp64 of the old path's bytes and its row-major scales.
  const std::vector<double> yardstick = sampledGemm(decodeRows(run.old.q), rowView, ws, M, K);
  row.gemmError = rowRelativeError(run.gate.gemmSampled, yardstick, M, ws.count);
  const std::vector<double> exact = unquantizedGemm(unquantizedActivation(in, M, swigluLimit), ws, M, K);
  row.quantError = rowRelativeError(run.gate.gemmSampled, exact, M, ws.count);

  row.weightMismatches = run.weightMismatches;
  row.ok = row.identical() && row.weightMismatches == 0 && row.gemmError <= kGemmTolerance;
  return row;
}

/// Wall-clock seconds of fn().
template <class F>
double wallSeconds(F&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pipeline
}  // namespace fp8scale
