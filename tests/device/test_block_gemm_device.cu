// A real block-scaled fp8 GEMM (cuBLASLt on Hopper) consuming the producers'
// zero-copy column-major scale view. For each producer and shape:
//   (a) the GEMM fed by TRANSPOSE_SCALE = true + its view is bit-identical to
//       the GEMM fed by row-major emission + materialize;
//   (b) both match an fp64 host GEMM of the dequantized operands within the
//       tolerance stated at kTol* below;
//   (c) a row-major scale buffer handed over as if it were column-major is
//       caught by the same comparison (the test can fail).
// Plus: the device weight quantizer equals its host reference bit for bit; a
// layout-hypothesis probe that says which scale layouts cuBLASLt actually
// read; fp32 output; argument refusals.
//
// Lines starting with "[gemm]" are the per-case summary the H200 script greps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_test_util.cuh"
#include "fp8scale/consumers/cublaslt_block_gemm.hpp"
#include "fp8scale/consumers/weight_block_quant.hpp"
#include "fp8scale/fp8scale.hpp"
#include "fp8scale/reference/block_scaled_gemm.hpp"

namespace fp8scale::test {
namespace {

// ---------------------------------------------------------------------------
// Tolerance of the comparison with the fp64 reference (bf16 output):
//
//   |Y - Yref| <= kTolRel * |Yref| + kTolAcc * A,   A = sum_g |xs ws| sum_k |xq wq|
//
// kTolRel = 2^-8: rounding the fp32 result to bf16 (8 significant bits, round
//   to nearest) moves it by at most 2^-8 of its magnitude.
// kTolAcc = 2^-11: Hopper's fp8 tensor cores accumulate a 128-deep block with
//   about 14 significant bits before cuBLAS applies the block's two fp32
//   scales and adds it to an fp32 accumulator (DeepSeek-V3 technical report,
//   3.3.2, on H800 fp8 accumulation; per-block promotion is forced here by the
//   per-block scales). 2^-11 allows 8 such units per block relative to the
//   block's sum of |products|; the fp32 scaling and the K / 128 fp32 adds
//   contribute < 2^-20 of A. The measured maximum of |Y - Yref| / A is printed
//   so that the bound can be tightened from data.
// A scale read from the wrong slot is off by the ratio of two different
// scales: by construction of the inputs (per-row and per-group magnitudes that
// differ by 2x to 256x) that is an O(1) relative error, far beyond the bound.
constexpr double kTolRel = 1.0 / 256.0;
constexpr double kTolAcc = 1.0 / 2048.0;

constexpr unsigned char kPoison = 0xAB;

// ---------------------------------------------------------------------------
// Inputs: deterministic, cheap (51 M weights), and with scales that differ.
// ---------------------------------------------------------------------------

/// A fast deterministic approximately-normal value for (seed, i): the sum of
/// four uniforms from a 64-bit mix, centred and scaled to unit variance.
inline float pseudoNormal(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  float sum = 0.0f;
  for (int r = 0; r < 4; ++r) {
    z ^= z >> 31;
    z *= 0xD6E8FEB86659FD93ull;
    z ^= z >> 29;
    sum += static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  }
  return (sum - 2.0f) * 1.7320508f;
}

/// Activations [M, cols]: N(0, 1) times a per-row factor 2^((5 m) % 9 - 4), with
/// three outlier channels per row (x40, positions moving with m), and group 0
/// of row 0 all zero (the eps floor).
std::vector<BFloat16> makeActivations(index_t M, index_t cols, unsigned seed) {
  std::vector<BFloat16> x(static_cast<std::size_t>(M * cols));
  for (index_t m = 0; m < M; ++m) {
    const float rowFactor = std::ldexp(1.0f, static_cast<int>((5 * m) % 9) - 4);
    const index_t o1 = (7 + 131 * m) % cols, o2 = (cols / 3 + 17 * m) % cols, o3 = (cols - 5 + 253 * m) % cols;
    for (index_t k = 0; k < cols; ++k) {
      float v = pseudoNormal(seed, static_cast<std::uint64_t>(m * cols + k)) * rowFactor;
      if (k == o1 || k == o2 || k == o3) v *= 40.0f;
      if (m == 0 && k < 128) v = 0.0f;
      x[m * cols + k] = toBFloat16(v);
    }
  }
  return x;
}

/// Weights [N, K]: 0.05 N(0, 1) times a per-block factor 2^((3 nb + 5 kb) % 7 - 3),
/// so that neighbouring 128 x 128 blocks have different scales.
template <class In>
std::vector<In> makeWeights(index_t N, index_t K, unsigned seed) {
  std::vector<In> w(static_cast<std::size_t>(N * K));
  for (index_t n = 0; n < N; ++n)
    for (index_t k = 0; k < K; ++k) {
      const int e = static_cast<int>((3 * (n / 128) + 5 * (k / 128)) % 7) - 3;
      w[n * K + k] = fromFloat<In>(0.05f * std::ldexp(pseudoNormal(seed, static_cast<std::uint64_t>(n * K + k)), e));
    }
  return w;
}

// ---------------------------------------------------------------------------
// The fp64 reference, threaded over output columns (the result does not
// depend on the split: see reference/block_scaled_gemm.hpp).
// ---------------------------------------------------------------------------

struct Reference {
  std::vector<double> y, mag;  // [M, N]
};

template <class XT, class XLayout, class WT, class WLayout>
Reference referenceGemm(const std::vector<float>& xv, const ScaleView<XT, XLayout>& xs, const std::vector<float>& wv,
                        const ScaleView<WT, WLayout>& ws, index_t M, index_t N, index_t K) {
  Reference r;
  r.y.assign(static_cast<std::size_t>(M * N), 0.0);
  r.mag.assign(static_cast<std::size_t>(M * N), 0.0);
  const index_t chunks = std::max<index_t>(1, std::min<index_t>(std::thread::hardware_concurrency(), N / 16));
  const index_t per = (N + chunks - 1) / chunks;
  std::vector<std::thread> pool;
  for (index_t c = 0; c < chunks; ++c) {
    const index_t n0 = c * per, n1 = std::min(N, n0 + per);
    if (n0 >= n1) break;
    pool.emplace_back([&, n0, n1] {
      reference::blockScaledGemmColumns(xv.data(), xs, wv.data(), ws, M, K, n0, n1, r.y.data(), N, r.mag.data());
    });
  }
  for (auto& t : pool) t.join();
  return r;
}

/// How a device result compares with the reference over the first M rows.
struct Comparison {
  std::size_t overBound = 0;
  double maxRatio = 0.0;    ///< max |Y - Yref| / bound
  double maxRel = 0.0;      ///< max |Y - Yref| / |Yref| where |Yref| >= A / 64 (no heavy cancellation)
  double maxErrOverA = 0.0; ///< max |Y - Yref| / A: the accumulation error actually seen
  index_t worstM = 0, worstN = 0;
  double worstGot = 0.0, worstRef = 0.0;
};

template <class OutT>
Comparison compare(const std::vector<OutT>& y, const Reference& ref, index_t M, index_t N, double tolRel,
                   double tolAcc) {
  Comparison c;
  for (index_t m = 0; m < M; ++m)
    for (index_t n = 0; n < N; ++n) {
      const double got = static_cast<double>(toFloat(y[m * N + n]));
      const double want = ref.y[m * N + n], a = ref.mag[m * N + n];
      const double err = std::fabs(got - want);
      const double bound = tolRel * std::fabs(want) + tolAcc * a;
      const double ratio = std::isfinite(got) ? (bound > 0.0 ? err / bound : (err > 0.0 ? INFINITY : 0.0)) : INFINITY;
      if (!(ratio <= 1.0)) ++c.overBound;
      if (!(ratio <= c.maxRatio)) {
        c.maxRatio = ratio;
        c.worstM = m;
        c.worstN = n;
        c.worstGot = got;
        c.worstRef = want;
      }
      if (a > 0.0) c.maxErrOverA = std::max(c.maxErrOverA, std::isfinite(got) ? err / a : INFINITY);
      if (std::fabs(want) >= a / 64.0 && want != 0.0)
        c.maxRel = std::max(c.maxRel, std::isfinite(got) ? err / std::fabs(want) : INFINITY);
    }
  return c;
}

std::string describe(const Comparison& c) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%zu over bound, max err/bound %.3g, max rel %.3g, max err/A %.3g (worst (%lld, %lld): %.6g vs %.6g)",
                c.overBound, c.maxRatio, c.maxRel, c.maxErrOverA, static_cast<long long>(c.worstM),
                static_cast<long long>(c.worstN), c.worstGot, c.worstRef);
  return buf;
}

// ---------------------------------------------------------------------------
// Fixture: one cuBLASLt wrapper and the block-quantized weights, shared by all
// tests of the suite (quantized once per (N, K) on the device).
// ---------------------------------------------------------------------------

struct Weight {
  index_t N = 0, K = 0;
  std::unique_ptr<DeviceBuffer<std::uint8_t>> q;
  std::unique_ptr<DeviceBuffer<float>> s;
  BlockQuantizedWeight<E4M3FN> view;  // device
  std::vector<float> values;          // decoded fp8, [N, K]
  std::vector<float> scales;          // host copy of the scale buffer, padding included
};

/// The host copy of a weight's scales, as the RowMajor{align(K / 128, 4)} view it is.
ScaleView<const float, RowMajor> hostWeightScales(const Weight& w) {
  return ScaleView<const float, RowMajor>::fromValidated(w.scales.data(), weightScaleRows(w.N), weightScaleCols(w.K),
                                                         RowMajor{weightScaleLd(w.K)});
}

class BlockGemmDevice : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    if (!hasDevice()) return;
    auto g = CublasLtBlockGemm::create();
    if (!g) {
      std::printf("[gemm] CublasLtBlockGemm::create: %s\n", g.status().message().c_str());
      return;
    }
    gemm_ = new CublasLtBlockGemm(std::move(g.value()));
    DeviceInfo info;
    queryDevice(0, info);
    std::printf("[gemm] cuBLASLt %zu (header %d), compute capability %d.%d, %d SMs\n",
                CublasLtBlockGemm::libraryVersion(), CUBLAS_VERSION, info.ccMajor, info.ccMinor,
                info.multiProcessorCount);
  }
  static void TearDownTestSuite() {
    delete gemm_;
    gemm_ = nullptr;
    weights_.clear();
  }
  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NE(gemm_, nullptr) << "CublasLtBlockGemm::create failed (see the [gemm] line above)";
  }

  /// The device-quantized weight of shape (N, K), made on first use.
  static const Weight& weight(index_t N, index_t K) {
    auto& slot = weights_[{N, K}];
    if (slot) return *slot;
    slot = std::make_unique<Weight>();
    Weight& w = *slot;
    w.N = N;
    w.K = K;
    const auto host = makeWeights<BFloat16>(N, K, static_cast<unsigned>(N * 7 + K));
    DeviceBuffer<BFloat16> dw(host.size());
    dw.upload(host);
    w.q = std::make_unique<DeviceBuffer<std::uint8_t>>(N * K);
    w.s = std::make_unique<DeviceBuffer<float>>(weightScaleElems(N, K));
    w.s->poison(kPoison);
    auto r = weightBlockQuant<E4M3FN>(WeightQuantInput<BFloat16>{dw.get(), N, K, K},
                                      Fp8Matrix<E4M3FN>{w.q->get(), N, K, K},
                                      weightScaleView(w.s->get(), N, K).value(), WeightQuantOptions{}, nullptr);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    w.view = r.value();
    EXPECT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
    const std::vector<std::uint8_t> q = w.q->download();
    w.values = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(q.data()), N, K, K});
    w.scales = w.s->download();
    return w;
  }

  static CublasLtBlockGemm* gemm_;
  static std::map<std::pair<index_t, index_t>, std::unique_ptr<Weight>> weights_;
};
CublasLtBlockGemm* BlockGemmDevice::gemm_ = nullptr;
std::map<std::pair<index_t, index_t>, std::unique_ptr<Weight>> BlockGemmDevice::weights_;

const std::vector<index_t> kRowsList = {1, 2, 3, 4, 16, 17, 128, 1000};
const std::vector<std::pair<index_t, index_t>> kNKList = {{2048, 2048}, {2048, 7168}, {7168, 2048}, {7168, 7168}};

// ---------------------------------------------------------------------------
// One (producer, M, N, K) case: (a), (b), (c).
// `launch(q, scaleView)` runs the producer into q [M, K] with the view's layout.
// ---------------------------------------------------------------------------

template <class Launch>
void runGemmCase(CublasLtBlockGemm& gemm, const Weight& w, const char* producer, index_t M, const Launch& launch,
                 bool printElements) {
  const index_t N = w.N, K = w.K, G = K / 128, Mpad = alignUp(M, 4);
  SCOPED_TRACE(::testing::Message() << producer << " M=" << M << " N=" << N << " K=" << K);

  // The caller's one-time duty: fp8 buffers of Mpad rows with rows [M, Mpad) zero.
  DeviceBuffer<std::uint8_t> qCol(Mpad * K), qRow(Mpad * K);
  FP8SCALE_DEVICE_CHECK(runtime::memset(qCol.get(), 0, Mpad * K));
  FP8SCALE_DEVICE_CHECK(runtime::memset(qRow.get(), 0, Mpad * K));
  DeviceBuffer<float> sCol(G * Mpad), sRow(M * G), sMat(G * Mpad), sBad(G * Mpad);
  sCol.poison(kPoison);  // padding slots must be written by the producer / materialize
  sMat.poison(kPoison);
  FP8SCALE_DEVICE_CHECK(runtime::memset(sBad.get(), 0, G * Mpad * sizeof(float)));
  DeviceBuffer<BFloat16> yCol(Mpad * N), yMat(Mpad * N), yBad(Mpad * N), yAgain(Mpad * N);
  yCol.poison(0xFF);  // bf16 0xFFFF is NaN: an unwritten output cannot pass
  yMat.poison(0xFF);
  yBad.poison(0xFF);
  yAgain.poison(0xFF);

  // TRANSPOSE_SCALE = true: the producer writes [G][Mpad] itself; its view goes straight in.
  auto col = launch(Fp8Matrix<E4M3FN>{qCol.get(), M, K, K}, colMajorView(sCol.get(), M, G, Mpad).value());
  ASSERT_TRUE(col.isOk()) << col.status().message();
  const QuantizedTensor<E4M3FN, ColMajor> xView = col.value();
  ASSERT_EQ(xView.scale.data(), sCol.get()) << "the view must be the producer's own buffer";

  // TRANSPOSE_SCALE = false + materialize (a relayout kernel) to the same layout.
  auto row = launch(Fp8Matrix<E4M3FN>{qRow.get(), M, K, K}, rowMajorView(sRow.get(), M, G).value());
  ASSERT_TRUE(row.isOk()) << row.status().message();
  auto mat = materialize(row.value().scale, sMat.get(), Mpad, nullptr);
  ASSERT_TRUE(mat.isOk()) << mat.status().message();
  const QuantizedTensor<E4M3FN, ColMajor> xMat{row.value().data, mat.value(), row.value().groupSize};

  // The negative control: row-major scale bytes declared column-major. The
  // type system refuses asColumnMajor(RowMajor); fromValidated() is the
  // deliberate bypass a buggy caller would need.
  FP8SCALE_DEVICE_CHECK(runtime::memcpy(sBad.get(), sRow.get(), M * G * sizeof(float), runtime::Copy::DeviceToDevice));
  const QuantizedTensor<E4M3FN, ColMajor> xBad{
      row.value().data, ScaleView<float, ColMajor>::fromValidated(sBad.get(), M, G, ColMajor{Mpad}), 128};

  Status s = gemm.run(xView, w.view, yCol.get(), N, nullptr);
  ASSERT_TRUE(s.isOk()) << s.message();
  const CublasLtBlockGemm::PlanInfo plan = gemm.lastPlan();
  s = gemm.run(xMat, w.view, yMat.get(), N, nullptr);
  ASSERT_TRUE(s.isOk()) << s.message();
  s = gemm.run(xBad, w.view, yBad.get(), N, nullptr);
  ASSERT_TRUE(s.isOk()) << s.message();
  s = gemm.run(xView, w.view, yAgain.get(), N, nullptr);  // cuBLASLt's own run-to-run determinism
  ASSERT_TRUE(s.isOk()) << s.message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());

  // (a) bit-identical outputs, padded rows exactly zero.
  const std::vector<BFloat16> y1 = yCol.download(), y2 = yMat.download(), y3 = yBad.download(),
                              y4 = yAgain.download();
  const std::vector<std::uint8_t> q1 = qCol.download(), q2 = qRow.download();
  std::size_t qDiffs = 0, yDiffs = 0, repeatDiffs = 0, padNonZero = 0;
  for (std::size_t i = 0; i < q1.size(); ++i) qDiffs += q1[i] != q2[i];
  for (std::size_t i = 0; i < y1.size(); ++i) yDiffs += y1[i].bits != y2[i].bits;
  for (std::size_t i = 0; i < y1.size(); ++i) repeatDiffs += y1[i].bits != y4[i].bits;
  EXPECT_EQ(repeatDiffs, 0u) << "cuBLASLt gave different bits for the same call: (a) below is then not a layout test";
  for (index_t i = M * N; i < Mpad * N; ++i) padNonZero += toFloat(y1[i]) != 0.0f;
  EXPECT_EQ(qDiffs, 0u) << "fp8 data differs between TRANSPOSE_SCALE true and false";
  EXPECT_EQ(yDiffs, 0u) << "GEMM(view) differs from GEMM(row-major + materialize)";
  EXPECT_EQ(padNonZero, 0u) << "output rows [M, Mpad) are not zero";

  // (b) against the fp64 GEMM of the operands cuBLASLt was given.
  const std::vector<float> xs = sCol.download();
  const std::vector<float> xv = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(q1.data()), M, K, K});
  const auto xsView = ScaleView<const float, ColMajor>::fromValidated(xs.data(), M, G, ColMajor{Mpad});
  const Reference ref = referenceGemm(xv, xsView, w.values, hostWeightScales(w), M, N, K);
  const Comparison good = compare(y1, ref, M, N, kTolRel, kTolAcc);
  EXPECT_EQ(good.overBound, 0u) << "GEMM(view) vs fp64 reference: " << describe(good);

  // (c) the row-major bytes read as column-major must be caught (M >= 2, G >= 2).
  Comparison bad;
  if (M >= 2 && G >= 2) {
    bad = compare(y3, ref, M, N, kTolRel, kTolAcc);
    EXPECT_GT(bad.overBound, 0u) << "a row-major scale buffer read as column-major went unnoticed";
  }
  std::printf("[gemm] %-14s M=%4lld N=%lld K=%lld | algo %d (%d candidates) | view==materialize: %zu diffs, fp8 %zu "
              "diffs, pad rows nonzero %zu, rerun diffs %zu | vs fp64: %s | row-major-as-col: %s\n",
              producer, static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), plan.algoId,
              plan.candidates, yDiffs, qDiffs, padNonZero, repeatDiffs, describe(good).c_str(),
              M >= 2 ? describe(bad).c_str() : "n/a (M = 1)");

  // The same, machine-readable (one line a case, for summaries): producer M N K yDiffs
  // qDiffs padNonZero over maxErr/bound maxRel maxErr/A badOver badMaxErr/bound algo rerunDiffs
  std::printf("[gemm-case] %s %lld %lld %lld %zu %zu %zu %zu %.4g %.4g %.4g %zu %.4g %d %zu\n", producer,
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), yDiffs, qDiffs,
              padNonZero, good.overBound, good.maxRatio, good.maxRel, good.maxErrOverA, M >= 2 ? bad.overBound : 0,
              M >= 2 ? bad.maxRatio : 0.0, plan.algoId, repeatDiffs);

  if (printElements) {
    std::printf("[gemm] first elements, %s M=%lld N=%lld K=%lld (row m: Y[m][0..7])\n", producer,
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K));
    for (index_t m = 0; m < std::min<index_t>(M, 3); ++m) {
      std::printf("[gemm]   m=%lld view       :", static_cast<long long>(m));
      for (index_t n = 0; n < 8; ++n) std::printf(" %11.5g", toFloat(y1[m * N + n]));
      std::printf("\n[gemm]   m=%lld materialize:", static_cast<long long>(m));
      for (index_t n = 0; n < 8; ++n) std::printf(" %11.5g", toFloat(y2[m * N + n]));
      std::printf("\n[gemm]   m=%lld fp64 ref   :", static_cast<long long>(m));
      for (index_t n = 0; n < 8; ++n) std::printf(" %11.5g", ref.y[m * N + n]);
      std::printf("\n[gemm]   m=%lld row-as-col :", static_cast<long long>(m));
      for (index_t n = 0; n < 8; ++n) std::printf(" %11.5g", toFloat(y3[m * N + n]));
      std::printf("\n");
    }
  }
}

// ---------------------------------------------------------------------------
// (a), (b), (c) for each producer over M x (N, K).
// ---------------------------------------------------------------------------

TEST_F(BlockGemmDevice, GroupQuantViewFeedsTheGemmLikeMaterialize) {
  for (const auto& nk : kNKList) {
    const Weight& w = weight(nk.first, nk.second);
    const index_t K = nk.second;
    for (index_t M : kRowsList) {
      const auto x = makeActivations(M, K, static_cast<unsigned>(M * 13 + K));
      DeviceBuffer<BFloat16> dx(x.size());
      dx.upload(x);
      QuantOptions opt;
      const auto in = GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K);
      const bool print = M == 3 && nk == kNKList.front();
      runGemmCase(*gemm_, w, "group_quant", M,
                  [&](Fp8Matrix<E4M3FN> q, auto scale) { return groupQuant<E4M3FN>(in, q, scale, opt, nullptr); },
                  print);
    }
  }
}

TEST_F(BlockGemmDevice, SiluClampQuantViewFeedsTheGemmLikeMaterialize) {
  for (const auto& nk : kNKList) {
    const Weight& w = weight(nk.first, nk.second);
    const index_t I = nk.second;  // the GEMM's K is the intermediate size; the input is [M, 2 I]
    for (index_t M : kRowsList) {
      const auto x = makeActivations(M, 2 * I, static_cast<unsigned>(M * 17 + I));
      DeviceBuffer<BFloat16> dx(x.size());
      dx.upload(x);
      QuantOptions opt;
      const SiluClampInput<BFloat16> in{dx.get(), M, I, 2 * I, 7.0f};
      runGemmCase(*gemm_, w, "silu_clamp", M,
                  [&](Fp8Matrix<E4M3FN> q, auto scale) { return siluClampQuant<E4M3FN>(in, q, scale, opt, nullptr); },
                  false);
    }
  }
}

TEST_F(BlockGemmDevice, RmsNormQuantViewFeedsTheGemmLikeMaterialize) {
  for (const auto& nk : kNKList) {
    const Weight& w = weight(nk.first, nk.second);
    const index_t K = nk.second;
    // Norm weights that differ by 16x between groups, so that the normalized
    // rows still have group scales worth scrambling.
    std::vector<BFloat16> normWeight(K);
    for (index_t k = 0; k < K; ++k)
      normWeight[k] = toBFloat16(std::ldexp(1.0f + 0.01f * static_cast<float>(k % 7), static_cast<int>((k / 128) % 5) - 2));
    DeviceBuffer<BFloat16> dnw(K);
    dnw.upload(normWeight);
    for (index_t M : kRowsList) {
      const auto x = makeActivations(M, K, static_cast<unsigned>(M * 19 + K));
      DeviceBuffer<BFloat16> dx(x.size());
      dx.upload(x);
      QuantOptions opt;
      // No residual: both producer runs must see the same input.
      const auto in = RmsNormQuantInput<BFloat16>::matrix(dx.get(), M, K, K, dnw.get());
      runGemmCase(*gemm_, w, "rmsnorm", M,
                  [&](Fp8Matrix<E4M3FN> q, auto scale) { return rmsNormQuant<E4M3FN>(in, q, scale, opt, nullptr); },
                  false);
    }
  }
}

// ---------------------------------------------------------------------------
// Which layouts does cuBLASLt really read? One GPU result against references
// computed under the documented layouts and under the plausible mistakes. The
// shape makes every hypothesis distinct: M = 6 (Mpad = 8 != M), K = 640
// (K / 128 = 5, padded to 8), N = 384 (three N blocks).
// ---------------------------------------------------------------------------

TEST_F(BlockGemmDevice, LayoutProbeOnlyTheDocumentedLayoutsMatch) {
  const index_t M = 6, N = 384, K = 640, G = K / 128, Mpad = alignUp(M, 4);
  const index_t nBlocks = weightScaleRows(N), L = weightScaleCols(K), L4 = weightScaleLd(K);
  const Weight& w = weight(N, K);
  const auto x = makeActivations(M, K, 99);
  DeviceBuffer<BFloat16> dx(x.size());
  dx.upload(x);
  DeviceBuffer<std::uint8_t> q(Mpad * K);
  FP8SCALE_DEVICE_CHECK(runtime::memset(q.get(), 0, Mpad * K));
  DeviceBuffer<float> s(G * Mpad);
  s.poison(kPoison);
  DeviceBuffer<BFloat16> y(Mpad * N);
  y.poison(0xFF);
  QuantOptions opt;
  auto xq = groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), Fp8Matrix<E4M3FN>{q.get(), M, K, K},
                               colMajorView(s.get(), M, G, Mpad).value(), opt, nullptr);
  ASSERT_TRUE(xq.isOk()) << xq.status().message();
  const Status st = gemm_->run(xq.value(), w.view, y.get(), N, nullptr);
  ASSERT_TRUE(st.isOk()) << st.message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  const std::vector<BFloat16> got = y.download();
  const std::vector<std::uint8_t> qh = q.download();
  const std::vector<float> xs = s.download();
  const std::vector<float> xv = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(qh.data()), M, K, K});
  const float* ws = w.scales.data();

  const auto xDoc = ScaleView<const float, ColMajor>::fromValidated(xs.data(), M, G, ColMajor{Mpad});
  const auto xTokenMajor = ScaleView<const float, RowMajor>::fromValidated(xs.data(), M, G, RowMajor{G});
  const auto xStrideM = ScaleView<const float, ColMajor>::fromValidated(xs.data(), M, G, ColMajor{M});
  const auto wDoc = ScaleView<const float, RowMajor>::fromValidated(ws, nBlocks, L, RowMajor{L4});
  const auto wNMajor = ScaleView<const float, ColMajor>::fromValidated(ws, nBlocks, L, ColMajor{nBlocks});
  const auto wUnpadded = ScaleView<const float, RowMajor>::fromValidated(ws, nBlocks, L, RowMajor{L});

  struct Outcome {
    const char* name;
    Comparison c;
  };
  std::vector<Outcome> outcomes = {
      {"H0 documented: x [G][align(M,4)], w [N/128][align(K/128,4)]",
       compare(got, referenceGemm(xv, xDoc, w.values, wDoc, M, N, K), M, N, kTolRel, kTolAcc)},
      {"H1 w N-block-major [K/128][N/128]", compare(got, referenceGemm(xv, xDoc, w.values, wNMajor, M, N, K), M, N, kTolRel, kTolAcc)},
      {"H2 w K-block stride K/128 (no pad to 4)",
       compare(got, referenceGemm(xv, xDoc, w.values, wUnpadded, M, N, K), M, N, kTolRel, kTolAcc)},
      {"H3 x token-major [M][G]", compare(got, referenceGemm(xv, xTokenMajor, w.values, wDoc, M, N, K), M, N, kTolRel, kTolAcc)},
      {"H4 x stride M (not align(M,4))", compare(got, referenceGemm(xv, xStrideM, w.values, wDoc, M, N, K), M, N, kTolRel, kTolAcc)},
  };
  for (const Outcome& o : outcomes) std::printf("[gemm] layout probe %-60s %s\n", o.name, describe(o.c).c_str());
  EXPECT_EQ(outcomes[0].c.overBound, 0u) << "cuBLASLt did not read the documented layouts: see the probe lines";
  for (std::size_t i = 1; i < outcomes.size(); ++i)
    EXPECT_GT(outcomes[i].c.overBound, 0u) << outcomes[i].name << " is indistinguishable here: the probe is too weak";
}

// fp32 output: only the accumulation error remains; its measured size is printed.
TEST_F(BlockGemmDevice, Fp32OutputMatchesTheReference) {
  const index_t M = 17, N = 2048, K = 7168, G = K / 128, Mpad = alignUp(M, 4);
  const Weight& w = weight(N, K);
  const auto x = makeActivations(M, K, 5);
  DeviceBuffer<BFloat16> dx(x.size());
  dx.upload(x);
  DeviceBuffer<std::uint8_t> q(Mpad * K);
  FP8SCALE_DEVICE_CHECK(runtime::memset(q.get(), 0, Mpad * K));
  DeviceBuffer<float> s(G * Mpad), y(Mpad * N);
  y.poison(0xFF);
  QuantOptions opt;
  auto xq = groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), Fp8Matrix<E4M3FN>{q.get(), M, K, K},
                               colMajorView(s.get(), M, G, Mpad).value(), opt, nullptr);
  ASSERT_TRUE(xq.isOk()) << xq.status().message();
  const Status st = gemm_->run(xq.value(), w.view, y.get(), N, nullptr);
  ASSERT_TRUE(st.isOk()) << st.message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  const std::vector<float> got = y.download();
  const std::vector<std::uint8_t> qh = q.download();
  const std::vector<float> xs = s.download();
  const std::vector<float> xv = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(qh.data()), M, K, K});
  const Reference ref = referenceGemm(xv, ScaleView<const float, ColMajor>::fromValidated(xs.data(), M, G, ColMajor{Mpad}),
                                      w.values, hostWeightScales(w), M, N, K);
  const Comparison c = compare(got, ref, M, N, 1.0 / (1 << 22), kTolAcc);
  std::printf("[gemm] fp32 output M=%lld N=%lld K=%lld vs fp64: %s\n", static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(K), describe(c).c_str());
  EXPECT_EQ(c.overBound, 0u) << describe(c);
  for (index_t i = M * N; i < Mpad * N; ++i) ASSERT_EQ(got[i], 0.0f) << "padded output row not zero at " << i;
}

// ---------------------------------------------------------------------------
// The weight quantizer: device == host reference, bit for bit.
// ---------------------------------------------------------------------------

template <class In>
void checkWeightQuant(index_t N, index_t K, index_t ldw, index_t ldq, ScaleRule rule) {
  SCOPED_TRACE(::testing::Message() << "N=" << N << " K=" << K << " ldw=" << ldw << " ldq=" << ldq << " in="
                                    << (sizeof(In) == 4 ? "fp32" : "bf16")
                                    << " rule=" << (rule == ScaleRule::kUE8M0 ? "ue8m0" : "fp32"));
  const auto dense = makeWeights<In>(N, K, static_cast<unsigned>(N + 3 * K));
  std::vector<In> w(static_cast<std::size_t>(N * ldw), fromFloat<In>(0.0f));
  for (index_t n = 0; n < N; ++n)
    for (index_t k = 0; k < K; ++k) w[n * ldw + k] = dense[n * K + k];
  // Specials: a NaN (ignored by amax, stays NaN), a block of zeros (eps floor).
  if (N > 3 && K >= 256) {
    w[3 * ldw + 5] = fromFloat<In>(std::nanf(""));
    for (index_t n = 0; n < std::min<index_t>(N, 128); ++n)
      for (index_t k = 128; k < 256; ++k) w[n * ldw + k] = fromFloat<In>(0.0f);
  }
  DeviceBuffer<In> dw(w.size());
  dw.upload(w);
  DeviceBuffer<std::uint8_t> dq(N * ldq);
  DeviceBuffer<float> ds(weightScaleElems(N, K));
  dq.poison(kPoison);
  ds.poison(kPoison);
  WeightQuantOptions opt;
  opt.rule = rule;
  auto r = weightBlockQuant<E4M3FN>(WeightQuantInput<In>{dw.get(), N, K, ldw}, Fp8Matrix<E4M3FN>{dq.get(), N, K, ldq},
                                    weightScaleView(ds.get(), N, K).value(), opt, nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  const std::vector<std::uint8_t> q = dq.download();
  const std::vector<float> s = ds.download();

  std::vector<std::uint8_t> qRef(static_cast<std::size_t>(N * ldq), kPoison);
  std::vector<float> sRef(static_cast<std::size_t>(weightScaleElems(N, K)));
  std::memset(sRef.data(), kPoison, sRef.size() * sizeof(float));
  const Status hs = rule == ScaleRule::kUE8M0
                        ? reference::weightBlockQuant<E4M3FN, ScaleUE8M0>(
                              WeightQuantInput<In>{w.data(), N, K, ldw}, Fp8Matrix<E4M3FN>{qRef.data(), N, K, ldq},
                              weightScaleView(sRef.data(), N, K).value())
                        : reference::weightBlockQuant<E4M3FN, ScaleFp32>(
                              WeightQuantInput<In>{w.data(), N, K, ldw}, Fp8Matrix<E4M3FN>{qRef.data(), N, K, ldq},
                              weightScaleView(sRef.data(), N, K).value());
  ASSERT_TRUE(hs.isOk()) << hs.message();
  std::size_t qDiffs = 0, sDiffs = 0;
  for (std::size_t i = 0; i < q.size(); ++i) qDiffs += q[i] != qRef[i];  // includes the untouched row gaps
  for (std::size_t i = 0; i < s.size(); ++i) sDiffs += std::memcmp(&s[i], &sRef[i], 4) != 0;  // includes padding
  EXPECT_EQ(qDiffs, 0u) << "fp8 bytes (or row gaps) differ from the host reference";
  EXPECT_EQ(sDiffs, 0u) << "scales (or their zero padding) differ from the host reference";
}

TEST_F(BlockGemmDevice, WeightBlockQuantEqualsTheHostReferenceBitForBit) {
  for (const auto& nk : kNKList) checkWeightQuant<BFloat16>(nk.first, nk.second, nk.second, nk.second, ScaleRule::kFp32);
  checkWeightQuant<BFloat16>(200, 640, 640 + 64, 640 + 32, ScaleRule::kFp32);  // partial N block, padded K blocks
  checkWeightQuant<BFloat16>(1, 128, 128, 128, ScaleRule::kFp32);
  checkWeightQuant<BFloat16>(384, 640, 640, 640, ScaleRule::kUE8M0);
  checkWeightQuant<float>(200, 640, 640, 640, ScaleRule::kFp32);
  checkWeightQuant<float>(2048, 7168, 7168 + 4, 7168, ScaleRule::kFp32);
}

TEST_F(BlockGemmDevice, WeightBlockQuantRefusesBadArgumentsByName) {
  DeviceBuffer<BFloat16> dw(256 * 640 + 8);
  DeviceBuffer<std::uint8_t> dq(256 * 640);
  DeviceBuffer<float> ds(64);
  WeightQuantOptions opt;
  auto run = [&](WeightQuantInput<BFloat16> in, Fp8Matrix<E4M3FN> q, ScaleView<float, RowMajor> s) {
    return weightBlockQuant<E4M3FN>(in, q, s, opt, nullptr).status();
  };
  const auto sv = weightScaleView(ds.get(), 256, 640).value();
  Status st = run({dw.get(), 256, 600, 640}, {dq.get(), 256, 600, 640}, sv);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "K");
  st = run({dw.get() + 1, 256, 640, 640}, {dq.get(), 256, 640, 640}, sv);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_STREQ(st.argument(), "w");
  st = run({dw.get(), 256, 640, 640}, {dq.get(), 256, 640, 640}, weightScaleView(ds.get(), 128, 640).value());
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "scale");
  st = run({dw.get(), 256, 640, 640}, {dq.get(), 256, 640, 600}, sv);
  EXPECT_EQ(st.code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(st.argument(), "q.ld");
}

// ---------------------------------------------------------------------------
// The wrapper refuses what cuBLASLt would misread, by name, and writes nothing.
// ---------------------------------------------------------------------------

TEST_F(BlockGemmDevice, GemmRefusesBadArgumentsByNameAndWritesNothing) {
  const index_t M = 6, N = 384, K = 640, G = K / 128, Mpad = alignUp(M, 4);
  const Weight& w = weight(N, K);
  DeviceBuffer<std::uint8_t> qx(Mpad * K + 64);
  DeviceBuffer<float> sx(G * Mpad + 8);
  DeviceBuffer<BFloat16> y(Mpad * N + 16);
  FP8SCALE_DEVICE_CHECK(runtime::memset(qx.get(), 0, Mpad * K + 64));
  FP8SCALE_DEVICE_CHECK(runtime::memset(sx.get(), 0, (G * Mpad + 8) * sizeof(float)));
  y.poison(0xFF);
  const Fp8Matrix<E4M3FN> xData{qx.get(), M, K, K};
  const auto xScale = ScaleView<float, ColMajor>::fromValidated(sx.get(), M, G, ColMajor{Mpad});
  const QuantizedTensor<E4M3FN, ColMajor> xOk{xData, xScale, 128};
  auto expectRefused = [](const Status& st, StatusCode code, const char* argument) {
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_STREQ(st.argument(), argument) << st.message();
    std::printf("[gemm] refused as expected: %s\n", st.message().c_str());
  };

  // The scale ld must be align(M, 4) exactly: ld == M (6) is the bpreshuffle
  // convention, not cuBLASLt's.
  expectRefused(gemm_->run(QuantizedTensor<E4M3FN, ColMajor>{
                               xData, ScaleView<float, ColMajor>::fromValidated(sx.get(), M, G, ColMajor{M}), 128},
                           w.view, y.get(), N, nullptr),
                StatusCode::kInvalidShape, "x.scale");
  // 16-byte aligned scale pointers.
  expectRefused(gemm_->run(QuantizedTensor<E4M3FN, ColMajor>{
                               xData, ScaleView<float, ColMajor>::fromValidated(sx.get() + 1, M, G, ColMajor{Mpad}), 128},
                           w.view, y.get(), N, nullptr),
                StatusCode::kMisaligned, "x.scale");
  // K not a multiple of 128.
  expectRefused(gemm_->run(QuantizedTensor<E4M3FN, ColMajor>{
                               Fp8Matrix<E4M3FN>{qx.get(), M, 600, 640},
                               ScaleView<float, ColMajor>::fromValidated(sx.get(), M, 4, ColMajor{Mpad}), 128},
                           w.view, y.get(), N, nullptr),
                StatusCode::kInvalidShape, "K");
  // e4m3fnuz bytes.
  {
    const QuantizedTensor<E4M3FNUZ, ColMajor> xFnuz{Fp8Matrix<E4M3FNUZ>{qx.get(), M, K, K}, xScale, 128};
    const BlockQuantizedWeight<E4M3FNUZ> wFnuz{Fp8Matrix<E4M3FNUZ>{w.view.data.data, N, K, K}, w.view.scale};
    expectRefused(gemm_->run(xFnuz, wFnuz, y.get(), N, nullptr), StatusCode::kInvalidValue, "x");
  }
  // Groups of 64.
  expectRefused(gemm_->run(QuantizedTensor<E4M3FN, ColMajor>{xData, xScale, 64}, w.view, y.get(), N, nullptr),
                StatusCode::kUnsupportedGroupSize, "x.groupSize");
  // Weight scales without the K-block padding to a multiple of 4.
  {
    BlockQuantizedWeight<E4M3FN> unpadded = w.view;
    unpadded.scale = ScaleView<float, RowMajor>::fromValidated(w.view.scale.data(), weightScaleRows(N),
                                                               weightScaleCols(K), RowMajor{weightScaleCols(K)});
    expectRefused(gemm_->run(xOk, unpadded, y.get(), N, nullptr), StatusCode::kInvalidShape, "w.scale");
  }
  // N not a multiple of 16.
  {
    BlockQuantizedWeight<E4M3FN> narrow = w.view;
    narrow.data.rows = 200;
    narrow.scale = ScaleView<float, RowMajor>::fromValidated(w.view.scale.data(), weightScaleRows(200),
                                                             weightScaleCols(K), RowMajor{weightScaleLd(K)});
    expectRefused(gemm_->run(xOk, narrow, y.get(), 200, nullptr), StatusCode::kInvalidShape, "N");
  }
  // Output row stride and pointer off 16 bytes; fp8 row stride off 16.
  expectRefused(gemm_->run(xOk, w.view, y.get(), N + 1, nullptr), StatusCode::kMisaligned, "ldy");
  expectRefused(gemm_->run(xOk, w.view, y.get() + 1, N, nullptr), StatusCode::kMisaligned, "y");
  expectRefused(gemm_->run(QuantizedTensor<E4M3FN, ColMajor>{Fp8Matrix<E4M3FN>{qx.get(), M, K, K + 8}, xScale, 128},
                           w.view, y.get(), N, nullptr),
                StatusCode::kMisaligned, "x.ld");
  // An object that was never created.
  {
    CublasLtBlockGemm empty;
    expectRefused(empty.run(xOk, w.view, y.get(), N, nullptr), StatusCode::kInvalidValue, "this");
  }
  // M == 0 is valid and enqueues nothing.
  {
    const QuantizedTensor<E4M3FN, ColMajor> none{Fp8Matrix<E4M3FN>{qx.get(), 0, K, K},
                                                  ScaleView<float, ColMajor>::fromValidated(sx.get(), 0, G, ColMajor{0}),
                                                  128};
    const Status st = gemm_->run(none, w.view, y.get(), N, nullptr);
    EXPECT_TRUE(st.isOk()) << st.message();
  }
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  for (const BFloat16 v : y.download()) ASSERT_EQ(v.bits, 0xFFFF) << "a refused call wrote output";

  // cuBLAS errors carry the status name.
  EXPECT_STREQ(cublasStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  const std::string msg = detail::fromCublas("CublasLtBlockGemm::run: cublasLtMatmul", CUBLAS_STATUS_INVALID_VALUE).message();
  EXPECT_NE(msg.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cublasLtMatmul"), std::string::npos) << msg;

  // And the valid call goes through.
  const Status ok = gemm_->run(xOk, w.view, y.get(), N, nullptr);
  EXPECT_TRUE(ok.isOk()) << ok.message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
}

}  // namespace
}  // namespace fp8scale::test
