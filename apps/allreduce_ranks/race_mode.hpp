// fp8scale-allreduce-ranks --mode race: does any rank's output ever see a
// peer's input after the peer has moved on? For each M and algorithm (one-
// stage, two-stage), column-major scales (ld = align(M, 4)), each rank
// captures one CUDA graph:
//
//   restore the residual; fill q, scales and normOut with garbage;
//   the fused call; overwrite this rank's input with NaN (a memset);
//   compare every output word with the expected bits, counting wrong words
//   and NaN words (a kernel); restore the input
//
// and replays it --iters times on its own, without any host synchronization
// between the ranks: only the call's barriers keep them in step. The
// expected bits come from one plain call first. The counters are read every
// 100 replays (the scheme of tests/device's
// GraphReplaysNeverLetAPeersOverwrittenInputReachAnOutput, with one process
// per GPU instead of simulated ranks). Inputs hold no NaN or inf, so any NaN
// in an output is a race.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "allreduce_ranks/check_mode.hpp"
#include "allreduce_ranks/rank_context.hpp"

namespace fp8scale {
namespace ranks {

/// What a 4-byte word of an output holds, for NaN detection.
enum class WordKind : int { kFp8x4 = 0, kFp32 = 1, kBf16x2 = 2 };

/// counts[0] += words of `got` that differ from `expected`; counts[1] +=
/// words holding a NaN of their kind (e4m3fn 0x7F / 0xFF bytes, fp32, bf16
/// halves).
__global__ void countRaceDamage(const std::uint32_t* got, const std::uint32_t* expected, std::size_t words,
                                WordKind kind, unsigned long long* counts) {
  unsigned long long wrong = 0, nanWords = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words; i += stride) {
    const std::uint32_t w = got[i];
    wrong += w != expected[i];
    switch (kind) {
      case WordKind::kFp32: nanWords += (w & 0x7FFFFFFFu) > 0x7F800000u; break;
      case WordKind::kBf16x2: nanWords += ((w & 0x7FFFu) > 0x7F80u) + (((w >> 16) & 0x7FFFu) > 0x7F80u); break;
      case WordKind::kFp8x4:
        for (int b = 0; b < 4; ++b) nanWords += ((w >> (8 * b)) & 0x7Fu) == 0x7Fu;
        break;
    }
  }
  if (wrong != 0) atomicAdd(&counts[0], wrong);
  if (nanWords != 0) atomicAdd(&counts[1], nanWords);
}

/// Replays between two reads of the counters.
constexpr int kReplaysPerRead = 100;

/// One (M, algorithm) race case; returns true when it saw no damage.
inline bool runRaceCase(RankContext& ctx, index_t M, AllreduceAlgorithm algo, int iters) {
  const index_t K = ctx.cols, G = K / kGroup;
  const LayoutCase lc = colMajorCase(M, G);
  const std::size_t inputBytes = static_cast<std::size_t>(M * K) * sizeof(In);
  CaseBuffers run(M, K), expected(M, K);
  DeviceMemory<In> savedInput(static_cast<std::size_t>(M * K));
  DeviceMemory<unsigned long long> counts(2);
  ctx.upload(savedInput.get(), makePartial(ctx.rank, M, K));
  ctx.upload(run.residual0.get(), makeResidual(M, K));
  ctx.upload(run.weight.get(), makeWeight(K));
  checkCuda(cudaMemcpyAsync(ctx.x.get(), savedInput.get(), inputBytes, cudaMemcpyDeviceToDevice, ctx.stream),
            "cudaMemcpyAsync (input)");
  checkCuda(cudaMemsetAsync(counts.get(), 0, counts.bytes(), ctx.stream), "cudaMemsetAsync (counters)");

  const auto enqueueCall = [&](CaseBuffers& b) {
    b.resetOutputs(ctx, run.residual0.get());
    const RmsNormQuantInput<In> in = b.input(ctx, run.weight.get());
    checkStatus(allreduceRmsNormQuant<Format>(*ctx.comm, in, Fp8Matrix<Format>{b.q.get(), M, K, K},
                                              colMajorView(b.s.get(), M, G, lc.ld).value(), QuantOptions{}, ctx.stream,
                                              algo)
                    .status());
  };

  // ---- Expected bits: one plain call -----------------------------------------------
  enqueueCall(expected);
  checkStatus(ctx.syncAndCheckFaults());

  // ---- The graph ---------------------------------------------------------------------------
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  checkCuda(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  enqueueCall(run);
  checkCuda(cudaMemsetAsync(ctx.x.get(), 0xFF, inputBytes, ctx.stream), "cudaMemsetAsync (NaN input)");  // bf16 0xFFFF: NaN
  struct Compared {
    const void* got;
    const void* want;
    std::size_t bytes;
    WordKind kind;
  };
  const Compared compared[4] = {{run.q.get(), expected.q.get(), run.q.bytes(), WordKind::kFp8x4},
                                {run.s.get(), expected.s.get(), run.s.bytes(), WordKind::kFp32},
                                {run.r.get(), expected.r.get(), run.r.bytes(), WordKind::kBf16x2},
                                {run.y.get(), expected.y.get(), run.y.bytes(), WordKind::kBf16x2}};
  for (const Compared& c : compared)
    countRaceDamage<<<132, 256, 0, ctx.stream>>>(static_cast<const std::uint32_t*>(c.got),
                                                 static_cast<const std::uint32_t*>(c.want), c.bytes / 4, c.kind,
                                                 counts.get());
  checkCuda(cudaMemcpyAsync(ctx.x.get(), savedInput.get(), inputBytes, cudaMemcpyDeviceToDevice, ctx.stream),
            "cudaMemcpyAsync (restore input)");
  checkCuda(cudaStreamEndCapture(ctx.stream, &graph), "cudaStreamEndCapture");
  checkCuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  checkCuda(cudaGraphDestroy(graph), "cudaGraphDestroy");

  // ---- Replays -------------------------------------------------------------------------------
  unsigned long long wrong = 0, nans = 0;
  int done = 0, firstDamaged = -1;
  const auto start = std::chrono::steady_clock::now();
  while (done < iters) {
    const int n = std::min(kReplaysPerRead, iters - done);
    for (int i = 0; i < n; ++i) checkCuda(cudaGraphLaunch(exec, ctx.stream), "cudaGraphLaunch");
    const Status fault = ctx.syncAndCheckFaults();
    if (!fault) {
      (void)cudaGraphExecDestroy(exec);
      throw std::runtime_error("device fault within replays " + std::to_string(done) + ".." +
                               std::to_string(done + n - 1) + ": " + fault.message());
    }
    const std::vector<unsigned long long> c = ctx.download(counts.get(), 2);
    if (firstDamaged < 0 && (c[0] != 0 || c[1] != 0)) firstDamaged = done;
    wrong = c[0];
    nans = c[1];
    done += n;
  }
  const double us = 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / done;
  checkCuda(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");

  const bool ok = wrong == 0 && nans == 0;
  std::string detail = std::to_string(done) + " replays, " + std::to_string(nans) + " NaN words, " +
                       std::to_string(wrong) + " wrong words (fp8, scales with padding, residual, normOut), 0 faults";
  if (!ok) detail += "; first damage within replays " + std::to_string(firstDamaged) + ".." +
                     std::to_string(firstDamaged + kReplaysPerRead - 1);
  char timing[64];
  std::snprintf(timing, sizeof(timing), ", %.1f us per replay", us);
  std::printf("rank %d M=%lld K=%lld layout=%s algo=%s: race %s %s%s\n", ctx.rank, static_cast<long long>(M),
              static_cast<long long>(K), lc.name.c_str(), algorithmName(algo), ok ? "ok" : "FAIL", detail.c_str(),
              timing);
  return ok;
}

/// Runs the race sweep. Returns the number of failed cases (0: passed).
inline int runRaceMode(RankContext& ctx, const Options& o) {
  int cases = 0, failed = 0;
  for (index_t M : o.sweep())
    for (AllreduceAlgorithm algo : {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage}) {
      ++cases;
      failed += !runRaceCase(ctx, M, algo, o.iters);
      ctx.progress(std::string("race M=") + std::to_string(M) + " " + algorithmName(algo) + " done");
    }
  std::printf("rank %d: race %s: %d cases of %d replays, %d failed\n", ctx.rank, failed == 0 ? "passed" : "FAILED",
              cases, o.iters, failed);
  return failed;
}

}  // namespace ranks
}  // namespace fp8scale
