// The fused allreduce + residual + RMSNorm + group quant on one GPU
// with simulated ranks: W = 1, 2, 4, 8 ranks are plain buffers on device 0,
// each rank's kernel on its own non-blocking stream, all co-resident.
//
// What is checked:
//   - Sweep (W x M x K): one-stage == two-stage == the gathered fallback
//     step, bit for bit, on every rank: fp8 data (with padded rows whose gaps
//     must stay untouched), scales (column-major padding over garbage),
//     residual_out and the bf16 output; each also equals the unfused
//     composition on the device (allreduceSum, then rmsNormQuant) bit for
//     bit; TRANSPOSE_SCALE true + view equals false + materialize. The
//     device allreduce equals the host's rank-ordered fp32 sum bit for bit
//     (NaN matches NaN); the device RMSNorm quant of it is within the
//     rmsNormQuant bounds of the host reference (one fp8 step).
//   - The NCCL fallback proper (ncclAllGather + the local step) only for
//     world size 1: NCCL cannot put two ranks on one GPU, so for W > 1 the
//     all-gather is stood in for by a device memcpy into the [W][M][K] buffer.
//   - Race: 1,000 back-to-back replays of each rank's captured graph (the
//     fused call, then a kernel that overwrites the rank's partial with NaN,
//     a check of the outputs against the expected bits, a restore): no NaN,
//     no wrong bit, no fault.
//   - Refusals and faults: unregistered input, unsupported world sizes,
//     buffers too small, ranks with different shapes, a rank that never
//     calls: a Status or a recorded fault naming the rank, never a hang.
//
// Every spin-wait runs with a limit (FP8SCALE_AR_TIMEOUT_MS, default 5000).
// main() sets CUDA_DEVICE_MAX_CONNECTIONS=32 and CUDA_MODULE_LOADING=EAGER
// (HIP: GPU_MAX_HW_QUEUES=8) before the runtime starts (see
// allreduce/communicator.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"
#include "fp8scale/reference/allreduce_fused.hpp"
#include "fused_tally.cuh"
#if defined(FP8SCALE_WITH_NCCL)
#include "fp8scale/producers/allreduce_rmsnorm_quant_nccl.hpp"
#endif

namespace fp8scale::test {
namespace {

using In = BFloat16;
using Format = E4M3FN;

std::uint64_t testTimeoutNs() {
  const char* e = std::getenv("FP8SCALE_AR_TIMEOUT_MS");
  const long ms = e != nullptr ? std::atol(e) : 5000;
  return static_cast<std::uint64_t>(ms > 0 ? ms : 5000) * 1000000ull;
}

AllreduceOptions testOptions(std::size_t bufferBytes = std::size_t{16} << 20) {
  AllreduceOptions o;
  o.bufferBytes = bufferBytes;
  o.spinTimeoutNs = testTimeoutNs();
  return o;
}

// ---- Device helpers -------------------------------------------------------------

/// counter += number of 4-byte words where a and b differ.
__global__ void countWordDiffs(const std::uint32_t* a, const std::uint32_t* b, std::size_t n,
                               unsigned long long* counter) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local != 0) atomicAdd(counter, local);
}

__global__ void fillWords(std::uint32_t* p, std::size_t n, std::uint32_t v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = v;
}

__global__ void copyWords(const std::uint32_t* src, std::uint32_t* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

/// What a 4-byte word of an output holds, for NaN detection.
enum class WordKind : int { kFp8x4 = 0, kFp32 = 1, kBf16x2 = 2 };

/// diffs += words that differ from `want`; nans += words of `got` holding a
/// NaN of their kind (e4m3fn 0x7F / 0xFF bytes, fp32, bf16 halves).
__global__ void checkOutput(const std::uint32_t* got, const std::uint32_t* want, std::size_t n, WordKind kind,
                            unsigned long long* diffs, unsigned long long* nans) {
  unsigned long long d = 0, z = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t w = got[i];
    d += w != want[i];
    if (kind == WordKind::kFp32) {
      z += (w & 0x7FFFFFFFu) > 0x7F800000u;
    } else if (kind == WordKind::kBf16x2) {
      z += (w & 0x7FFFu) > 0x7F80u;
      z += ((w >> 16) & 0x7FFFu) > 0x7F80u;
    } else {
      for (int b = 0; b < 4; ++b) z += ((w >> (8 * b)) & 0x7Fu) == 0x7Fu;
    }
  }
  if (d != 0) atomicAdd(diffs, d);
  if (z != 0) atomicAdd(nans, z);
}

/// Fills `bytes` (a multiple of 4) with the word `v`, as a kernel on `s`.
void fillAsKernel(void* p, std::size_t bytes, std::uint32_t v, Stream s) {
  fillWords<<<132, 256, 0, s>>>(static_cast<std::uint32_t*>(p), bytes / 4, v);
}

void copyAsKernel(const void* src, void* dst, std::size_t bytes, Stream s) {
  copyWords<<<132, 256, 0, s>>>(static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), bytes / 4);
}

/// One non-blocking stream per rank.
struct RankStreams {
  Stream s[kAllreduceMaxRanks] = {};
  RankStreams() {
    for (auto& x : s) EXPECT_EQ(runtime::streamCreate(&x, true), kDeviceSuccess);
  }
  ~RankStreams() {
    for (auto& x : s) (void)runtime::streamDestroy(x);
  }
  void syncAll(int world) const {
    for (int p = 0; p < world; ++p) EXPECT_EQ(runtime::streamSynchronize(s[p]), kDeviceSuccess);
  }
};

/// Device counters read back in one copy.
struct Counters {
  explicit Counters(std::size_t n) : dev(n) { reset(); }
  void reset() { (void)runtime::memset(dev.get(), 0, dev.size() * sizeof(unsigned long long)); }
  unsigned long long* at(std::size_t i) const { return dev.get() + i; }
  std::vector<unsigned long long> read() const { return dev.download(); }
  DeviceBuffer<unsigned long long> dev;
};

void countDiffs(const void* a, const void* b, std::size_t bytes, unsigned long long* counter) {
  countWordDiffs<<<264, 256>>>(static_cast<const std::uint32_t*>(a), static_cast<const std::uint32_t*>(b), bytes / 4,
                               counter);
}

// ---- Case data --------------------------------------------------------------------

// The largest M is past RmsNormPolicy::kRowsMinRows, so that rmsNormQuant's
// large-M kernel (staged block per row on CUDA, the row loop on AMD) is held
// bit for bit to the fused epilogue's block per row; the smaller ones take
// rmsNormQuant's block per row.
constexpr index_t kMaxRows = RmsNormPolicy<BFloat16>::kRowsMinRows + 3;
const std::vector<index_t> kRows = {1, 2, 3, 16, 17, 128, 1000, kMaxRows};
const std::vector<index_t> kCols = {2048, 4096, 7168};
const std::vector<int> kWorlds = {1, 2, 4, 8};

/// kMaxRanks partials of kMaxRows x K each (activation-like, with makeActivations'
/// zero rows, NaN / inf row and saturating values in every rank), a residual
/// and a weight. A case of M rows and W ranks uses the first M rows of the
/// first W partials (row stride K).
struct HostData {
  index_t K = 0;
  std::vector<std::vector<In>> partials;
  std::vector<In> residual, weight;
};

HostData buildHostData(index_t K) {
  HostData d;
  d.K = K;
  for (int p = 0; p < kAllreduceMaxRanks; ++p)
    d.partials.push_back(makeActivations<In>(kMaxRows, K, K, static_cast<unsigned>(1000 + 31 * p + K), 8.0f));
  std::mt19937 rng(static_cast<unsigned>(K) + 7u);
  std::uniform_real_distribution<float> wd(0.5f, 1.5f), rd(-2.0f, 2.0f);
  d.weight.resize(K);
  for (auto& v : d.weight) v = fromF<In>(wd(rng));
  d.residual.resize(static_cast<std::size_t>(kMaxRows * K));
  for (auto& v : d.residual) v = fromF<In>(rd(rng));
  return d;
}

/// Built once per K (the generation of 8 x 1000 x K normals is the cost).
const HostData& makeHostData(index_t K) {
  static std::map<index_t, HostData> cache;
  auto it = cache.find(K);
  if (it == cache.end()) it = cache.emplace(K, buildHostData(K)).first;
  return it->second;
}

/// The host reference of one case: the exact sum and the fused outputs.
struct HostReference {
  std::vector<In> sum, residual, normOut;
  std::vector<std::uint8_t> q;
  std::vector<float> s;    // row-major (M, G)
  std::vector<float> s32;  // UE8M0 runs: the fp32-rule scales of the same groups (fused_tally.cuh's flips)
  Status status;
};

template <class Rule>
HostReference hostReference(const HostData& d, int W, index_t M, bool withResidual) {
  const index_t K = d.K, G = K / 128;
  HostReference h;
  std::vector<const In*> parts;
  for (int p = 0; p < W; ++p) parts.push_back(d.partials[p].data());
  h.sum.resize(static_cast<std::size_t>(M * K));
  h.status = reference::allreduceSum(parts, M, K, K, h.sum.data(), K);
  if (!h.status) return h;
  h.residual.assign(d.residual.begin(), d.residual.begin() + M * K);
  h.normOut.resize(static_cast<std::size_t>(M * K));
  h.q.resize(static_cast<std::size_t>(M * K));
  h.s.resize(static_cast<std::size_t>(M * G));
  RmsNormQuantInput<In> in;
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.residual = withResidual ? h.residual.data() : nullptr;
  in.ldResidual = K;
  in.weight = d.weight.data();
  in.normEps = 1e-6f;
  in.normOut = h.normOut.data();
  in.ldNormOut = K;
  if (std::is_same<Rule, ScaleUE8M0>::value) {  // before `in` updates h.residual
    std::vector<In> r32 = h.residual, y32(static_cast<std::size_t>(M * K));
    std::vector<std::uint8_t> q32(static_cast<std::size_t>(M * K));
    h.s32.resize(static_cast<std::size_t>(M * G));
    RmsNormQuantInput<In> in32 = in;
    in32.residual = withResidual ? r32.data() : nullptr;
    in32.normOut = y32.data();
    h.status = reference::allreduceRmsNormQuant<Format, ScaleFp32>(
        parts, in32, Fp8Matrix<Format>{q32.data(), M, K, K}, rowMajorView(h.s32.data(), M, G).value(), 128);
    if (!h.status) return h;
  }
  h.status = reference::allreduceRmsNormQuant<Format, Rule>(parts, in, Fp8Matrix<Format>{h.q.data(), M, K, K},
                                                            rowMajorView(h.s.data(), M, G).value(), 128);
  return h;
}

/// Bitwise equality of two 16-bit vectors with NaN == NaN (payloads are the
/// hardware's own: the GPU returns its canonical NaN from x + NaN).
std::size_t countInputDiffs(const std::vector<In>& a, const std::vector<In>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    n += a[i].bits != b[i].bits && !(std::isnan(toFloat(a[i])) && std::isnan(toFloat(b[i])));
  return n;
}

/// One rank's output buffers for a case, and their byte sizes.
struct Outputs {
  Outputs(index_t M, index_t K, index_t scaleElems)
      : ldq(K + 32), q(static_cast<std::size_t>(M * (K + 32) + 16)), s(static_cast<std::size_t>(scaleElems + 1)),
        r(static_cast<std::size_t>(M * K + 8)), y(static_cast<std::size_t>(M * K + 8)) {}
  index_t ldq;
  DeviceBuffer<std::uint8_t> q;
  DeviceBuffer<float> s;
  DeviceBuffer<In> r, y;
};

/// The algorithms under test; kGathered is the fallback's local step.
enum class Path : int { kOneStage = 0, kTwoStage = 1, kGathered = 2 };
const char* pathName(Path p) {
  return p == Path::kOneStage ? "one-stage" : p == Path::kTwoStage ? "two-stage" : "gathered fallback";
}

/// Everything one case shares between its runs.
struct CaseSetup {
  index_t M = 0, K = 0, G = 0, ld = 0;
  int W = 0;
  bool withResidual = false, withNormOut = false;
  ScaleRule rule = ScaleRule::kFp32;
  const HostData* data = nullptr;
  DeviceBuffer<In>* residual0 = nullptr;  // [M, K] the residual every run starts from
  DeviceBuffer<In>* weight = nullptr;
  DeviceBuffer<In>* gathered = nullptr;   // [W][M][K]
};

RmsNormQuantInput<In> inputOf(const CaseSetup& c, const In* x, Outputs& o) {
  RmsNormQuantInput<In> in;
  in.x = x;
  in.rows = c.M;
  in.cols = c.K;
  in.ldx = c.K;
  in.residual = c.withResidual ? o.r.get() : nullptr;
  in.ldResidual = c.K;
  in.weight = c.weight->get();
  in.normEps = 1e-6f;
  in.normOut = c.withNormOut ? o.y.get() : nullptr;
  in.ldNormOut = c.K;
  return in;
}

template <class Layout>
ScaleView<float, Layout> viewOf(const CaseSetup& c, Outputs& o) {
  if constexpr (Layout::kColumnMajor) return colMajorView(o.s.get(), c.M, c.G, c.ld).value();
  else return rowMajorView(o.s.get(), c.M, c.G).value();
}

/// Resets a rank's outputs: garbage in q, s and y; the case's residual in r.
void prepareOutputs(const CaseSetup& c, Outputs& o) {
  o.q.poison(kGarbage);
  o.s.poison(kGarbage);
  o.y.poison(kGarbage);
  o.r.poison(kGarbage);
  if (c.M > 0)
    EXPECT_EQ(runtime::memcpy(o.r.get(), c.residual0->get(), static_cast<std::size_t>(c.M * c.K) * sizeof(In),
                         runtime::Copy::DeviceToDevice),
              kDeviceSuccess);
  // The memsets and the device-to-device copy run on the legacy stream without
  // blocking the host, and the ranks' streams are non-blocking: without this
  // sync a rank's kernel could start before its residual copy lands (seen on
  // the H200 as a last rank whose whole output differed, M = 1000).
  EXPECT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
}

/// Runs `path` on every rank into outs[p], all ranks concurrently; returns the
/// launchers' first non-ok status.
template <class Layout>
Status runPath(Path path, SimulatedAllreduceGroup& group, const CaseSetup& c, std::vector<Outputs>& outs,
               const RankStreams& streams) {
  QuantOptions opt;
  opt.rule = c.rule;
  Status first;
  for (int p = 0; p < c.W; ++p) {
    Outputs& o = outs[p];
    const Fp8Matrix<Format> q{o.q.get(), c.M, c.K, o.ldq};
    Status st;
    if (path == Path::kGathered) {
      st = gatheredRmsNormQuant<Format>(inputOf(c, c.gathered->get(), o), c.W, c.M * c.K, static_cast<In*>(nullptr), q,
                                        viewOf<Layout>(c, o), opt, streams.s[p])
               .status();
    } else {
      const In* x = static_cast<const In*>(group[p].stagingBuffer());
      st = allreduceRmsNormQuant<Format>(group[p], inputOf(c, x, o), q, viewOf<Layout>(c, o), opt, streams.s[p],
                                         path == Path::kOneStage ? AllreduceAlgorithm::kOneStage
                                                                 : AllreduceAlgorithm::kTwoStage)
               .status();
    }
    if (!st && first) first = st;
  }
  return first;
}

/// Host comparison of the device reference (allreduceSum + rmsNormQuant on
/// the device) with the host reference: the sum exactly, residual_out
/// exactly, fp8 / scales / normOut within rmsNormQuant's bounds.
template <class Rule>
void compareWithHost(const CaseSetup& c, const HostReference& h, const std::vector<In>& devSum, const Outputs& ref,
                     FusedTally& tally) {
  const index_t M = c.M, K = c.K, G = c.G;
  std::vector<In> sum(devSum.begin(), devSum.begin() + M * K);
  EXPECT_EQ(countInputDiffs(sum, h.sum), 0u) << "the device allreduce differs from the rank-ordered fp32 sum";
  const auto q = ref.q.download();
  const auto s = ref.s.download();
  ContractOutput got;
  got.q.resize(static_cast<std::size_t>(M * K));
  for (index_t m = 0; m < M; ++m)
    std::copy(q.begin() + m * ref.ldq, q.begin() + m * ref.ldq + K, got.q.begin() + m * K);
  got.rowMajorScale.assign(s.begin(), s.begin() + M * G);
  tallyFused<Format, Rule>(got, h.q, h.s, tally, kRmsNormMaxScaleRel, h.s32.empty() ? nullptr : &h.s32);
  if (c.withResidual) {
    auto r = ref.r.download();
    r.resize(static_cast<std::size_t>(M * K));
    EXPECT_EQ(countInputDiffs(r, h.residual), 0u) << "residual_out differs from round(sum + residual)";
  }
  if (c.withNormOut) {
    auto y = ref.y.download();
    std::size_t failures = 0;
    for (index_t i = 0; i < M * K; ++i) {
      if (y[i].bits == h.normOut[i].bits) continue;
      const float a = toFloat(h.normOut[i]), b = toFloat(y[i]);
      const float bound = std::max<float>(inputUlp<In>(a), std::fabs(a) * kRmsNormMaxScaleRel) + 1e-30f;
      if (!((std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= bound) && failures++ < 3)
        ADD_FAILURE() << "normOut " << b << " vs host reference " << a << " at " << i;
    }
  }
}

/// One case: every path x layout on every rank, against the device reference
/// of the same layout; then the device reference against the host.
template <class Rule>
void runCase(SimulatedAllreduceGroup& group, const RankStreams& streams, const HostData& d, int W, index_t M,
             FusedTally& tally) {
  const index_t K = d.K, G = K / 128;
  CaseSetup c;
  c.M = M;
  c.K = K;
  c.G = G;
  c.W = W;
  c.ld = contractLd(M);
  c.withResidual = (M + K / 128 + W) % 2 == 0;
  c.withNormOut = M != 3;
  c.rule = std::is_same<Rule, ScaleUE8M0>::value ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
  c.data = &d;
  SCOPED_TRACE(::testing::Message() << "W=" << W << " M=" << M << " K=" << K << " residual=" << c.withResidual
                                    << " normOut=" << c.withNormOut << " rule=" << Rule::kName);

  // Host reference, computed while the device runs.
  auto hostFuture = std::async(std::launch::async, [&] { return hostReference<Rule>(d, W, M, c.withResidual); });

  // Inputs: rank p's partial in its staging buffer; the gathered [W][M][K].
  const std::size_t partialBytes = static_cast<std::size_t>(M * K) * sizeof(In);
  DeviceBuffer<In> residual0(static_cast<std::size_t>(M * K)), weight(static_cast<std::size_t>(K)),
      gathered(static_cast<std::size_t>(W * M * K)), sum(static_cast<std::size_t>(M * K));
  c.residual0 = &residual0;
  c.weight = &weight;
  c.gathered = &gathered;
  ASSERT_EQ(runtime::memcpy(residual0.get(), d.residual.data(), partialBytes, runtime::Copy::HostToDevice), kDeviceSuccess);
  weight.upload(d.weight);
  for (int p = 0; p < W; ++p) {
    ASSERT_EQ(runtime::memcpy(group[p].stagingBuffer(), d.partials[p].data(), partialBytes, runtime::Copy::HostToDevice),
              kDeviceSuccess);
    // The stand-in for ncclAllGather: the same bytes, at rank stride M * K.
    ASSERT_EQ(runtime::memcpy(gathered.get() + p * M * K, d.partials[p].data(), partialBytes, runtime::Copy::HostToDevice),
              kDeviceSuccess);
  }

  // Device reference: the allreduce alone (rank 0, one-stage; every rank
  // must take part), then rmsNormQuant on its output, per layout.
  {
    DeviceBuffer<In> dummy(static_cast<std::size_t>(M * K) * kAllreduceMaxRanks);
    for (int p = 0; p < W; ++p) {
      In* out = p == 0 ? sum.get() : dummy.get() + p * M * K;
      const Status st = allreduceSum(group[p], static_cast<const In*>(group[p].stagingBuffer()), M, K, K, out, K,
                                     streams.s[p], AllreduceAlgorithm::kOneStage);
      ASSERT_TRUE(st) << st.message();
    }
    streams.syncAll(W);
    const Status err = group.checkErrors(streams.s[0]);
    ASSERT_TRUE(err) << err.message();
  }
  Outputs refRow(M, K, M * G), refCol(M, K, G * c.ld);
  {
    QuantOptions opt;
    opt.rule = c.rule;
    prepareOutputs(c, refRow);
    prepareOutputs(c, refCol);
    auto a = rmsNormQuant<Format>(inputOf(c, sum.get(), refRow), Fp8Matrix<Format>{refRow.q.get(), M, K, refRow.ldq},
                                  viewOf<RowMajor>(c, refRow), opt, nullptr);
    auto b = rmsNormQuant<Format>(inputOf(c, sum.get(), refCol), Fp8Matrix<Format>{refCol.q.get(), M, K, refCol.ldq},
                                  viewOf<ColMajor>(c, refCol), opt, nullptr);
    ASSERT_TRUE(a.isOk()) << a.status().message();
    ASSERT_TRUE(b.isOk()) << b.status().message();
    ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
  }

  // Every path x layout x rank against the device reference of its layout.
  std::vector<Outputs> outs;
  for (int p = 0; p < W; ++p) outs.emplace_back(M, K, G * c.ld);
  Counters counters(4 * kAllreduceMaxRanks);
  for (Path path : {Path::kOneStage, Path::kTwoStage, Path::kGathered})
    for (bool col : {false, true}) {
      SCOPED_TRACE(::testing::Message() << pathName(path) << (col ? ", column-major" : ", row-major"));
      for (auto& o : outs) prepareOutputs(c, o);
      const Status st = col ? runPath<ColMajor>(path, group, c, outs, streams)
                            : runPath<RowMajor>(path, group, c, outs, streams);
      ASSERT_TRUE(st) << st.message();
      streams.syncAll(W);
      ASSERT_EQ(deviceLastError(), kDeviceSuccess);
      const Status err = group.checkErrors(streams.s[0]);
      ASSERT_TRUE(err) << err.message();
      const Outputs& ref = col ? refCol : refRow;
      counters.reset();
      const std::size_t scaleBytes = static_cast<std::size_t>(col ? G * c.ld + 1 : M * G + 1) * sizeof(float);
      for (int p = 0; p < W; ++p) {
        countDiffs(outs[p].q.get(), ref.q.get(), outs[p].q.size(), counters.at(4 * p + 0));
        countDiffs(outs[p].s.get(), ref.s.get(), scaleBytes, counters.at(4 * p + 1));
        countDiffs(outs[p].r.get(), ref.r.get(), outs[p].r.size() * sizeof(In), counters.at(4 * p + 2));
        countDiffs(outs[p].y.get(), ref.y.get(), outs[p].y.size() * sizeof(In), counters.at(4 * p + 3));
      }
      const auto n = counters.read();
      for (int p = 0; p < W; ++p)
        EXPECT_TRUE(n[4 * p] == 0 && n[4 * p + 1] == 0 && n[4 * p + 2] == 0 && n[4 * p + 3] == 0)
            << "rank " << p << " differs from allreduceSum + rmsNormQuant in 4-byte words: fp8 " << n[4 * p]
            << ", scales " << n[4 * p + 1] << ", residual " << n[4 * p + 2] << ", normOut " << n[4 * p + 3];
      if (col && path == Path::kOneStage) {
        // TRANSPOSE_SCALE true read through its view == false + materialize,
        // both from the fused call (rank 0).
        auto emitted = outs[0].s.download();
        for (auto& o : outs) prepareOutputs(c, o);
        const Status row = runPath<RowMajor>(path, group, c, outs, streams);
        ASSERT_TRUE(row) << row.message();
        streams.syncAll(W);
        DeviceBuffer<float> materialized(static_cast<std::size_t>(G * c.ld + 1));
        materialized.poison(kGarbage);
        auto mat = materialize(viewOf<RowMajor>(c, outs[0]), materialized.get(), c.ld, nullptr);
        ASSERT_TRUE(mat.isOk()) << mat.status().message();
        ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
        auto viewed = mat.value().data() == outs[0].s.get() ? outs[0].s.download() : materialized.download();
        viewed.resize(static_cast<std::size_t>(G * c.ld));
        emitted.resize(static_cast<std::size_t>(G * c.ld));
        EXPECT_EQ(countBitDiffs(viewed, emitted), 0u) << "transposed emit differs from row-major + materialize";
        std::size_t padding = 0;
        for (index_t g = 0; g < G; ++g)
          for (index_t m = M; m < c.ld; ++m) padding += emitted[g * c.ld + m] != 0.0f;
        EXPECT_EQ(padding, 0u) << "column-major padding slots not zeroed";
      }
    }

  // The device reference against the host reference.
  HostReference h = hostFuture.get();
  ASSERT_TRUE(h.status) << h.status.message();
  compareWithHost<Rule>(c, h, sum.download(), refRow, tally);
}

/// The environment main() sets for the ranks' concurrency, printed by the first test.
#if defined(FP8SCALE_PLATFORM_HIP)
constexpr const char* kRuntimeEnvironment[] = {"GPU_MAX_HW_QUEUES"};
#else
constexpr const char* kRuntimeEnvironment[] = {"CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING"};
#endif

class AllreduceDevice : public DeviceTest {};

// First, the smallest case per world size, with the environment printed: if
// the ranks' kernels cannot run concurrently here, this says so in seconds
// (a recorded timeout) before the sweep spends its time.
TEST_F(AllreduceDevice, EveryWorldSizeCompletesOneSmallCallWithinTheSpinLimit) {
  int sms = 0, dev = 0;
  ASSERT_EQ(runtime::getDevice(&dev), kDeviceSuccess);
  DeviceInfo info;
  ASSERT_EQ(queryDevice(dev, info), kDeviceSuccess);
  sms = info.multiProcessorCount;
  std::printf("[allreduce] %d SMs;", sms);
  for (const char* name : kRuntimeEnvironment) {
    const char* value = std::getenv(name);
    std::printf(" %s=%s", name, value ? value : "(unset)");
  }
  std::printf("; spin limit %.1f s\n", 1e-9 * static_cast<double>(testTimeoutNs()));
  const index_t M = 1, K = 2048;
  const HostData& d = makeHostData(K);
  for (int W : kWorlds)
    for (AllreduceAlgorithm algo : {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage}) {
      SCOPED_TRACE(::testing::Message() << "W=" << W << " algorithm " << int(algo));
      auto created = SimulatedAllreduceGroup::create(W, testOptions());
      ASSERT_TRUE(created.isOk()) << created.status().message();
      SimulatedAllreduceGroup group = std::move(created.value());
      RankStreams streams;
      std::vector<DeviceBuffer<In>> out;
      for (int p = 0; p < W; ++p) {
        ASSERT_EQ(runtime::memcpy(group[p].stagingBuffer(), d.partials[p].data(), K * sizeof(In), runtime::Copy::HostToDevice),
                  kDeviceSuccess);
        out.emplace_back(static_cast<std::size_t>(K));
      }
      const auto start = std::chrono::steady_clock::now();
      for (int p = 0; p < W; ++p) {
        const Status st = allreduceSum(group[p], static_cast<const In*>(group[p].stagingBuffer()), M, K, K,
                                       out[p].get(), K, streams.s[p], algo);
        ASSERT_TRUE(st) << st.message();
      }
      streams.syncAll(W);
      const double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const Status err = group.checkErrors(streams.s[0]);
      std::printf("[allreduce] smoke W=%d %s: %s in %.2f ms (grid limit %d blocks per rank)\n", W,
                  algo == AllreduceAlgorithm::kOneStage ? "one-stage" : "two-stage", err.message().c_str(), ms,
                  allreduceGridLimit(4, sms, W, 0));
      ASSERT_TRUE(err) << err.message();
      std::vector<const In*> parts;
      for (int p = 0; p < W; ++p) parts.push_back(d.partials[p].data());
      std::vector<In> want(K);
      ASSERT_TRUE(reference::allreduceSum(parts, M, K, K, want.data(), K));
      for (int p = 0; p < W; ++p) EXPECT_EQ(countInputDiffs(out[p].download(), want), 0u) << "rank " << p;
    }
}

TEST_F(AllreduceDevice, AllPathsGiveTheSameBitsAsTheUnfusedCompositionAndMatchTheHost) {
  FusedTally tally;
  const auto start = std::chrono::steady_clock::now();
  for (index_t K : kCols) {
    const HostData& d = makeHostData(K);
    for (int W : kWorlds) {
      auto created = SimulatedAllreduceGroup::create(W, testOptions());
      ASSERT_TRUE(created.isOk()) << created.status().message();
      SimulatedAllreduceGroup group = std::move(created.value());
      RankStreams streams;
      for (index_t M : kRows) {
        runCase<ScaleFp32>(group, streams, d, W, M, tally);
        if (HasFatalFailure()) return;
      }
    }
  }
  tally.print("allreduce bf16_e4m3fn_fp32: device allreduceSum + rmsNormQuant vs host reference");
  expectFractionsWithinBounds(tally);
  std::printf("[allreduce] sweep W {1,2,4,8} x M {1,2,3,16,17,128,1000,%lld} x K {2048,4096,7168}: %.1f s\n",
              static_cast<long long>(kMaxRows),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST_F(AllreduceDevice, Ue8m0ScalesGiveTheSameBitsOnEveryPath) {
  FusedTally tally;
  const HostData& d = makeHostData(7168);
  auto created = SimulatedAllreduceGroup::create(4, testOptions());
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  for (index_t M : {17, 128}) runCase<ScaleUE8M0>(group, streams, d, 4, M, tally);
  tally.print("allreduce bf16_e4m3fn_ue8m0");
  expectFractionsWithinBounds(tally);
}

// Grids smaller than M: each block strides over rows (the co-residency bound
// does this for large M and W); results unchanged.
TEST_F(AllreduceDevice, SmallGridsStrideOverRows) {
  FusedTally tally;
  const HostData& d = makeHostData(2048);
  AllreduceOptions o = testOptions();
  o.maxBlocksPerRank = 3;
  auto created = SimulatedAllreduceGroup::create(4, o);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  for (index_t M : {2, 17, 128}) runCase<ScaleFp32>(group, streams, d, 4, M, tally);
  expectFractionsWithinBounds(tally);
}

// The allreduce alone equals the host's rank-ordered fp32 sum, bit for bit,
// with both algorithms (and kAuto), on every rank.
TEST_F(AllreduceDevice, AllreduceSumEqualsTheRankOrderedHostSum) {
  for (index_t K : {2048, 7168}) {
    const HostData& d = makeHostData(K);
    for (int W : {2, 4, 8}) {
      auto created = SimulatedAllreduceGroup::create(W, testOptions());
      ASSERT_TRUE(created.isOk()) << created.status().message();
      SimulatedAllreduceGroup group = std::move(created.value());
      RankStreams streams;
      for (index_t M : {1, 17, 1000}) {
        SCOPED_TRACE(::testing::Message() << "W=" << W << " M=" << M << " K=" << K);
        std::vector<const In*> parts;
        for (int p = 0; p < W; ++p) parts.push_back(d.partials[p].data());
        std::vector<In> want(static_cast<std::size_t>(M * K));
        ASSERT_TRUE(reference::allreduceSum(parts, M, K, K, want.data(), K));
        for (int p = 0; p < W; ++p)
          ASSERT_EQ(runtime::memcpy(group[p].stagingBuffer(), d.partials[p].data(), static_cast<std::size_t>(M * K) * 2,
                               runtime::Copy::HostToDevice),
                    kDeviceSuccess);
        for (AllreduceAlgorithm algo :
             {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage, AllreduceAlgorithm::kAuto}) {
          std::vector<DeviceBuffer<In>> out;
          for (int p = 0; p < W; ++p) {
            out.emplace_back(static_cast<std::size_t>(M * K));
            out.back().poison(kGarbage);
          }
          for (int p = 0; p < W; ++p) {
            const Status st = allreduceSum(group[p], static_cast<const In*>(group[p].stagingBuffer()), M, K, K,
                                           out[p].get(), K, streams.s[p], algo);
            ASSERT_TRUE(st) << st.message();
          }
          streams.syncAll(W);
          const Status err = group.checkErrors(streams.s[0]);
          ASSERT_TRUE(err) << err.message();
          for (int p = 0; p < W; ++p)
            EXPECT_EQ(countInputDiffs(out[p].download(), want), 0u) << "rank " << p << " algorithm " << int(algo);
        }
      }
    }
  }
}

// ---- Race: graph replays with the partial destroyed right after each call ------------

TEST_F(AllreduceDevice, GraphReplaysNeverLetAPeersOverwrittenInputReachAnOutput) {
  const index_t M = 33, K = 4096, G = K / 128;
  const int kReplays = 1000;
  for (int W : {2, 4, 8})
    for (AllreduceAlgorithm algo : {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage}) {
      SCOPED_TRACE(::testing::Message() << "W=" << W << " algorithm " << int(algo));
      auto created = SimulatedAllreduceGroup::create(W, testOptions());
      ASSERT_TRUE(created.isOk()) << created.status().message();
      SimulatedAllreduceGroup group = std::move(created.value());
      RankStreams streams;
      // Clean inputs (no NaN, no inf), so any NaN in an output is a race.
      std::mt19937 rng(static_cast<unsigned>(W * 10 + int(algo)));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<std::vector<In>> parts(W, std::vector<In>(static_cast<std::size_t>(M * K)));
      for (auto& part : parts)
        for (auto& v : part) v = fromF<In>(nd(rng));
      std::vector<In> r0(static_cast<std::size_t>(M * K)), w(static_cast<std::size_t>(K));
      for (auto& v : r0) v = fromF<In>(nd(rng));
      for (auto& v : w) v = fromF<In>(1.0f + 0.25f * nd(rng));
      DeviceBuffer<In> dr0(r0.size()), dw(w.size());
      dr0.upload(r0);
      dw.upload(w);
      std::vector<DeviceBuffer<In>> saved;
      for (int p = 0; p < W; ++p) {
        saved.emplace_back(static_cast<std::size_t>(M * K));
        saved.back().upload(parts[p]);
        ASSERT_EQ(runtime::memcpy(group[p].stagingBuffer(), saved.back().get(), static_cast<std::size_t>(M * K) * 2,
                             runtime::Copy::DeviceToDevice),
                  kDeviceSuccess);
      }
      CaseSetup c;
      c.M = M;
      c.K = K;
      c.G = G;
      c.W = W;
      c.ld = M + 3;
      c.withResidual = true;
      c.withNormOut = true;
      c.residual0 = &dr0;
      c.weight = &dw;
      std::vector<Outputs> outs, want;
      for (int p = 0; p < W; ++p) {
        outs.emplace_back(M, K, G * c.ld);
        want.emplace_back(M, K, G * c.ld);
      }
      QuantOptions opt;
      // Expected bits: one plain call per rank.
      for (int p = 0; p < W; ++p) prepareOutputs(c, want[p]);
      for (int p = 0; p < W; ++p) {
        const auto st = allreduceRmsNormQuant<Format>(group[p],
                                                      inputOf(c, static_cast<const In*>(group[p].stagingBuffer()), want[p]),
                                                      Fp8Matrix<Format>{want[p].q.get(), M, K, want[p].ldq},
                                                      viewOf<ColMajor>(c, want[p]), opt, streams.s[p], algo);
        ASSERT_TRUE(st.isOk()) << st.status().message();
      }
      streams.syncAll(W);
      {
        const Status err = group.checkErrors(streams.s[0]);
        ASSERT_TRUE(err) << err.message();
      }
      // Each rank's graph: restore residual, poison outputs, the call, NaN
      // over the partial, check the outputs, restore the partial.
      Counters counters(2 * kAllreduceMaxRanks);  // [p]: wrong words, [8 + p]: NaNs
      std::vector<runtime::GraphExec> execs(W);
      const std::size_t bytes = static_cast<std::size_t>(M * K) * sizeof(In);
      for (int p = 0; p < W; ++p) {
        Stream s = streams.s[p];
        runtime::Graph graph;
        ASSERT_EQ(runtime::streamBeginCapture(s), kDeviceSuccess);
        Outputs& o = outs[p];
        copyAsKernel(dr0.get(), o.r.get(), bytes, s);
        fillAsKernel(o.q.get(), o.q.size(), 0xABABABABu, s);
        fillAsKernel(o.s.get(), o.s.size() * 4, 0xABABABABu, s);
        fillAsKernel(o.y.get(), o.y.size() * 2, 0xABABABABu, s);
        const auto st =
            allreduceRmsNormQuant<Format>(group[p], inputOf(c, static_cast<const In*>(group[p].stagingBuffer()), o),
                                          Fp8Matrix<Format>{o.q.get(), M, K, o.ldq}, viewOf<ColMajor>(c, o), opt, s,
                                          algo);
        fillAsKernel(group[p].stagingBuffer(), bytes, 0x7FC07FC0u, s);  // bf16 NaN pairs
        const std::pair<const void*, const void*> pairs[4] = {
            {o.q.get(), want[p].q.get()}, {o.s.get(), want[p].s.get()}, {o.r.get(), want[p].r.get()},
            {o.y.get(), want[p].y.get()}};
        const std::size_t sizes[4] = {o.q.size(), o.s.size() * 4, bytes, bytes};
        const WordKind kinds[4] = {WordKind::kFp8x4, WordKind::kFp32, WordKind::kBf16x2, WordKind::kBf16x2};
        for (int b = 0; b < 4; ++b)
          checkOutput<<<66, 256, 0, s>>>(static_cast<const std::uint32_t*>(pairs[b].first),
                                        static_cast<const std::uint32_t*>(pairs[b].second), sizes[b] / 4, kinds[b],
                                        counters.at(p), counters.at(kAllreduceMaxRanks + p));
        copyAsKernel(saved[p].get(), group[p].stagingBuffer(), bytes, s);
        ASSERT_EQ(runtime::streamEndCapture(s, &graph), kDeviceSuccess);
        ASSERT_TRUE(st.isOk()) << st.status().message();
        ASSERT_EQ(runtime::graphInstantiate(&execs[p], graph), kDeviceSuccess);
        ASSERT_EQ(runtime::graphDestroy(graph), kDeviceSuccess);
      }
      const auto start = std::chrono::steady_clock::now();
      int done = 0;
      for (; done < kReplays; done += 100) {
        for (int i = 0; i < 100; ++i)
          for (int p = 0; p < W; ++p) ASSERT_EQ(runtime::graphLaunch(execs[p], streams.s[p]), kDeviceSuccess);
        streams.syncAll(W);
        const auto n = counters.read();
        unsigned long long wrong = 0, nans = 0;
        for (int p = 0; p < W; ++p) {
          wrong += n[p];
          nans += n[kAllreduceMaxRanks + p];
        }
        const Status err = group.checkErrors(streams.s[0]);
        ASSERT_TRUE(err) << err.message() << " after " << done + 100 << " replays";
        ASSERT_EQ(nans, 0u) << "NaN reached an output within replays " << done << ".." << done + 99;
        ASSERT_EQ(wrong, 0u) << "wrong output words within replays " << done << ".." << done + 99;
      }
      std::printf("[allreduce] race W=%d %s: %d replays per rank, 0 NaN, 0 wrong words, %.1f us per replay\n", W,
                  algo == AllreduceAlgorithm::kOneStage ? "one-stage" : "two-stage", done,
                  1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / done);
      for (auto e : execs) (void)runtime::graphExecDestroy(e);
    }
}

// ---- Refusals and faults ----------------------------------------------------------------

/// Launches rank p's call (M rows, K columns) for the ranks in `ranks`.
std::vector<Status> launchRanks(SimulatedAllreduceGroup& group, const RankStreams& streams,
                                const std::vector<int>& ranks, const std::vector<index_t>& rows,
                                const std::vector<index_t>& cols, std::vector<Outputs>& outs, DeviceBuffer<In>& w) {
  std::vector<Status> st;
  QuantOptions opt;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int p = ranks[i];
    RmsNormQuantInput<In> in;
    in.x = static_cast<const In*>(group[p].stagingBuffer());
    in.rows = rows[i];
    in.cols = cols[i];
    in.ldx = cols[i];
    in.weight = w.get();
    st.push_back(allreduceRmsNormQuant<Format>(group[p], in, Fp8Matrix<Format>{outs[p].q.get(), rows[i], cols[i], cols[i]},
                                               rowMajorView(outs[p].s.get(), rows[i], cols[i] / 128).value(), opt,
                                               streams.s[p])
                     .status());
  }
  return st;
}

/// The error records of all ranks, as statuses.
std::vector<Status> faults(const SimulatedAllreduceGroup& group, const RankStreams& streams) {
  std::vector<Status> f;
  for (int p = 0; p < group.world(); ++p) f.push_back(group[p].checkErrors(streams.s[p]));
  return f;
}

class AllreduceFaults : public DeviceTest {};

TEST_F(AllreduceFaults, RanksWithDifferentShapesAreReportedNotWaitedOnAndResetRecovers) {
  AllreduceOptions o = testOptions();
  o.spinTimeoutNs = 500000000ull;  // 0.5 s: a mismatch is detected without waiting it out
  auto created = SimulatedAllreduceGroup::create(2, o);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  std::vector<Outputs> outs;
  for (int p = 0; p < 2; ++p) outs.emplace_back(64, 4096, 64 * 32);
  DeviceBuffer<In> w(4096);
  w.upload(std::vector<In>(4096, fromF<In>(1.0f)));
  struct Mismatch {
    const char* what;
    std::vector<index_t> rows, cols;
  };
  for (const Mismatch& mm : {Mismatch{"M 16 vs 17", {16, 17}, {2048, 2048}},
                             Mismatch{"K 2048 vs 4096", {16, 16}, {2048, 4096}},
                             Mismatch{"M 1 vs 64", {1, 64}, {2048, 2048}}}) {
    SCOPED_TRACE(mm.what);
    const auto start = std::chrono::steady_clock::now();
    const auto launched = launchRanks(group, streams, {0, 1}, mm.rows, mm.cols, outs, w);
    for (const Status& s : launched) ASSERT_TRUE(s) << s.message();
    streams.syncAll(2);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto f = faults(group, streams);
    bool namedPeer = false;
    for (int p = 0; p < 2; ++p) {
      EXPECT_FALSE(f[p].isOk()) << "rank " << p << " reported no fault";
      std::printf("[allreduce] %s: rank %d: %s\n", mm.what, p, f[p].message().c_str());
      namedPeer |= f[p].code() == StatusCode::kInvalidShape && f[p].value() == 1 - p;
    }
    EXPECT_TRUE(namedPeer) << "no rank reported the other as a shape mismatch";
    EXPECT_LT(seconds, 5.0) << "the mismatch took the spin limit or longer to surface";
    ASSERT_TRUE(group.reset());
    // After reset, a matching call works.
    const auto again = launchRanks(group, streams, {0, 1}, {16, 16}, {2048, 2048}, outs, w);
    for (const Status& s : again) ASSERT_TRUE(s) << s.message();
    streams.syncAll(2);
    for (const Status& s : faults(group, streams)) EXPECT_TRUE(s) << s.message();
  }
}

TEST_F(AllreduceFaults, ARankThatNeverCallsIsNamedAfterTheSpinLimit) {
  AllreduceOptions o = testOptions();
  o.spinTimeoutNs = 200000000ull;  // 0.2 s
  auto created = SimulatedAllreduceGroup::create(4, o);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  std::vector<Outputs> outs;
  for (int p = 0; p < 4; ++p) outs.emplace_back(17, 2048, 17 * 16);
  DeviceBuffer<In> w(2048);
  w.upload(std::vector<In>(2048, fromF<In>(1.0f)));
  const auto start = std::chrono::steady_clock::now();
  const auto launched = launchRanks(group, streams, {0, 1, 3}, {17, 17, 17}, {2048, 2048, 2048}, outs, w);
  for (const Status& s : launched) ASSERT_TRUE(s) << s.message();
  streams.syncAll(4);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto f = faults(group, streams);
  bool named = false;
  for (int p : {0, 1, 3}) {
    EXPECT_FALSE(f[p].isOk()) << "rank " << p;
    std::printf("[allreduce] rank 2 absent: rank %d: %s\n", p, f[p].message().c_str());
    named |= f[p].code() == StatusCode::kDeviceError && f[p].value() == 2 && f[p].limit() == 1;
  }
  EXPECT_TRUE(f[2].isOk()) << "rank 2 made no call";
  EXPECT_TRUE(named) << "no rank named rank 2 as missing at the start barrier";
  EXPECT_LT(seconds, 5.0);
  // Later calls on the aborted communicator fail fast until reset().
  const auto again = launchRanks(group, streams, {0, 1, 2, 3}, {17, 17, 17, 17}, {2048, 2048, 2048, 2048}, outs, w);
  for (const Status& s : again) ASSERT_TRUE(s) << s.message();
  streams.syncAll(4);
  for (const Status& s : faults(group, streams)) EXPECT_FALSE(s.isOk());
  ASSERT_TRUE(group.reset());
  const auto ok = launchRanks(group, streams, {0, 1, 2, 3}, {17, 17, 17, 17}, {2048, 2048, 2048, 2048}, outs, w);
  for (const Status& s : ok) ASSERT_TRUE(s) << s.message();
  streams.syncAll(4);
  for (const Status& s : faults(group, streams)) EXPECT_TRUE(s) << s.message();
}

TEST_F(AllreduceFaults, UnregisteredInputIsRefusedBeforeLaunchAndRegistrationFixesIt) {
  auto created = SimulatedAllreduceGroup::create(2, testOptions());
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  const index_t M = 17, K = 2048;
  std::vector<DeviceBuffer<In>> own;
  std::vector<Outputs> outs;
  for (int p = 0; p < 2; ++p) {
    own.emplace_back(static_cast<std::size_t>(M * K));
    own.back().upload(makeActivations<In>(M, K, K, 5u + p, 8.0f));
    outs.emplace_back(M, K, M * 16);
  }
  DeviceBuffer<In> w(K);
  w.upload(std::vector<In>(K, fromF<In>(1.0f)));
  auto call = [&](int p) {
    RmsNormQuantInput<In> in;
    in.x = own[p].get();
    in.rows = M;
    in.cols = K;
    in.ldx = K;
    in.weight = w.get();
    return allreduceRmsNormQuant<Format>(group[p], in, Fp8Matrix<Format>{outs[p].q.get(), M, K, K},
                                         rowMajorView(outs[p].s.get(), M, K / 128).value(), QuantOptions{},
                                         streams.s[p])
        .status();
  };
  for (int p = 0; p < 2; ++p) {
    const Status st = call(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidValue) << st.message();
    EXPECT_STREQ(st.argument(), "x");
  }
  ASSERT_TRUE(group.registerBuffers({own[0].get(), own[1].get()}, static_cast<std::size_t>(M * K) * sizeof(In)));
  for (int p = 0; p < 2; ++p) ASSERT_TRUE(call(p));
  streams.syncAll(2);
  for (const Status& s : faults(group, streams)) EXPECT_TRUE(s) << s.message();
  // A range that runs past the registered buffer is refused too.
  RmsNormQuantInput<In> in;
  in.x = own[0].get() + 8;
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.weight = w.get();
  const Status past = allreduceRmsNormQuant<Format>(group[0], in, Fp8Matrix<Format>{outs[0].q.get(), M, K, K},
                                                    rowMajorView(outs[0].s.get(), M, K / 128).value(), QuantOptions{},
                                                    streams.s[0])
                          .status();
  EXPECT_EQ(past.code(), StatusCode::kInvalidValue) << past.message();
}

TEST_F(AllreduceFaults, WorldSizesTheCustomPathDoesNotTakeAreRefusedAndTheGatheredStepTakesThem) {
  for (int W : {0, 3, 5, 6, 7, 16}) {
    auto g = SimulatedAllreduceGroup::create(W, testOptions());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidValue) << "W=" << W;
    EXPECT_STREQ(g.status().argument(), "world");
  }
  // The fallback's local step: W = 3 and 16, bit for bit against rmsNormQuant
  // on the host-summed input (no NaN in these inputs, so the host sum's bits
  // are the device's).
  const index_t M = 17, K = 2048, G = K / 128;
  for (int W : {3, 16}) {
    SCOPED_TRACE(::testing::Message() << "W=" << W);
    std::mt19937 rng(static_cast<unsigned>(W));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<In>> parts(W, std::vector<In>(static_cast<std::size_t>(M * K)));
    std::vector<In> all;
    std::vector<const In*> ptrs;
    for (auto& part : parts) {
      for (auto& v : part) v = fromF<In>(nd(rng));
      all.insert(all.end(), part.begin(), part.end());
      ptrs.push_back(part.data());
    }
    std::vector<In> sum(static_cast<std::size_t>(M * K)), w(static_cast<std::size_t>(K), fromF<In>(1.0f));
    ASSERT_TRUE(reference::allreduceSum(ptrs, M, K, K, sum.data(), K));
    DeviceBuffer<In> dall(all.size()), dsum(sum.size()), dw(w.size());
    dall.upload(all);
    dsum.upload(sum);
    dw.upload(w);
    Outputs a(M, K, M * G), b(M, K, M * G);
    a.q.poison(kGarbage);
    b.q.poison(kGarbage);
    a.s.poison(kGarbage);
    b.s.poison(kGarbage);
    RmsNormQuantInput<In> in;
    in.rows = M;
    in.cols = K;
    in.ldx = K;
    in.weight = dw.get();
    in.x = dall.get();
    auto ga = gatheredRmsNormQuant<Format>(in, W, M * K, static_cast<In*>(nullptr), Fp8Matrix<Format>{a.q.get(), M, K, a.ldq},
                                           rowMajorView(a.s.get(), M, G).value(), QuantOptions{}, nullptr);
    in.x = dsum.get();
    auto rb = rmsNormQuant<Format>(in, Fp8Matrix<Format>{b.q.get(), M, K, b.ldq}, rowMajorView(b.s.get(), M, G).value(),
                                   QuantOptions{}, nullptr);
    ASSERT_TRUE(ga.isOk()) << ga.status().message();
    ASSERT_TRUE(rb.isOk()) << rb.status().message();
    ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
    EXPECT_TRUE(a.q.download() == b.q.download());
    EXPECT_EQ(countBitDiffs(a.s.download(), b.s.download()), 0u);
  }
}

TEST_F(AllreduceFaults, MessagesLargerThanTheBuffersAreRefusedBeforeLaunch) {
  auto created = SimulatedAllreduceGroup::create(2, testOptions(std::size_t{1} << 20));  // 1 MiB
  ASSERT_TRUE(created.isOk()) << created.status().message();
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  const index_t M = 128, K = 7168;  // 1.75 MiB of bf16
  std::vector<Outputs> outs;
  outs.emplace_back(M, K, M * 56);
  DeviceBuffer<In> w(K);
  RmsNormQuantInput<In> in;
  in.x = static_cast<const In*>(group[0].stagingBuffer());
  in.rows = M;
  in.cols = K;
  in.ldx = K;
  in.weight = w.get();
  for (AllreduceAlgorithm algo : {AllreduceAlgorithm::kOneStage, AllreduceAlgorithm::kTwoStage}) {
    const Status st = allreduceRmsNormQuant<Format>(group[0], in, Fp8Matrix<Format>{outs[0].q.get(), M, K, K},
                                                    rowMajorView(outs[0].s.get(), M, 56).value(), QuantOptions{},
                                                    streams.s[0], algo)
                          .status();
    EXPECT_FALSE(st.isOk()) << int(algo);
    std::printf("[allreduce] 1.75 MiB message on 1 MiB buffers (%s): %s\n",
                algo == AllreduceAlgorithm::kOneStage ? "one-stage" : "two-stage", st.message().c_str());
  }
  // Two-stage needs K to split into W chunks of whole vectors.
  auto created8 = SimulatedAllreduceGroup::create(8, testOptions());
  ASSERT_TRUE(created8.isOk());
  SimulatedAllreduceGroup g8 = std::move(created8.value());
  in.x = static_cast<const In*>(g8[0].stagingBuffer());
  in.rows = 4;
  in.cols = 96;  // groups of 32: 12 vectors, not a multiple of 8 ranks
  DeviceBuffer<std::uint8_t> q(4 * 96);
  DeviceBuffer<float> s(4 * 3);
  QuantOptions g32;
  g32.groupSize = 32;
  const Status split = allreduceRmsNormQuant<Format>(g8[0], in, Fp8Matrix<Format>{q.get(), 4, 96, 96},
                                                     rowMajorView(s.get(), 4, 3).value(), g32, streams.s[0],
                                                     AllreduceAlgorithm::kTwoStage)
                           .status();
  EXPECT_EQ(split.code(), StatusCode::kInvalidShape) << split.message();
  EXPECT_STREQ(split.argument(), "K");
  EXPECT_EQ(chooseAllreduceAlgorithm(AllreduceAlgorithm::kAuto, 8, 4096, 96, 2, 512 << 10),
            AllreduceAlgorithm::kOneStage);
  for (const Status& f : faults(g8, streams)) EXPECT_TRUE(f) << f.message();
}

TEST_F(AllreduceFaults, ZeroRowsLaunchNothingAndClearColumnMajorPadding) {
  auto created = SimulatedAllreduceGroup::create(2, testOptions());
  ASSERT_TRUE(created.isOk());
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  DeviceBuffer<float> s(16 * 4);
  s.poison(kGarbage);
  DeviceBuffer<In> w(2048);
  RmsNormQuantInput<In> in;
  in.x = static_cast<const In*>(group[0].stagingBuffer());
  in.rows = 0;
  in.cols = 2048;
  in.ldx = 2048;
  in.weight = w.get();
  const Status st = allreduceRmsNormQuant<Format>(group[0], in, Fp8Matrix<Format>{nullptr, 0, 2048, 2048},
                                                  colMajorView(s.get(), 0, 16, 4).value(), QuantOptions{}, streams.s[0])
                        .status();
  ASSERT_TRUE(st) << st.message();
  ASSERT_EQ(runtime::streamSynchronize(streams.s[0]), kDeviceSuccess);
  for (float v : s.download()) EXPECT_EQ(v, 0.0f);
  for (const Status& f : faults(group, streams)) EXPECT_TRUE(f) << f.message();
}

// ---- The NCCL fallback proper, world size 1 -------------------------------------------

#if defined(FP8SCALE_WITH_NCCL)
TEST_F(AllreduceDevice, NcclFallbackWorldOneEqualsTheCustomPath) {
  ncclComm_t comm = nullptr;
  int dev = 0;
  const ncclResult_t r = ncclCommInitAll(&comm, 1, &dev);
  ASSERT_EQ(r, ncclSuccess) << ncclGetErrorString(r);
  const index_t K = 7168, G = K / 128;
  auto fb = NcclRmsNormQuantFallback::create(comm, static_cast<std::size_t>(kMaxRows * K) * sizeof(In));
  ASSERT_TRUE(fb.isOk()) << fb.status().message();
  auto created = SimulatedAllreduceGroup::create(1, testOptions());
  ASSERT_TRUE(created.isOk());
  SimulatedAllreduceGroup group = std::move(created.value());
  RankStreams streams;
  const HostData& d = makeHostData(K);
  for (index_t M : {1, 17, 1000}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M);
    const std::size_t bytes = static_cast<std::size_t>(M * K) * sizeof(In);
    DeviceBuffer<In> x(static_cast<std::size_t>(M * K)), r0(static_cast<std::size_t>(M * K)), w(K);
    ASSERT_EQ(runtime::memcpy(x.get(), d.partials[0].data(), bytes, runtime::Copy::HostToDevice), kDeviceSuccess);
    ASSERT_EQ(runtime::memcpy(group[0].stagingBuffer(), d.partials[0].data(), bytes, runtime::Copy::HostToDevice), kDeviceSuccess);
    ASSERT_EQ(runtime::memcpy(r0.get(), d.residual.data(), bytes, runtime::Copy::HostToDevice), kDeviceSuccess);
    w.upload(d.weight);
    CaseSetup c;
    c.M = M;
    c.K = K;
    c.G = G;
    c.W = 1;
    c.ld = contractLd(M);
    c.withResidual = true;
    c.withNormOut = true;
    c.residual0 = &r0;
    c.weight = &w;
    for (bool col : {false, true}) {
      Outputs viaNccl(M, K, G * c.ld), viaCustom(M, K, G * c.ld);
      prepareOutputs(c, viaNccl);
      prepareOutputs(c, viaCustom);
      auto a = col ? fb.value().run<Format>(inputOf(c, x.get(), viaNccl), Fp8Matrix<Format>{viaNccl.q.get(), M, K, viaNccl.ldq},
                                            viewOf<ColMajor>(c, viaNccl), QuantOptions{}, streams.s[0]).status()
                   : fb.value().run<Format>(inputOf(c, x.get(), viaNccl), Fp8Matrix<Format>{viaNccl.q.get(), M, K, viaNccl.ldq},
                                            viewOf<RowMajor>(c, viaNccl), QuantOptions{}, streams.s[0]).status();
      ASSERT_TRUE(a) << a.message();
      const In* xs = static_cast<const In*>(group[0].stagingBuffer());
      auto b = col ? allreduceRmsNormQuant<Format>(group[0], inputOf(c, xs, viaCustom),
                                                   Fp8Matrix<Format>{viaCustom.q.get(), M, K, viaCustom.ldq},
                                                   viewOf<ColMajor>(c, viaCustom), QuantOptions{}, streams.s[0]).status()
                   : allreduceRmsNormQuant<Format>(group[0], inputOf(c, xs, viaCustom),
                                                   Fp8Matrix<Format>{viaCustom.q.get(), M, K, viaCustom.ldq},
                                                   viewOf<RowMajor>(c, viaCustom), QuantOptions{}, streams.s[0]).status();
      ASSERT_TRUE(b) << b.message();
      ASSERT_EQ(runtime::streamSynchronize(streams.s[0]), kDeviceSuccess);
      EXPECT_TRUE(viaNccl.q.download() == viaCustom.q.download());
      EXPECT_EQ(countBitDiffs(viaNccl.s.download(), viaCustom.s.download()), 0u);
      EXPECT_EQ(countInputDiffs(viaNccl.r.download(), viaCustom.r.download()), 0u);
      EXPECT_EQ(countInputDiffs(viaNccl.y.download(), viaCustom.y.download()), 0u);
    }
  }
  EXPECT_TRUE(group.checkErrors(streams.s[0]));
  fb.value() = NcclRmsNormQuantFallback{};
  ncclCommDestroy(comm);
  std::printf("[allreduce] NCCL fallback (ncclAllGather, world 1) == custom path: checked\n");
}
#else
TEST_F(AllreduceDevice, NcclFallbackWorldOneEqualsTheCustomPath) {
#if defined(FP8SCALE_PLATFORM_HIP)
  GTEST_SKIP() << "built without RCCL (FP8SCALE_RCCL=OFF or not found)";
#else
  GTEST_SKIP() << "built without NCCL (FP8SCALE_NCCL=OFF or not found)";
#endif
}
#endif

}  // namespace
}  // namespace fp8scale::test

int main(int argc, char** argv) {
  // Before the runtime starts: enough hardware queues for 8 rank streams
  // (streams sharing a queue would serialize spin-waiting kernels), and on
  // CUDA every kernel loaded up front (lazy loading may synchronize while a
  // rank spins).
#if defined(FP8SCALE_PLATFORM_HIP)
  setenv("GPU_MAX_HW_QUEUES", "8", 0);
#else
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
