// Producer + block-scaled GEMM benchmarks: what feeding cuBLASLt's
// VEC128 x BLK128x128 fp8 GEMM costs per call along the two paths that give
// it its column-major activation scales:
//   transposed : groupQuant with TRANSPOSE_SCALE (ColMajor{align(M, 4)} view) + GEMM
//   materialize: groupQuant row-major + materialize(ld = align(M, 4)) + GEMM
// and the GEMM alone, at M in {1, 16, 128, 4096}, K = N = 7168, bf16 input,
// e4m3fn, fp32 scales, bf16 output. GPU time from CUDA events around a CUDA
// graph of kLaunchesPerGraph calls, median of 15 replays (as bench_producers).
//
//   bench_gemm_consumer [--benchmark_out=FILE --benchmark_out_format=json]
//
// Counters: us_per_call, M, TFLOPS (2 M N K / time; the GEMM on the real M).
// After the run a "summary:" table gives both paths side by side.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fp8scale/consumers/cublaslt_block_gemm.hpp"
#include "fp8scale/consumers/weight_block_quant.hpp"
#include "graph_timing.cuh"
#include "fp8scale/fp8scale.hpp"

namespace {

using namespace fp8scale;
using bench::expectOk;
using bench::kLaunchesPerGraph;

const index_t kN = 7168, kK = 7168, kG = kK / 128;
const std::vector<index_t> kRows = {1, 16, 128, 4096};

cudaStream_t gStream;
CublasLtBlockGemm* gGemm = nullptr;

/// Seconds per call of `body` on gStream (support/graph_timing.cuh).
double timePerCall(const std::function<void()>& body) { return bench::timePerCall(gStream, body); }

/// Device buffers sized for the largest M, reused by every benchmark.
struct Buffers {
  BFloat16* x = nullptr;      // [maxM, K] activations
  std::uint8_t* q = nullptr;  // [align(maxM, 4), K] fp8; padding rows zero, set once
  float* sCol = nullptr;      // [G][align(maxM, 4)] producer-written column-major scales
  float* sRow = nullptr;      // [maxM][G] row-major scales
  float* sMat = nullptr;      // [G][align(maxM, 4)] materialized scales
  BFloat16* y = nullptr;      // [align(maxM, 4), N]
  BlockQuantizedWeight<E4M3FN> w;
};
Buffers gBuf;

void allocate() {
  const index_t maxM = kRows.back(), maxPad = alignUp(maxM, 4);
  BENCH_CHECK(cudaMalloc(&gBuf.x, static_cast<std::size_t>(maxM * kK) * sizeof(BFloat16)));
  BENCH_CHECK(cudaMalloc(&gBuf.q, static_cast<std::size_t>(maxPad * kK)));
  BENCH_CHECK(cudaMemset(gBuf.q, 0, static_cast<std::size_t>(maxPad * kK)));
  BENCH_CHECK(cudaMalloc(&gBuf.sCol, static_cast<std::size_t>(kG * maxPad) * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&gBuf.sRow, static_cast<std::size_t>(maxM * kG) * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&gBuf.sMat, static_cast<std::size_t>(kG * maxPad) * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&gBuf.y, static_cast<std::size_t>(maxPad * kN) * sizeof(BFloat16)));
  // Activation- and weight-like values (never all zero: zeros can run faster).
  std::vector<BFloat16> host(static_cast<std::size_t>(std::max(maxM, kN) * kK));
  std::uint64_t z = 0x9E3779B97F4A7C15ull;
  for (auto& v : host) {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    v = toBFloat16((static_cast<float>(z >> 40) * (1.0f / 16777216.0f) - 0.5f) * 4.0f);
  }
  BENCH_CHECK(cudaMemcpy(gBuf.x, host.data(), static_cast<std::size_t>(maxM * kK) * sizeof(BFloat16),
                         cudaMemcpyHostToDevice));
  BFloat16* wIn = nullptr;
  std::uint8_t* wq = nullptr;
  float* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&wIn, static_cast<std::size_t>(kN * kK) * sizeof(BFloat16)));
  BENCH_CHECK(cudaMalloc(&wq, static_cast<std::size_t>(kN * kK)));
  BENCH_CHECK(cudaMalloc(&ws, static_cast<std::size_t>(weightScaleElems(kN, kK)) * sizeof(float)));
  BENCH_CHECK(cudaMemcpy(wIn, host.data(), static_cast<std::size_t>(kN * kK) * sizeof(BFloat16), cudaMemcpyHostToDevice));
  auto w = weightBlockQuant<E4M3FN>(WeightQuantInput<BFloat16>{wIn, kN, kK, kK}, Fp8Matrix<E4M3FN>{wq, kN, kK, kK},
                                    weightScaleView(ws, kN, kK).value(), WeightQuantOptions{}, gStream);
  expectOk(w.status());
  gBuf.w = w.value();
  BENCH_CHECK(cudaStreamSynchronize(gStream));
  BENCH_CHECK(cudaFree(wIn));
}

std::map<std::string, std::map<index_t, double>> gResults;  // name -> M -> us

void report(benchmark::State& state, const char* name, double seconds) {
  const index_t M = state.range(0);
  state.counters["us_per_call"] = seconds * 1e6;
  state.counters["M"] = static_cast<double>(M);
  state.counters["TFLOPS"] = 2.0 * static_cast<double>(M) * kN * kK / seconds * 1e-12;
  gResults[name][M] = seconds * 1e6;
}

void BM_GemmOnly(benchmark::State& state) {
  const index_t M = state.range(0), Mpad = alignUp(M, 4);
  const QuantizedTensor<E4M3FN, ColMajor> x{Fp8Matrix<E4M3FN>{gBuf.q, M, kK, kK},
                                            colMajorView(gBuf.sCol, M, kG, Mpad).value(), 128};
  BENCH_CHECK(cudaMemset(gBuf.sCol, 0, static_cast<std::size_t>(kG * Mpad) * sizeof(float)));
  double t = 0.0;
  for (auto _ : state) {
    t = timePerCall([&] { expectOk(gGemm->run(x, gBuf.w, gBuf.y, kN, gStream)); });
    state.SetIterationTime(t);
  }
  report(state, "gemm_only", t);
}

/// groupQuant with TRANSPOSE_SCALE: the producer writes [G][align(M, 4)]; its
/// view goes to the GEMM as is.
void BM_TransposedViewThenGemm(benchmark::State& state) {
  const index_t M = state.range(0), Mpad = alignUp(M, 4);
  QuantOptions opt;
  const auto in = GroupQuantInput<BFloat16>::matrix(gBuf.x, M, kK, kK);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, kK, kK};
  const auto view = colMajorView(gBuf.sCol, M, kG, Mpad).value();
  double t = 0.0;
  for (auto _ : state) {
    t = timePerCall([&] {
      auto x = groupQuant<E4M3FN>(in, q, view, opt, gStream);
      expectOk(x.status());
      expectOk(gGemm->run(x.value(), gBuf.w, gBuf.y, kN, gStream));
    });
    state.SetIterationTime(t);
  }
  report(state, "transposed_view+gemm", t);
}

/// groupQuant row-major, then the relayout kernel, then the GEMM.
void BM_RowMajorMaterializeThenGemm(benchmark::State& state) {
  const index_t M = state.range(0), Mpad = alignUp(M, 4);
  QuantOptions opt;
  const auto in = GroupQuantInput<BFloat16>::matrix(gBuf.x, M, kK, kK);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, kK, kK};
  const auto rowView = rowMajorView(gBuf.sRow, M, kG).value();
  double t = 0.0;
  for (auto _ : state) {
    t = timePerCall([&] {
      auto x = groupQuant<E4M3FN>(in, q, rowView, opt, gStream);
      expectOk(x.status());
      auto mat = materialize(x.value().scale, gBuf.sMat, Mpad, gStream);
      expectOk(mat.status());
      const QuantizedTensor<E4M3FN, ColMajor> xc{x.value().data, mat.value(), x.value().groupSize};
      expectOk(gGemm->run(xc, gBuf.w, gBuf.y, kN, gStream));
    });
    state.SetIterationTime(t);
  }
  report(state, "row_major+materialize+gemm", t);
}

void registerAll() {
  for (index_t M : kRows) {
    benchmark::RegisterBenchmark("gemm_only", BM_GemmOnly)->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("transposed_view+gemm", BM_TransposedViewThenGemm)->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("row_major+materialize+gemm", BM_RowMajorMaterializeThenGemm)
        ->Arg(M)
        ->UseManualTime()
        ->Iterations(3);
  }
}

void printSummary() {
  std::printf("summary: group quant (bf16 -> e4m3fn, 1x128 fp32 scales) + cuBLASLt VEC128 x BLK128x128 GEMM, "
              "N = K = 7168, bf16 out, us per call\n");
  std::printf("summary: %6s %12s %22s %28s %10s\n", "M", "gemm only", "transposed view+gemm",
              "row-major+materialize+gemm", "saved");
  for (index_t M : kRows) {
    const double g = gResults["gemm_only"][M], a = gResults["transposed_view+gemm"][M],
                 b = gResults["row_major+materialize+gemm"][M];
    std::printf("summary: %6lld %12.2f %22.2f %28.2f %10.2f\n", static_cast<long long>(M), g, a, b, b - a);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_gemm_consumer: no CUDA device; nothing to measure\n");
    return 0;
  }
  BENCH_CHECK(cudaStreamCreateWithFlags(&gStream, cudaStreamNonBlocking));
  auto created = CublasLtBlockGemm::create();
  if (!created) {
    std::printf("bench_gemm_consumer: %s\n", created.status().message().c_str());
    return 1;
  }
  CublasLtBlockGemm gemm = std::move(created.value());
  gGemm = &gemm;
  std::printf("bench_gemm_consumer: cuBLASLt %zu\n", CublasLtBlockGemm::libraryVersion());
  allocate();
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  printSummary();
  return 0;
}
