// Fused allreduce + residual + RMSNorm + group quant against the
// unfused pair (the allreduce-only kernel, then a separate rmsNormQuant
// launch), W = 2, 4, 8 ranks simulated on one GPU (Google Benchmark, GPU
// time from CUDA events).
//
//   bench_allreduce [--benchmark_out=FILE --benchmark_out_format=json]
//
// Each rank has its own stream and its own captured graph of kCallsPerGraph
// calls; one timing launches every rank's graph at once (the ranks' streams
// wait on one start event; the stop event waits on all of them) and divides
// by kCallsPerGraph. The W ranks share one GPU's SMs and memory bandwidth, so
// a call here moves W x the bytes one GPU of a real node moves: these are
// not multi-GPU numbers (apps/allreduce_ranks measures those), but the fused /
// unfused ratio compares like with like. bf16 input, K = 7168, e4m3fn, fp32
// scales, column-major (TRANSPOSE_SCALE) scales, residual in place, no bf16
// output. Counters: us_per_call, algorithm (1 one-stage, 2 two-stage).
// After the run, "summary:" lines give fused vs unfused per (W, M, algorithm).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "graph_timing.cuh"
#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"

namespace {

using namespace fp8scale;
using In = BFloat16;

void expectOk(const Status& s, const char* what) {
  if (!s) {
    std::fprintf(stderr, "bench_allreduce: %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

constexpr int kCallsPerGraph = bench::kLaunchesPerGraph;
constexpr int kReps = 15;
const index_t kHidden = 7168;
const index_t kMaxRows = 512;
const std::vector<index_t> kRows = {1, 8, 32, 128, 512};
const std::vector<int> kWorlds = {2, 4, 8};

/// One simulated node of W ranks and each rank's buffers.
struct Node {
  int world = 0;
  SimulatedAllreduceGroup group;
  cudaStream_t streams[kAllreduceMaxRanks] = {};
  std::vector<In*> residual, reduced, weight;
  std::vector<std::uint8_t*> q;
  std::vector<float*> s;
};

std::map<int, std::unique_ptr<Node>> gNodes;

Node& node(int world) {
  auto it = gNodes.find(world);
  if (it != gNodes.end()) return *it->second;
  auto n = std::make_unique<Node>();
  n->world = world;
  AllreduceOptions o;
  o.bufferBytes = static_cast<std::size_t>(kMaxRows * kHidden) * sizeof(In);
  o.spinTimeoutNs = 2000000000ull;  // a wait past 2 s is reported, not hung on
  auto g = SimulatedAllreduceGroup::create(world, o);
  expectOk(g.status(), "SimulatedAllreduceGroup::create");
  n->group = std::move(g.value());
  std::mt19937 rng(static_cast<unsigned>(world));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<In> host(static_cast<std::size_t>(kMaxRows * kHidden));
  for (int p = 0; p < world; ++p) {
    BENCH_CHECK(cudaStreamCreateWithFlags(&n->streams[p], cudaStreamNonBlocking));
    for (auto& v : host) v = toBFloat16(nd(rng));  // activation-like partials, never zeros
    BENCH_CHECK(cudaMemcpy(n->group[p].stagingBuffer(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    In *r, *red, *w;
    std::uint8_t* q;
    float* s;
    BENCH_CHECK(cudaMalloc(&r, host.size() * 2));
    BENCH_CHECK(cudaMalloc(&red, host.size() * 2));
    BENCH_CHECK(cudaMalloc(&w, kHidden * 2));
    BENCH_CHECK(cudaMalloc(&q, host.size()));
    BENCH_CHECK(cudaMalloc(&s, static_cast<std::size_t>(alignUp(kMaxRows, 4) * (kHidden / 128)) * 4));
    BENCH_CHECK(cudaMemcpy(r, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(red, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(w, host.data(), kHidden * 2, cudaMemcpyHostToDevice));
    n->residual.push_back(r);
    n->reduced.push_back(red);
    n->weight.push_back(w);
    n->q.push_back(q);
    n->s.push_back(s);
  }
  Node& ref = *n;
  gNodes.emplace(world, std::move(n));
  return ref;
}

/// What one timed call of rank p is: the fused call, or the unfused pair.
enum class Variant : int { kFused = 0, kSeparate = 1 };

void enqueueCall(Node& n, int p, Variant variant, index_t M, AllreduceAlgorithm algo) {
  const index_t K = kHidden, G = K / 128;
  cudaStream_t st = n.streams[p];
  const auto scale = colMajorView(n.s[p], M, G, M).value();
  const Fp8Matrix<E4M3FN> q{n.q[p], M, K, K};
  RmsNormQuantInput<In> in;
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.residual = n.residual[p];
  in.ldResidual = K;
  in.weight = n.weight[p];
  const In* x = static_cast<const In*>(n.group[p].stagingBuffer());
  if (variant == Variant::kFused) {
    in.x = x;
    expectOk(allreduceRmsNormQuant<E4M3FN>(n.group[p], in, q, scale, QuantOptions{}, st, algo).status(),
             "allreduceRmsNormQuant");
  } else {
    expectOk(allreduceSum(n.group[p], x, M, K, K, n.reduced[p], K, st, algo), "allreduceSum");
    in.x = n.reduced[p];
    expectOk(rmsNormQuant<E4M3FN>(in, q, scale, QuantOptions{}, st).status(), "rmsNormQuant");
  }
}

/// Seconds per call: the median of kReps launches of every rank's graph of
/// kCallsPerGraph calls, all ranks at once.
double timePerCall(Node& n, Variant variant, index_t M, AllreduceAlgorithm algo) {
  // One plain call first: loads the kernels and caches their occupancy.
  for (int p = 0; p < n.world; ++p) enqueueCall(n, p, variant, M, algo);
  for (int p = 0; p < n.world; ++p) BENCH_CHECK(cudaStreamSynchronize(n.streams[p]));
  std::vector<cudaGraphExec_t> exec(n.world);
  for (int p = 0; p < n.world; ++p) {
    cudaGraph_t graph;
    BENCH_CHECK(cudaStreamBeginCapture(n.streams[p], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kCallsPerGraph; ++i) enqueueCall(n, p, variant, M, algo);
    BENCH_CHECK(cudaStreamEndCapture(n.streams[p], &graph));
    BENCH_CHECK(cudaGraphInstantiate(&exec[p], graph, 0));
    BENCH_CHECK(cudaGraphDestroy(graph));
  }
  cudaEvent_t start, stop, done[kAllreduceMaxRanks];
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int p = 0; p < n.world; ++p) BENCH_CHECK(cudaEventCreateWithFlags(&done[p], cudaEventDisableTiming));
  auto launchAll = [&] {
    BENCH_CHECK(cudaEventRecord(start, n.streams[0]));
    for (int p = 1; p < n.world; ++p) BENCH_CHECK(cudaStreamWaitEvent(n.streams[p], start, 0));
    for (int p = 0; p < n.world; ++p) BENCH_CHECK(cudaGraphLaunch(exec[p], n.streams[p]));
    for (int p = 1; p < n.world; ++p) {
      BENCH_CHECK(cudaEventRecord(done[p], n.streams[p]));
      BENCH_CHECK(cudaStreamWaitEvent(n.streams[0], done[p], 0));
    }
    BENCH_CHECK(cudaEventRecord(stop, n.streams[0]));
    BENCH_CHECK(cudaEventSynchronize(stop));
  };
  launchAll();  // warm-up
  std::vector<float> ms(kReps);
  for (float& t : ms) {
    launchAll();
    BENCH_CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  expectOk(n.group.checkErrors(n.streams[0]), "device fault during the timed calls");
  for (int p = 0; p < n.world; ++p) {
    BENCH_CHECK(cudaGraphExecDestroy(exec[p]));
    BENCH_CHECK(cudaEventDestroy(done[p]));
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3 / kCallsPerGraph;
}

const char* algoName(AllreduceAlgorithm a) {
  return a == AllreduceAlgorithm::kOneStage ? "one-stage" : a == AllreduceAlgorithm::kTwoStage ? "two-stage" : "auto";
}

/// (W, M, algorithm, variant) -> us per call, for the summary.
std::map<std::tuple<int, index_t, int, int>, double> gResults;

void BM_Allreduce(benchmark::State& state, int world, index_t M, AllreduceAlgorithm algo, Variant variant) {
  Node& n = node(world);
  double t = 0.0;
  for (auto _ : state) {
    t = timePerCall(n, variant, M, algo);
    state.SetIterationTime(t);
  }
  const AllreduceAlgorithm picked = chooseAllreduceAlgorithm(algo, world, M, kHidden, 2,
                                                             n.group[0].options().oneStageMaxBytes);
  state.counters["us_per_call"] = t * 1e6;
  state.counters["algorithm"] = static_cast<double>(picked);
  state.counters["W"] = world;
  state.counters["M"] = static_cast<double>(M);
  gResults[{world, M, static_cast<int>(algo), static_cast<int>(variant)}] = t * 1e6;
}

/// rmsNormQuant alone on one stream (no allreduce): the epilogue's own cost.
void BM_RmsNormQuantAlone(benchmark::State& state, index_t M) {
  Node& n = node(2);
  RmsNormQuantInput<In> in;
  in.x = n.reduced[0];
  in.rows = M;
  in.cols = kHidden;
  in.ldx = kHidden;
  in.residual = n.residual[0];
  in.ldResidual = kHidden;
  in.weight = n.weight[0];
  const auto scale = colMajorView(n.s[0], M, kHidden / 128, M).value();
  const Fp8Matrix<E4M3FN> q{n.q[0], M, kHidden, kHidden};
  double t = 0.0;
  for (auto _ : state) {
    t = bench::timePerCall(n.streams[0], [&] {
      expectOk(rmsNormQuant<E4M3FN>(in, q, scale, QuantOptions{}, n.streams[0]).status(), "rmsNormQuant");
    }, kReps);
    state.SetIterationTime(t);
  }
  state.counters["us_per_call"] = t * 1e6;
  state.counters["M"] = static_cast<double>(M);
  gResults[{1, M, 0, 2}] = t * 1e6;
}

void registerAll() {
  for (index_t M : kRows)
    benchmark::RegisterBenchmark(("rmsNormQuantAlone/M:" + std::to_string(M)).c_str(), BM_RmsNormQuantAlone, M)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
  for (int W : kWorlds)
    for (index_t M : kRows)
      for (AllreduceAlgorithm algo :
           {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage})
        for (Variant v : {Variant::kFused, Variant::kSeparate}) {
          const std::string name = std::string(v == Variant::kFused ? "fused" : "allreduceSum+rmsNormQuant") +
                                   "/W:" + std::to_string(W) + "/M:" + std::to_string(M) + "/" + algoName(algo);
          benchmark::RegisterBenchmark(name.c_str(), BM_Allreduce, W, M, algo, v)
              ->UseManualTime()
              ->Iterations(1)
              ->Unit(benchmark::kMicrosecond);
        }
}

void printSummary() {
  std::printf("\nsummary: us per call (median of %d graph launches of %d calls per rank, all ranks at once)\n", kReps,
              kCallsPerGraph);
  std::printf("summary: %3s %5s %-10s %-9s %10s %10s %10s %8s\n", "W", "M", "algorithm", "(auto->)", "fused",
              "unfused", "rms alone", "unf/fus");
  for (int W : kWorlds)
    for (index_t M : kRows)
      for (AllreduceAlgorithm algo :
           {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage}) {
        auto f = gResults.find({W, M, static_cast<int>(algo), 0});
        auto s = gResults.find({W, M, static_cast<int>(algo), 1});
        auto r = gResults.find({1, M, 0, 2});
        if (f == gResults.end() || s == gResults.end()) continue;
        const AllreduceAlgorithm picked = chooseAllreduceAlgorithm(algo, W, M, kHidden, 2, AllreduceOptions{}.oneStageMaxBytes);
        std::printf("summary: %3d %5lld %-10s %-9s %10.2f %10.2f %10.2f %8.3f\n", W, static_cast<long long>(M),
                    algoName(algo), algoName(picked), f->second, s->second, r != gResults.end() ? r->second : 0.0,
                    s->second / f->second);
      }
}

}  // namespace

int main(int argc, char** argv) {
  // Before the CUDA runtime starts (see allreduce/communicator.hpp).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_allreduce: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench_allreduce: %s, %d SMs; K = %lld, bf16 -> e4m3fn, fp32 scales, column-major\n", prop.name,
              prop.multiProcessorCount, static_cast<long long>(kHidden));
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  printSummary();
  return 0;
}
