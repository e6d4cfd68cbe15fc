// The timing helpers the benchmarks (benchmarks/) and the programs (apps/)
// share: a CUDA error check that ends the run, a Status check, and the time
// per call of a body of GPU work, taken from CUDA events around CUDA-graph
// replays. Not part of the library: both include it from support/.
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

/// How a timed graph is built and replayed (timeGraphReplays).
struct GraphTiming {
  int launches = kLaunchesPerGraph;  ///< calls of `body` captured into the graph
  int reps = 15;                     ///< timed replays; the median is taken
  bool callOutsideCapture = true;    ///< one call before capture (plans what needs planning)
};

/// Seconds per call of `body`, which enqueues one call on `stream`: a graph
/// of t.launches calls, replayed once to warm up and t.reps times under CUDA
/// events, `prepare` (may be empty) enqueued untimed before each replay; the
/// median replay / t.launches. Every CUDA status goes to `check(status,
/// what)`, which ends the run or throws; the graph, its instance, the events
/// and an open capture are released on either path.
template <class Check>
double timeGraphReplays(cudaStream_t stream, const std::function<void()>& body, const std::function<void()>& prepare,
                        const GraphTiming& t, const Check& check) {
  struct Resources {
    cudaStream_t stream;
    bool capturing = false;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Resources() {
      if (capturing) {
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(stream, &partial);
        if (partial != nullptr) cudaGraphDestroy(partial);
      }
      if (start != nullptr) cudaEventDestroy(start);
      if (stop != nullptr) cudaEventDestroy(stop);
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
  } r{stream};
  if (t.launches < 1 || t.reps < 1) check(cudaErrorInvalidValue, "timeGraphReplays: launches and reps must be >= 1");
  if (t.callOutsideCapture) {
    body();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  r.capturing = true;
  for (int i = 0; i < t.launches; ++i) body();
  r.capturing = false;
  check(cudaStreamEndCapture(stream, &r.graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&r.exec, r.graph, 0), "cudaGraphInstantiate");
  check(cudaEventCreate(&r.start), "cudaEventCreate");
  check(cudaEventCreate(&r.stop), "cudaEventCreate");
  if (prepare) prepare();
  check(cudaGraphLaunch(r.exec, stream), "cudaGraphLaunch");  // warm-up
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> ms(static_cast<std::size_t>(t.reps));
  for (float& m : ms) {
    if (prepare) prepare();
    check(cudaEventRecord(r.start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(r.exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(r.stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&m, r.start, r.stop), "cudaEventElapsedTime");
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3 / t.launches;
}

/// timeGraphReplays with kLaunchesPerGraph calls, `reps` replays and a CUDA
/// error ending the run (the benchmarks' policy).
inline double timePerCall(cudaStream_t stream, const std::function<void()>& body, int reps = 15) {
  GraphTiming t;
  t.reps = reps;
  return timeGraphReplays(stream, body, {}, t, [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
      std::exit(1);
    }
  });
}

}  // namespace fp8scale::bench
