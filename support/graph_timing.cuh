// The timing helpers the benchmarks (benchmarks/) and the programs (apps/)
// share: a runtime error check that ends the run, a Status check, and the
// time per call of a body of GPU work, taken from events around graph
// replays. One source for CUDA and HIP (fp8scale::runtime, platform.hpp).
// Not part of the library: both include it from support/.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "fp8scale/platform.hpp"
#include "fp8scale/status.hpp"

#define BENCH_CHECK(call)                                                                        \
  do {                                                                                           \
    const ::fp8scale::DeviceError e_ = (call);                                                   \
    if (e_ != ::fp8scale::kDeviceSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                           \
                   ::fp8scale::deviceErrorString(e_));                                           \
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
/// of t.launches calls, replayed once to warm up and t.reps times between
/// events, `prepare` (may be empty) enqueued untimed before each replay; the
/// median replay / t.launches. Every runtime status goes to `check(status,
/// what)`, which ends the run or throws; the graph, its instance, the events
/// and an open capture are released on either path.
template <class Check>
double timeGraphReplays(Stream stream, const std::function<void()>& body, const std::function<void()>& prepare,
                        const GraphTiming& t, const Check& check) {
  struct Resources {
    Stream stream;
    bool capturing = false;
    runtime::Graph graph = nullptr;
    runtime::GraphExec exec = nullptr;
    runtime::Event start = nullptr, stop = nullptr;
    ~Resources() {
      if (capturing) {
        runtime::Graph partial = nullptr;
        (void)runtime::streamEndCapture(stream, &partial);
        if (partial != nullptr) (void)runtime::graphDestroy(partial);
      }
      if (start != nullptr) (void)runtime::eventDestroy(start);
      if (stop != nullptr) (void)runtime::eventDestroy(stop);
      if (exec != nullptr) (void)runtime::graphExecDestroy(exec);
      if (graph != nullptr) (void)runtime::graphDestroy(graph);
    }
  } r{stream};
  if (t.launches < 1 || t.reps < 1) check(runtime::kErrorInvalidValue, "timeGraphReplays: launches and reps must be >= 1");
  if (t.callOutsideCapture) {
    body();
    check(runtime::streamSynchronize(stream), "streamSynchronize");
  }
  check(runtime::streamBeginCapture(stream), "streamBeginCapture");
  r.capturing = true;
  for (int i = 0; i < t.launches; ++i) body();
  r.capturing = false;
  check(runtime::streamEndCapture(stream, &r.graph), "streamEndCapture");
  check(runtime::graphInstantiate(&r.exec, r.graph), "graphInstantiate");
  check(runtime::eventCreate(&r.start), "eventCreate");
  check(runtime::eventCreate(&r.stop), "eventCreate");
  if (prepare) prepare();
  check(runtime::graphLaunch(r.exec, stream), "graphLaunch");  // warm-up
  check(runtime::streamSynchronize(stream), "streamSynchronize");
  std::vector<float> ms(static_cast<std::size_t>(t.reps));
  for (float& m : ms) {
    if (prepare) prepare();
    check(runtime::eventRecord(r.start, stream), "eventRecord");
    check(runtime::graphLaunch(r.exec, stream), "graphLaunch");
    check(runtime::eventRecord(r.stop, stream), "eventRecord");
    check(runtime::eventSynchronize(r.stop), "eventSynchronize");
    check(runtime::eventElapsedTime(&m, r.start, r.stop), "eventElapsedTime");
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3 / t.launches;
}

/// timeGraphReplays with kLaunchesPerGraph calls, `reps` replays and a
/// runtime error ending the run (the benchmarks' policy).
inline double timePerCall(Stream stream, const std::function<void()>& body, int reps = 15) {
  GraphTiming t;
  t.reps = reps;
  return timeGraphReplays(stream, body, {}, t, [](DeviceError e, const char* what) {
    if (e != kDeviceSuccess) {
      std::fprintf(stderr, "%s: %s\n", what, deviceErrorString(e));
      std::exit(1);
    }
  });
}

}  // namespace fp8scale::bench
