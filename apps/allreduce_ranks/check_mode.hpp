// fp8scale-allreduce-ranks --mode check: for each M, every algorithm (one-
// stage, two-stage, auto and, when available, the NCCL fallback) with both
// scale layouts (TRANSPOSE_SCALE false: RowMajor; true: ColMajor with
// ld = align(M, 4)), on outputs filled with garbage first. One line per
// check:
//
//   rank r M=.. K=.. layout=.. algo=..: <check> ok|FAIL <detail>
//
//   host-sum          allreduceSum equals the host's rank-ordered fp32 sum
//                     (reference::allreduceSum), bit for bit
//   host-reference    residual_out equals the host reference bit for bit;
//                     fp8 within one step of it, fp32 scales within 2^-16
//                     relative, normOut within one bf16 ulp or 2^-16 relative
//                     (the bounds of tests/device/fused_tally.cuh); the
//                     fraction of fp8 values off by one step is reported, and
//                     bounded (1%) over the whole run as there
//   padding           column-major padding slots [M, ld) are 0; nothing is
//                     written past q or the scales
//   equals-one-stage  every byte of q, scales (padding included), residual
//                     and normOut equals the one-stage path's
//   equals-row-major  column-major scales read through their view, q,
//                     residual and normOut equal the row-major run's
//   ranks-identical   the hashes of those four outputs are the same on every
//                     rank (exchanged after each M)
//
// A launcher that refuses, or a device fault (a peer that never arrived, a
// peer with another shape), ends the rank: the collective is broken.
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "allreduce_ranks/rank_context.hpp"
#include "fp8scale/reference/allreduce_fused.hpp"

namespace fp8scale {
namespace ranks {

/// The fraction of fp8 values that may differ (by one step) from the host
/// reference over a run, and the relative bound on fp32 RMSNorm scales: the
/// library's stated bounds for the fused producers.
constexpr double kMaxDifferingFraction = reference::kFusedMaxDifferingFraction;
using reference::kRmsNormMaxScaleRel;

/// Byte every output buffer is filled with before a call.
constexpr unsigned char kGarbage = 0xAB;
/// Bytes after q[M, K] that must stay garbage.
constexpr index_t kQTailBytes = 16;

/// The algorithms a check case runs.
enum class Path : int { kOneStage = 0, kTwoStage = 1, kAuto = 2, kNccl = 3 };

inline const char* pathName(Path p) {
  switch (p) {
    case Path::kOneStage: return "one-stage";
    case Path::kTwoStage: return "two-stage";
    case Path::kAuto: return "auto";
    case Path::kNccl: return "nccl";
  }
  return "?";
}

inline const char* algorithmName(AllreduceAlgorithm a) {
  return a == AllreduceAlgorithm::kOneStage ? "one-stage" : a == AllreduceAlgorithm::kTwoStage ? "two-stage" : "auto";
}

/// Counts and prints the check lines of one rank.
class CheckLog {
 public:
  explicit CheckLog(int rank) : rank_(rank) {}

  void report(index_t M, index_t K, const std::string& layout, const std::string& algo, const char* check, bool ok,
              const std::string& detail) {
    ++checks_;
    failed_ += !ok;
    std::printf("rank %d M=%lld K=%lld layout=%s algo=%s: %s %s %s\n", rank_, static_cast<long long>(M),
                static_cast<long long>(K), layout.c_str(), algo.c_str(), check, ok ? "ok" : "FAIL", detail.c_str());
  }
  int checks() const { return checks_; }
  int failed() const { return failed_; }

 private:
  int rank_ = 0;
  int checks_ = 0;
  int failed_ = 0;
};

/// One scale layout of a case.
struct LayoutCase {
  bool colMajor = false;
  index_t M = 0, G = 0, ld = 0;  ///< ld: G (row-major) or align(M, 4) (column-major)
  std::string name;              ///< "row" or "col(ld=..)"
  /// Scale elements the layout addresses: M * G or G * ld.
  index_t span() const { return colMajor ? G * ld : M * G; }
  /// Element of scale (m, g) in the buffer.
  index_t at(index_t m, index_t g) const { return colMajor ? g * ld + m : m * G + g; }
};

inline LayoutCase rowMajorCase(index_t M, index_t G) { return {false, M, G, G, "row"}; }
inline LayoutCase colMajorCase(index_t M, index_t G) {
  const index_t ld = alignUp(M, 4);
  return {true, M, G, ld, "col(ld=" + std::to_string(ld) + ")"};
}

/// One run's outputs on the host: q with its tail, every scale element of
/// the layout plus one after it, residual_out and normOut.
struct HostOutputs {
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  std::vector<In> r, y;
};

/// The host reference of a case (reference/allreduce_fused.hpp).
struct HostReference {
  std::vector<In> sum, residual, normOut;
  std::vector<std::uint8_t> q;
  std::vector<float> s;  ///< row-major (M, G)
};

inline HostReference hostReference(const std::vector<std::vector<In>>& partials, const std::vector<In>& residual0,
                                   const std::vector<In>& weight, index_t M, index_t K) {
  const index_t G = K / kGroup;
  HostReference h;
  std::vector<const In*> parts;
  for (const auto& p : partials) parts.push_back(p.data());
  h.sum.resize(static_cast<std::size_t>(M * K));
  checkStatus(reference::allreduceSum(parts, M, K, K, h.sum.data(), K));
  h.residual = residual0;
  h.normOut.resize(static_cast<std::size_t>(M * K));
  h.q.resize(static_cast<std::size_t>(M * K));
  h.s.resize(static_cast<std::size_t>(M * G));
  RmsNormQuantInput<In> in;
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.residual = h.residual.data();
  in.ldResidual = K;
  in.weight = weight.data();
  in.normEps = 1e-6f;
  in.normOut = h.normOut.data();
  in.ldNormOut = K;
  checkStatus(reference::allreduceRmsNormQuant<Format, ScaleFp32>(parts, in, Fp8Matrix<Format>{h.q.data(), M, K, K},
                                                                  rowMajorView(h.s.data(), M, G).value(),
                                                                  static_cast<int>(kGroup)));
  return h;
}

/// Position of an fp8 code on the number line (neighbours differ by 1).
inline int fp8Ordinal(std::uint8_t b) { return (b & 0x80) ? -(b & 0x7F) : (b & 0x7F); }

/// 16-bit words that differ (bit for bit).
inline std::size_t countWordDiffs(const std::vector<In>& a, const std::vector<In>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i].bits != b[i].bits;
  return n;
}

inline std::string percent(std::size_t part, std::size_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f%%", whole != 0 ? 100.0 * static_cast<double>(part) / whole : 0.0);
  return buf;
}

/// Differences of one run from the host reference.
struct ReferenceDiff {
  std::size_t fp8Differing = 0, fp8BeyondOneStep = 0;
  std::size_t scalesDiffering = 0, scalesBeyondBound = 0;
  double worstScaleRel = 0.0;
  std::size_t residualDiffs = 0, normOutBeyondBound = 0;
  bool ok() const { return fp8BeyondOneStep == 0 && scalesBeyondBound == 0 && residualDiffs == 0 && normOutBeyondBound == 0; }
};

inline ReferenceDiff compareWithReference(const HostOutputs& got, const HostReference& ref, const LayoutCase& lc,
                                          index_t K) {
  ReferenceDiff d;
  const index_t M = lc.M, G = lc.G;
  for (index_t i = 0; i < M * K; ++i) {
    const std::uint8_t a = got.q[i], b = ref.q[i];
    if (a == b) continue;
    ++d.fp8Differing;
    const bool nan = std::isnan(decode<Format>(a)) || std::isnan(decode<Format>(b));
    if (nan || std::abs(fp8Ordinal(a) - fp8Ordinal(b)) > 1) ++d.fp8BeyondOneStep;
  }
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) {
      const float a = got.s[lc.at(m, g)], b = ref.s[m * G + g];
      if (std::memcmp(&a, &b, 4) == 0) continue;
      ++d.scalesDiffering;
      const double rel = std::fabs(static_cast<double>(a) - b) / std::fabs(static_cast<double>(b));
      d.worstScaleRel = std::max(d.worstScaleRel, rel);
      if (!(rel <= kRmsNormMaxScaleRel)) ++d.scalesBeyondBound;
    }
  d.residualDiffs = countWordDiffs(got.r, ref.residual);
  for (index_t i = 0; i < M * K; ++i) {
    if (got.y[i].bits == ref.normOut[i].bits) continue;
    const float a = toFloat(ref.normOut[i]), b = toFloat(got.y[i]);
    const float bound = std::max(std::ldexp(std::fabs(a), -7), std::fabs(a) * static_cast<float>(kRmsNormMaxScaleRel));
    if (!(std::fabs(a - b) <= bound + 1e-30f)) ++d.normOutBeyondBound;
  }
  return d;
}

/// Writes outside the outputs: non-zero padding slots, touched tail bytes.
struct PaddingDiff {
  std::size_t nonZeroPadding = 0, paddingSlots = 0, touchedTail = 0;
};

inline PaddingDiff checkPadding(const HostOutputs& got, const LayoutCase& lc, index_t K) {
  PaddingDiff d;
  if (lc.colMajor)
    for (index_t g = 0; g < lc.G; ++g)
      for (index_t m = lc.M; m < lc.ld; ++m) {
        ++d.paddingSlots;
        std::uint32_t bits;
        std::memcpy(&bits, &got.s[g * lc.ld + m], 4);
        d.nonZeroPadding += bits != 0u;
      }
  for (index_t i = lc.M * K; i < lc.M * K + kQTailBytes; ++i) d.touchedTail += got.q[i] != kGarbage;
  unsigned char tail[4];
  std::memcpy(tail, &got.s[lc.span()], 4);
  for (unsigned char b : tail) d.touchedTail += b != kGarbage;
  return d;
}

/// Every byte of every output equal (padding and tails included).
inline bool sameBytes(const HostOutputs& a, const HostOutputs& b, std::string& which) {
  which.clear();
  auto add = [&](const char* name) { which += which.empty() ? name : std::string(", ") + name; };
  if (a.q != b.q) add("fp8");
  if (a.s.size() != b.s.size() || std::memcmp(a.s.data(), b.s.data(), a.s.size() * 4) != 0) add("scales");
  if (countWordDiffs(a.r, b.r) != 0) add("residual");
  if (countWordDiffs(a.y, b.y) != 0) add("normOut");
  return which.empty();
}

/// A column-major run equals a row-major one: q rows, residual, normOut, and
/// every scale value read through the two layouts.
inline bool sameAcrossLayouts(const HostOutputs& row, const LayoutCase& rowCase, const HostOutputs& col,
                              const LayoutCase& colCase, index_t K, std::string& which) {
  which.clear();
  auto add = [&](const char* name) { which += which.empty() ? name : std::string(", ") + name; };
  if (!std::equal(row.q.begin(), row.q.begin() + rowCase.M * K, col.q.begin())) add("fp8");
  std::size_t scaleDiffs = 0;
  for (index_t m = 0; m < rowCase.M; ++m)
    for (index_t g = 0; g < rowCase.G; ++g)
      scaleDiffs += std::memcmp(&row.s[rowCase.at(m, g)], &col.s[colCase.at(m, g)], 4) != 0;
  if (scaleDiffs != 0) add("scales");
  if (countWordDiffs(row.r, col.r) != 0) add("residual");
  if (countWordDiffs(row.y, col.y) != 0) add("normOut");
  return which.empty();
}

/// The device side of one case: inputs and output buffers sized for M.
struct CaseBuffers {
  index_t M = 0, K = 0, G = 0;
  DeviceMemory<In> residual0, weight, sum;
  DeviceMemory<std::uint8_t> q;
  DeviceMemory<float> s;
  DeviceMemory<In> r, y;

  CaseBuffers(index_t m, index_t k)
      : M(m), K(k), G(k / kGroup), residual0(static_cast<std::size_t>(m * k)), weight(static_cast<std::size_t>(k)),
        sum(static_cast<std::size_t>(m * k)), q(static_cast<std::size_t>(m * k + kQTailBytes)),
        s(static_cast<std::size_t>(k / kGroup * alignUp(m, 4) + 1)), r(static_cast<std::size_t>(m * k)),
        y(static_cast<std::size_t>(m * k)) {}

  /// The state before a call, on ctx's stream: q, scales and normOut filled
  /// with garbage, the residual reset from `residualSource`.
  void resetOutputs(const RankContext& ctx, const In* residualSource) {
    checkCuda(cudaMemsetAsync(q.get(), kGarbage, q.bytes(), ctx.stream), "cudaMemsetAsync (q)");
    checkCuda(cudaMemsetAsync(s.get(), kGarbage, s.bytes(), ctx.stream), "cudaMemsetAsync (scales)");
    checkCuda(cudaMemsetAsync(y.get(), kGarbage, y.bytes(), ctx.stream), "cudaMemsetAsync (normOut)");
    checkCuda(cudaMemcpyAsync(r.get(), residualSource, r.bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
              "cudaMemcpyAsync (residual)");
  }

  /// The call's input: this rank's partial (ctx.x), the residual r and
  /// normOut y of these buffers, `weightSource`.
  RmsNormQuantInput<In> input(const RankContext& ctx, const In* weightSource) {
    RmsNormQuantInput<In> in;
    in.x = ctx.x.get();
    in.rows = M;
    in.cols = K;
    in.ldx = K;
    in.residual = r.get();
    in.ldResidual = K;
    in.weight = weightSource;
    in.normEps = 1e-6f;
    in.normOut = y.get();
    in.ldNormOut = K;
    return in;
  }
};

/// Runs `path` once into fresh outputs (garbage, and the case's residual)
/// and copies them back. Throws on a refused launch or a device fault.
inline HostOutputs runPath(RankContext& ctx, Path path, CaseBuffers& b, const LayoutCase& lc) {
  const index_t M = b.M, K = b.K;
  b.resetOutputs(ctx, b.residual0.get());
  const RmsNormQuantInput<In> in = b.input(ctx, b.weight.get());
  const Fp8Matrix<Format> q{b.q.get(), M, K, K};
  const auto launch = [&](auto scale) {
    const QuantOptions opt;  // fp32 scales, groups of 128, the format's fmax
    switch (path) {
      case Path::kOneStage:
      case Path::kTwoStage:
      case Path::kAuto: {
        const AllreduceAlgorithm algo = path == Path::kOneStage   ? AllreduceAlgorithm::kOneStage
                                        : path == Path::kTwoStage ? AllreduceAlgorithm::kTwoStage
                                                                  : AllreduceAlgorithm::kAuto;
        return allreduceRmsNormQuant<Format>(*ctx.comm, in, q, scale, opt, ctx.stream, algo).status();
      }
      case Path::kNccl:
#if defined(FP8SCALE_WITH_NCCL)
        // The engine's entry point with no custom communicator: the gathered
        // fallback (ncclAllGather + gatheredRmsNormQuant).
        return allreduceRmsNormQuantOrFallback<Format>(nullptr, &ctx.fallback, in, q, scale, opt, ctx.stream)
            .status();
#else
        break;
#endif
    }
    return Status::error(StatusCode::kInvalidValue, "fp8scale-allreduce-ranks", "path", "not built in");
  };
  checkStatus(lc.colMajor ? launch(colMajorView(b.s.get(), M, b.G, lc.ld).value())
                          : launch(rowMajorView(b.s.get(), M, b.G).value()));
  checkStatus(ctx.syncAndCheckFaults());
  HostOutputs out;
  out.q = ctx.download(b.q.get(), b.q.size());
  out.s = ctx.download(b.s.get(), static_cast<std::size_t>(lc.span() + 1));
  out.r = ctx.download(b.r.get(), b.r.size());
  out.y = ctx.download(b.y.get(), b.y.size());
  return out;
}

/// The four output hashes of one (layout, path) run: fp8, scales, residual, normOut.
inline void appendHashes(const HostOutputs& o, std::vector<std::uint64_t>& hashes) {
  hashes.push_back(hashBytes(o.q.data(), o.q.size()));
  hashes.push_back(hashBytes(o.s.data(), o.s.size() * sizeof(float)));
  hashes.push_back(hashBytes(o.r.data(), o.r.size() * sizeof(In)));
  hashes.push_back(hashBytes(o.y.data(), o.y.size() * sizeof(In)));
}

inline std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

/// Runs the check sweep. Returns the number of failed checks (0: passed).
inline int runCheckMode(RankContext& ctx, const Options& o) {
  CheckLog log(ctx.rank);
  const index_t K = ctx.cols, G = K / kGroup;
  std::vector<Path> paths = {Path::kOneStage, Path::kTwoStage, Path::kAuto};
  if (ctx.hasNccl()) paths.push_back(Path::kNccl);
  std::size_t fp8Elements = 0, fp8Differing = 0;
  const std::vector<In> weight = makeWeight(K);

  for (index_t M : o.sweep()) {
    // ---- Inputs and the host reference ------------------------------------------
    std::vector<std::vector<In>> partials;
    for (int p = 0; p < ctx.world; ++p) partials.push_back(makePartial(p, M, K));
    const std::vector<In> residual0 = makeResidual(M, K);
    const HostReference ref = hostReference(partials, residual0, weight, M, K);
    CaseBuffers b(M, K);
    ctx.upload(ctx.x.get(), partials[ctx.rank]);
    ctx.upload(b.residual0.get(), residual0);
    ctx.upload(b.weight.get(), weight);

    // ---- The allreduce alone against the host's rank-ordered sum -----------------
    for (AllreduceAlgorithm algo :
         {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage, AllreduceAlgorithm::kAuto}) {
      checkCuda(cudaMemsetAsync(b.sum.get(), kGarbage, b.sum.bytes(), ctx.stream), "cudaMemsetAsync (sum)");
      checkStatus(allreduceSum(*ctx.comm, static_cast<const In*>(ctx.x.get()), M, K, K, b.sum.get(), K, ctx.stream,
                               algo));
      checkStatus(ctx.syncAndCheckFaults());
      const std::size_t diffs = countWordDiffs(ctx.download(b.sum.get(), b.sum.size()), ref.sum);
      std::string name = algorithmName(algo);
      if (algo == AllreduceAlgorithm::kAuto)
        name += std::string("->") + algorithmName(chooseAllreduceAlgorithm(algo, ctx.world, M, K, sizeof(In),
                                                                           ctx.comm->options().oneStageMaxBytes));
      log.report(M, K, "-", name, "host-sum", diffs == 0,
                 diffs == 0 ? "allreduceSum == rank-ordered fp32 sum of " + std::to_string(ctx.world) +
                                  " partials, bit for bit"
                            : std::to_string(diffs) + " of " + std::to_string(M * K) + " bf16 values differ");
    }

    // ---- Every path x layout -----------------------------------------------------------
    std::vector<std::uint64_t> hashes;
    std::vector<std::string> runNames;  // (layout, algo) of each hash record, for the lines after the exchange
    std::vector<std::string> runLayouts;
    HostOutputs rowOneStage;
    const LayoutCase rowCase = rowMajorCase(M, G);
    for (const LayoutCase& lc : {rowCase, colMajorCase(M, G)}) {
      HostOutputs oneStage;
      for (Path path : paths) {
        std::string algo = pathName(path);
        if (path == Path::kAuto)
          algo += std::string("->") + algorithmName(chooseAllreduceAlgorithm(AllreduceAlgorithm::kAuto, ctx.world, M,
                                                                             K, sizeof(In),
                                                                             ctx.comm->options().oneStageMaxBytes));
        HostOutputs out = runPath(ctx, path, b, lc);
        appendHashes(out, hashes);
        runNames.push_back(algo);
        runLayouts.push_back(lc.name);

        const ReferenceDiff d = compareWithReference(out, ref, lc, K);
        fp8Elements += static_cast<std::size_t>(M * K);
        fp8Differing += d.fp8Differing;
        char detail[320];
        std::snprintf(detail, sizeof(detail),
                      "%s of fp8 values one step off (%zu beyond one step); %zu of %lld scales differ (worst "
                      "relative %.3g, %zu beyond 2^-16); residual_out %zu bf16 values differ; normOut %zu beyond "
                      "its bound",
                      percent(d.fp8Differing, static_cast<std::size_t>(M * K)).c_str(), d.fp8BeyondOneStep,
                      d.scalesDiffering, static_cast<long long>(M * G), d.worstScaleRel, d.scalesBeyondBound,
                      d.residualDiffs, d.normOutBeyondBound);
        log.report(M, K, lc.name, algo, "host-reference", d.ok(), detail);

        const PaddingDiff pd = checkPadding(out, lc, K);
        log.report(M, K, lc.name, algo, "padding", pd.nonZeroPadding == 0 && pd.touchedTail == 0,
                   std::to_string(pd.nonZeroPadding) + " of " + std::to_string(pd.paddingSlots) +
                       " padding slots non-zero; " + std::to_string(pd.touchedTail) +
                       " bytes written past q or the scales");

        if (path == Path::kOneStage) {
          oneStage = std::move(out);
        } else {
          std::string which;
          const bool same = sameBytes(out, oneStage, which);
          log.report(M, K, lc.name, algo, "equals-one-stage", same,
                     same ? "fp8, scales (padding included), residual, normOut: same bytes"
                          : "differs in: " + which);
        }
      }
      if (!lc.colMajor) {
        rowOneStage = std::move(oneStage);
      } else {
        std::string which;
        const bool same = sameAcrossLayouts(rowOneStage, rowCase, oneStage, lc, K, which);
        log.report(M, K, lc.name, "one-stage", "equals-row-major", same,
                   same ? "TRANSPOSE_SCALE true read through its view == false: fp8, scales, residual, normOut"
                        : "differs in: " + which);
      }
    }

    // ---- Bit identity across ranks -----------------------------------------------
    auto all = ctx.exchange->allGather(packValues(hashes));
    if (!all) throw std::runtime_error("hash exchange: " + ctx.exchange->error());
    const std::size_t runs = runNames.size();
    static const char* kOutputs[4] = {"fp8", "scales", "residual", "normOut"};
    for (std::size_t i = 0; i < runs; ++i) {
      std::string differ;
      for (int p = 0; p < ctx.world; ++p) {
        const std::vector<std::uint64_t> theirs = unpackValues<std::uint64_t>((*all)[p]);
        if (theirs.size() != hashes.size()) {
          differ += " rank " + std::to_string(p) + " ran other cases;";
          continue;
        }
        std::string which;
        for (int j = 0; j < 4; ++j)
          if (theirs[4 * i + j] != hashes[4 * i + j]) which += which.empty() ? kOutputs[j] : std::string(", ") + kOutputs[j];
        if (!which.empty()) differ += " rank " + std::to_string(p) + " (" + which + ");";
      }
      log.report(M, K, runLayouts[i], runNames[i], "ranks-identical", differ.empty(),
                 differ.empty() ? "fp8 " + hex(hashes[4 * i]) + ", scales " + hex(hashes[4 * i + 1]) + ", residual " +
                                      hex(hashes[4 * i + 2]) + ", normOut " + hex(hashes[4 * i + 3]) + " on all " +
                                      std::to_string(ctx.world) + " ranks"
                                : "differs from" + differ);
    }
    ctx.progress("check M=" + std::to_string(M) + " done, " + std::to_string(log.failed()) + " failed so far");
  }

  // The run's fraction of fp8 values off by one step, as the device tests bound it.
  const bool fractionOk =
      static_cast<double>(fp8Differing) <= kMaxDifferingFraction * static_cast<double>(fp8Elements);
  std::printf("rank %d M=all K=%lld layout=all algo=all: host-fraction %s %s of %zu fp8 values differ from the host "
              "reference by one step (bound 1%%)\n",
              ctx.rank, static_cast<long long>(K), fractionOk ? "ok" : "FAIL",
              percent(fp8Differing, fp8Elements).c_str(), fp8Elements);
  const int failed = log.failed() + !fractionOk;
  std::printf("rank %d: check %s: %d checks, %d failed\n", ctx.rank, failed == 0 ? "passed" : "FAILED",
              log.checks() + 1, failed);
  return failed;
}

}  // namespace ranks
}  // namespace fp8scale
