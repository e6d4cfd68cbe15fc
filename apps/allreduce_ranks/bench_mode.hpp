// fp8scale-allreduce-ranks --mode bench: the fused call (allreduceRmsNormQuant,
// auto algorithm) against what an engine runs without it, ncclAllReduce
// (bf16 sum) followed by rmsNormQuant, with one process per GPU. Both are
// timed by support/graph_timing.cuh's timePerCall on every rank: a CUDA
// graph of 20 calls, CUDA events around 15 replays, the median / 20. The
// ranks replay their graphs without host synchronization between them, so a
// replay that starts late on one rank shows in the others' times; the table
// (rank 0) reports the slowest rank per M, each rank's own line its own
// times. bf16 input, K = --k, e4m3fn, fp32 scales, column-major scales
// (ld = align(M, 4)), residual in place, no bf16 norm output.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allreduce_ranks/check_mode.hpp"
#include "allreduce_ranks/rank_context.hpp"
#include "graph_timing.cuh"

namespace fp8scale {
namespace ranks {

/// Runs the bench sweep. Returns 0, or 1 when the JSON file cannot be written.
inline int runBenchMode(RankContext& ctx, const Options& o) {
  const index_t K = ctx.cols, G = K / kGroup, maxRows = ctx.maxRows;
  const std::size_t elems = static_cast<std::size_t>(maxRows * K);
  DeviceMemory<In> residual(elems), weight(static_cast<std::size_t>(K)), reduced(elems);
  DeviceMemory<std::uint8_t> q(elems);
  DeviceMemory<float> s(static_cast<std::size_t>(G * alignUp(maxRows, 4)));
  ctx.upload(ctx.x.get(), makePartial(ctx.rank, maxRows, K));
  ctx.upload(residual.get(), makeResidual(maxRows, K));
  ctx.upload(weight.get(), makeWeight(K));
  const std::vector<index_t>& sweep = o.sweep();

  // ---- Timing: {fused, baseline} us per M, this rank ------------------------------
  std::vector<double> mine;
  std::vector<AllreduceAlgorithm> picked;
  for (index_t M : sweep) {
    RmsNormQuantInput<In> in;
    in.x = ctx.x.get();
    in.rows = M;
    in.cols = K;
    in.ldx = K;
    in.residual = residual.get();
    in.ldResidual = K;
    in.weight = weight.get();
    const Fp8Matrix<Format> fp8{q.get(), M, K, K};
    const auto scale = colMajorView(s.get(), M, G, alignUp(M, 4)).value();
    const QuantOptions opt;
    const double fused = bench::timePerCall(ctx.stream, [&] {
      bench::expectOk(
          allreduceRmsNormQuant<Format>(*ctx.comm, in, fp8, scale, opt, ctx.stream, AllreduceAlgorithm::kAuto).status());
    });
    checkStatus(ctx.syncAndCheckFaults());
    double baseline = -1.0;
#if defined(FP8SCALE_WITH_NCCL)
    if (ctx.hasNccl()) {
      RmsNormQuantInput<In> local = in;
      local.x = reduced.get();
      baseline = bench::timePerCall(ctx.stream, [&] {
        const ncclResult_t r = ncclAllReduce(ctx.x.get(), reduced.get(), static_cast<std::size_t>(M * K), ncclBfloat16,
                                             ncclSum, ctx.nccl, ctx.stream);
        if (r != ncclSuccess) {
          std::fprintf(stderr, "%s: rank %d: ncclAllReduce: %s\n", kProgram, ctx.rank, ncclGetErrorString(r));
          std::exit(1);
        }
        bench::expectOk(rmsNormQuant<Format>(local, fp8, scale, opt, ctx.stream).status());
      });
    }
#endif
    mine.push_back(fused * 1e6);
    mine.push_back(baseline < 0 ? -1.0 : baseline * 1e6);
    picked.push_back(chooseAllreduceAlgorithm(AllreduceAlgorithm::kAuto, ctx.world, M, K, sizeof(In),
                                              ctx.comm->options().oneStageMaxBytes));
    std::printf("rank %d M=%lld K=%lld layout=col(ld=%lld) algo=auto->%s: bench ok fused %.2f us", ctx.rank,
                static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(alignUp(M, 4)),
                algorithmName(picked.back()), fused * 1e6);
    if (baseline >= 0) std::printf(", ncclAllReduce + rmsNormQuant %.2f us", baseline * 1e6);
    std::printf("\n");
    ctx.progress("bench M=" + std::to_string(M) + " done");
  }

  // ---- Every rank's times to rank 0 --------------------------------------------------
  auto all = ctx.exchange->allGather(packValues(mine));
  if (!all) throw std::runtime_error("bench exchange: " + ctx.exchange->error());
  if (ctx.rank != 0) {
    std::printf("rank %d: bench done (times sent to rank 0)\n", ctx.rank);
    return 0;
  }
  std::vector<std::vector<double>> times;  // [rank][2 * i + variant]
  for (const Bytes& b : *all) {
    times.push_back(unpackValues<double>(b));
    if (times.back().size() != mine.size())
      throw std::runtime_error("bench exchange: rank " + std::to_string(times.size() - 1) + " timed other cases");
  }
  const auto slowest = [&](std::size_t j) {
    double t = 0.0;
    for (const auto& r : times) t = std::max(t, r[j]);
    return t;
  };
  const bool baselineRan = ctx.hasNccl();

  std::printf("bench: W=%d ranks on %s%s, K=%lld, bf16 -> e4m3fn, fp32 scales, column-major ld=align(M,4), residual "
              "in place; us per call = median of 15 replays of a CUDA graph of %d calls, slowest rank\n",
              ctx.world, ctx.deviceName.c_str(), ctx.sharedGpu ? " (SHARED GPUs: time-sliced, not a measurement)" : "",
              static_cast<long long>(K), bench::kLaunchesPerGraph);
  if (!baselineRan) std::printf("bench: baseline (ncclAllReduce + rmsNormQuant) unavailable: %s\n", ctx.ncclAbsent.c_str());
  std::printf("bench: %6s  %-10s %10s %22s %10s\n", "M", "algorithm", "fused us", "nccl+rmsNormQuant us",
              "ratio");
  nlohmann::ordered_json doc;
  doc["program"] = kProgram;
  doc["mode"] = "bench";
  doc["world"] = ctx.world;
  doc["device"] = ctx.deviceName;
  doc["shared_gpu"] = ctx.sharedGpu;
  doc["K"] = K;
  doc["input"] = "bf16";
  doc["format"] = "e4m3fn";
  doc["scale_rule"] = "fp32";
  doc["scale_layout"] = "column-major, ld = align(M, 4)";
  doc["calls_per_graph"] = bench::kLaunchesPerGraph;
  doc["replays"] = 15;
  doc["statistic"] = "median replay / calls_per_graph, slowest rank";
  doc["baseline"] = baselineRan ? nlohmann::ordered_json("ncclAllReduce (bf16 sum) + rmsNormQuant")
                                : nlohmann::ordered_json();
  if (!baselineRan) doc["baseline_unavailable"] = ctx.ncclAbsent;
  doc["results"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    const double fused = slowest(2 * i), baseline = baselineRan ? slowest(2 * i + 1) : -1.0;
    char base[32] = "-", ratio[32] = "-";
    if (baseline >= 0) {
      std::snprintf(base, sizeof(base), "%.2f", baseline);
      std::snprintf(ratio, sizeof(ratio), "%.3f", baseline / fused);
    }
    std::printf("bench: %6lld  %-10s %10.2f %22s %10s\n", static_cast<long long>(sweep[i]), algorithmName(picked[i]),
                fused, base, ratio);
    nlohmann::ordered_json row;
    row["M"] = sweep[i];
    row["algorithm"] = algorithmName(picked[i]);
    row["fused_us"] = fused;
    row["fused_us_per_rank"] = nlohmann::ordered_json::array();
    for (const auto& r : times) row["fused_us_per_rank"].push_back(r[2 * i]);
    if (baselineRan) {
      row["baseline_us"] = baseline;
      row["baseline_us_per_rank"] = nlohmann::ordered_json::array();
      for (const auto& r : times) row["baseline_us_per_rank"].push_back(r[2 * i + 1]);
      row["baseline_over_fused"] = baseline / fused;
    }
    doc["results"].push_back(row);
  }
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << doc.dump(2) << "\n";
    if (!out) {
      ctx.error("--json " + o.json + ": write failed");
      return 1;
    }
    std::printf("bench: wrote %s\n", o.json.c_str());
  }
  return 0;
}

}  // namespace ranks
}  // namespace fp8scale
