// What the benchmarks share: a CUDA error check that ends the run, a Status
// check, and the time per call of a body of GPU work, taken from CUDA events
// around CUDA-graph replays.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "fp8scale/status.hpp"

#define BENCH_CHECK(call)                                                                        \
  do {                                                                                           \
    const cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace fp8scale::bench {

/// Ends the run with the Status message when a launcher refused its call.
inline void expectOk(const Status& s) {
  if (!s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  }
}

/// Calls captured into one graph.
constexpr int kLaunchesPerGraph = 20;

/// Seconds per call of `body`, which enqueues one call on `stream`: one call
/// outside capture first (plans what needs planning, e.g. a cuBLASLt shape),
/// then a graph of kLaunchesPerGraph calls, replayed once to warm up and
/// `reps` times under CUDA events; the median replay / kLaunchesPerGraph.
inline double timePerCall(cudaStream_t stream, const std::function<void()>& body, int reps = 15) {
  body();
  BENCH_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunchesPerGraph; ++i) body();
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  BENCH_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms(reps);
  for (float& t : ms) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    BENCH_CHECK(cudaGraphLaunch(exec, stream));
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    BENCH_CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  std::sort(ms.begin(), ms.end());
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  return ms[ms.size() / 2] * 1e-3 / kLaunchesPerGraph;
}

}  // namespace fp8scale::bench
