// The host references of the block-scaled GEMM consumer: 128 x 128
// weight block quantization and the fp64 GEMM of dequantized operands, on
// values small enough to check by hand, plus the shape of the cuBLASLt weight
// scale buffer and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fp8scale/consumers/weight_block_quant.hpp"
#include "fp8scale/layout_policy.hpp"
#include "fp8scale/reference/block_scaled_gemm.hpp"

namespace fp8scale {
namespace {

// The weight scale layout cuBLASLt's BLK128x128_32F reads: (ceil(N/128), K/128)
// with the K-block stride padded to a multiple of 4.
static_assert(weightScaleRows(1) == 1 && weightScaleRows(128) == 1 && weightScaleRows(129) == 2, "ceil(N / 128)");
static_assert(weightScaleCols(7168) == 56 && weightScaleLd(7168) == 56, "56 K blocks are already a multiple of 4");
static_assert(weightScaleCols(640) == 5 && weightScaleLd(640) == 8, "5 K blocks are padded to 8");
static_assert(weightScaleElems(130, 640) == 16, "2 N blocks x 8");

TEST(WeightScaleView, HasTheCublasLtShapeAndStrides) {
  std::vector<float> buf(static_cast<std::size_t>(weightScaleElems(130, 640)));
  auto v = weightScaleView(buf.data(), 130, 640);
  ASSERT_TRUE(v.isOk()) << v.status().message();
  EXPECT_EQ(v.value().rows(), 2);
  EXPECT_EQ(v.value().cols(), 5);
  EXPECT_EQ(v.value().ld(), 8);
  EXPECT_EQ(v.value().stride(0), 8);
  EXPECT_EQ(v.value().stride(1), 1);
  EXPECT_EQ(&v.value()(1, 3), buf.data() + 11);
  auto bad = weightScaleView(buf.data(), 130, 600);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(bad.status().argument(), "K");
}

/// Fresh outputs of an N x K quantization: fp8 bytes 0xAB, scales NaN.
struct Outputs {
  Outputs(index_t n, index_t k) : q(static_cast<std::size_t>(n * k), 0xAB), s(weightScaleElems(n, k), std::nanf("")) {}
  std::vector<std::uint8_t> q;
  std::vector<float> s;
};

TEST(ReferenceWeightBlockQuant, BlockWithAmax448HasUnitScale) {
  const index_t N = 128, K = 128;
  std::vector<float> w(N * K, 0.0f);
  w[0] = 448.0f;
  w[5 * K + 7] = -1.0f;
  w[127 * K + 127] = 3.3f;
  Outputs out(N, K);
  const Status st = reference::weightBlockQuant<E4M3FN, ScaleFp32>(WeightQuantInput<float>{w.data(), N, K, K},
                                                                    Fp8Matrix<E4M3FN>{out.q.data(), N, K, K},
                                                                    weightScaleView(out.s.data(), N, K).value());
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(out.s[0], 1.0f);
  for (int c = 1; c < 4; ++c) EXPECT_EQ(out.s[c], 0.0f) << "padding slot " << c;
  EXPECT_EQ(out.q[0], 0x7E);
  EXPECT_EQ(out.q[5 * K + 7], 0xB8);
  EXPECT_EQ(out.q[127 * K + 127], 0x45) << "3.3 -> 3.25";
  EXPECT_EQ(out.q[1], 0x00);
}

TEST(ReferenceWeightBlockQuant, PartialLastNBlockTakesItsOwnAmax) {
  // N = 130: block row 1 holds rows 128 and 129 only. K = 256: two K blocks,
  // padded to 4 slots per block row.
  const index_t N = 130, K = 256;
  std::vector<float> w(N * K, 0.0f);
  for (index_t n = 0; n < 128; ++n)
    for (index_t k = 0; k < K; ++k) w[n * K + k] = 1.0f;
  w[129 * K + 3] = 896.0f;  // block (1, 0): amax 896 -> s = 2
  w[128 * K + 4] = 1.0f;    //   1 / 2 = 0.5
  // block (1, 1) stays all zero: the eps floor.
  Outputs out(N, K);
  const Status st = reference::weightBlockQuant<E4M3FN, ScaleFp32>(WeightQuantInput<float>{w.data(), N, K, K},
                                                                    Fp8Matrix<E4M3FN>{out.q.data(), N, K, K},
                                                                    weightScaleView(out.s.data(), N, K).value());
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(out.s[0], 1.0f / 448.0f);  // (0, 0)
  EXPECT_EQ(out.s[1], 1.0f / 448.0f);  // (0, 1)
  EXPECT_EQ(out.s[2], 0.0f);
  EXPECT_EQ(out.s[3], 0.0f);
  EXPECT_EQ(out.s[4], 2.0f);                // (1, 0)
  EXPECT_EQ(out.s[5], 1e-10f / 448.0f);     // (1, 1): eps / fmax
  EXPECT_EQ(out.s[6], 0.0f);
  EXPECT_EQ(out.s[7], 0.0f);
  EXPECT_EQ(out.q[0], 0x7E) << "1 * (1 / (1 / 448)) lands on 448";
  EXPECT_EQ(out.q[129 * K + 3], 0x7E);
  EXPECT_EQ(out.q[128 * K + 4], 0x30) << "0.5";
  EXPECT_EQ(out.q[129 * K + 200], 0x00);
}

TEST(ReferenceWeightBlockQuant, UE8M0ScaleIsAPowerOfTwo) {
  // Row 0 holds k - 64: amax 64, s = 64 / 448 rounded up to 0.25, so q = encode(4 v).
  const index_t N = 128, K = 128;
  std::vector<float> w(N * K, 0.0f);
  for (index_t k = 0; k < K; ++k) w[k] = static_cast<float>(k - 64);
  Outputs out(N, K);
  ASSERT_TRUE((reference::weightBlockQuant<E4M3FN, ScaleUE8M0>(WeightQuantInput<float>{w.data(), N, K, K},
                                                                Fp8Matrix<E4M3FN>{out.q.data(), N, K, K},
                                                                weightScaleView(out.s.data(), N, K).value())));
  EXPECT_EQ(out.s[0], 0.25f);
  EXPECT_EQ(out.q[0], 0xF8) << "-256";
  EXPECT_EQ(out.q[127], 0x78) << "252 -> 256";
  EXPECT_EQ(out.q[65], 0x48) << "4";
}

TEST(ReferenceWeightBlockQuant, NaNIsIgnoredByAmaxAndStaysNaN) {
  const index_t N = 128, K = 128;
  std::vector<BFloat16> w(N * K, toBFloat16(0.0f));
  w[0] = toBFloat16(std::numeric_limits<float>::quiet_NaN());
  w[K + 1] = toBFloat16(448.0f);
  Outputs out(N, K);
  ASSERT_TRUE((reference::weightBlockQuant<E4M3FN, ScaleFp32>(WeightQuantInput<BFloat16>{w.data(), N, K, K},
                                                               Fp8Matrix<E4M3FN>{out.q.data(), N, K, K},
                                                               weightScaleView(out.s.data(), N, K).value())));
  EXPECT_EQ(out.s[0], 1.0f);
  EXPECT_EQ(out.q[0], 0x7F);
  EXPECT_EQ(out.q[K + 1], 0x7E);
}

TEST(ReferenceWeightBlockQuant, BadArgumentsAreRefusedByName) {
  std::vector<float> w(256 * 640, 0.0f);
  Outputs out(256, 640);
  const auto sv = weightScaleView(out.s.data(), 256, 640).value();
  auto run = [&](WeightQuantInput<float> in, Fp8Matrix<E4M3FN> q, ScaleView<float, RowMajor> s, float fmax) {
    return reference::weightBlockQuant<E4M3FN, ScaleFp32>(in, q, s, fmax);
  };
  Status st = run({w.data(), 256, 600, 640}, {out.q.data(), 256, 600, 640}, sv, 448.0f);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "K");
  st = run({w.data(), 256, 640, 512}, {out.q.data(), 256, 640, 640}, sv, 448.0f);
  EXPECT_EQ(st.code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(st.argument(), "ld");
  st = run({w.data(), 256, 640, 640}, {out.q.data(), 256, 640, 600}, sv, 448.0f);
  EXPECT_STREQ(st.argument(), "q.ld");
  st = run({w.data(), 256, 640, 640}, {out.q.data(), 256, 640, 640}, weightScaleView(out.s.data(), 128, 640).value(),
           448.0f);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "scale");
  st = run({w.data(), 256, 640, 640}, {out.q.data(), 256, 640, 640}, sv, 500.0f);
  EXPECT_EQ(st.code(), StatusCode::kInvalidValue);
  EXPECT_STREQ(st.argument(), "fmax");
  st = run({nullptr, 0, 640, 640}, {nullptr, 0, 640, 640}, weightScaleView<float>(nullptr, 0, 640).value(), 448.0f);
  EXPECT_TRUE(st.isOk()) << "an empty weight is valid: " << st.message();
}

// ---------------------------------------------------------------------------
// The fp64 GEMM reference.
// ---------------------------------------------------------------------------

TEST(ReferenceBlockScaledGemm, HandCheckedTwoGroups) {
  // x: row 0 all 1.0; row 1: group 0 all 2.0, group 1 all -0.5.
  // xs (column-major, ld 4): (0,0)=1 (0,1)=4 (1,0)=0.5 (1,1)=2.
  // w: every row 0.5 in group 0, 1.0 in group 1; one block row, ws = 3, 0.25.
  //   Y(0, n) = 1 * 3 * 128 * 0.5 + 4 * 0.25 * 128 * 1       = 192 + 128 = 320
  //   Y(1, n) = 0.5 * 3 * 128 * 1 + 2 * 0.25 * 128 * (-0.5)  = 192 - 32  = 160
  const index_t M = 2, N = 16, K = 256;
  std::vector<std::uint8_t> xq(M * K), wq(N * K);
  for (index_t k = 0; k < K; ++k) {
    xq[k] = 0x38;                       // 1.0
    xq[K + k] = k < 128 ? 0x40 : 0xB0;  // 2.0 | -0.5
  }
  for (index_t n = 0; n < N; ++n)
    for (index_t k = 0; k < K; ++k) wq[n * K + k] = k < 128 ? 0x30 : 0x38;  // 0.5 | 1.0
  std::vector<float> xs = {1.0f, 0.5f, 0.0f, 0.0f, 4.0f, 2.0f, 0.0f, 0.0f};  // [G][4]
  std::vector<float> ws = {3.0f, 0.25f, 0.0f, 0.0f};                         // [1][4]
  const QuantizedTensor<E4M3FN, ColMajor> x{Fp8Matrix<E4M3FN>{xq.data(), M, K, K},
                                            colMajorView(xs.data(), M, 2, 4).value(), 128};
  const BlockQuantizedWeight<E4M3FN> w{Fp8Matrix<E4M3FN>{wq.data(), N, K, K}, weightScaleView(ws.data(), N, K).value()};
  std::vector<double> y, mag;
  const Status st = reference::blockScaledGemm(x, w, y, &mag);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (index_t n = 0; n < N; ++n) {
    EXPECT_EQ(y[n], 320.0);
    EXPECT_EQ(y[N + n], 160.0);
    EXPECT_EQ(mag[N + n], 224.0) << "192 + |-32|";
  }
}

/// Random fp8 operands and scales for the property tests below.
struct RandomProblem {
  index_t M, N, K;
  std::vector<std::uint8_t> xq, wq;
  std::vector<float> xsRow, ws;  // x scales row-major (M, G); w scales [ceil(N/128)][align(G, 4)]
  RandomProblem(index_t m, index_t n, index_t k, unsigned seed) : M(m), N(n), K(k) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> code(0, 255);
    std::uniform_real_distribution<float> scale(0.01f, 4.0f);
    auto finite = [&] {
      int c;
      do c = code(rng);
      while ((c & 0x7F) == 0x7F);  // no NaN
      return static_cast<std::uint8_t>(c);
    };
    xq.resize(M * K);
    wq.resize(N * K);
    for (auto& b : xq) b = finite();
    for (auto& b : wq) b = finite();
    xsRow.resize(M * (K / 128));
    ws.assign(weightScaleElems(N, K), 0.0f);
    for (auto& s : xsRow) s = scale(rng);
    for (index_t nb = 0; nb < weightScaleRows(N); ++nb)
      for (index_t g = 0; g < K / 128; ++g) ws[nb * weightScaleLd(K) + g] = scale(rng);
  }
};

TEST(ReferenceBlockScaledGemm, AgreesWithNaiveDequantizedProductAndIgnoresScaleLayout) {
  const RandomProblem p(5, 160, 640, 7);
  const index_t G = p.K / 128;
  // The same scales column-major with ld = align(M, 4), as the GEMM reads them.
  std::vector<float> xsCol(G * alignUp(p.M, 4), 0.0f);
  const auto rowView = rowMajorView(const_cast<float*>(p.xsRow.data()), p.M, G).value();
  ASSERT_TRUE(materializeHost(rowView, xsCol.data(), alignUp(p.M, 4)).isOk());
  std::vector<std::uint8_t> xq = p.xq, wq = p.wq;
  std::vector<float> ws = p.ws;
  const BlockQuantizedWeight<E4M3FN> w{Fp8Matrix<E4M3FN>{wq.data(), p.N, p.K, p.K},
                                       weightScaleView(ws.data(), p.N, p.K).value()};
  std::vector<double> yRow, yCol, mag;
  ASSERT_TRUE(reference::blockScaledGemm(QuantizedTensor<E4M3FN, RowMajor>{Fp8Matrix<E4M3FN>{xq.data(), p.M, p.K, p.K},
                                                                           rowView, 128},
                                         w, yRow, &mag)
                  .isOk());
  ASSERT_TRUE(reference::blockScaledGemm(
                  QuantizedTensor<E4M3FN, ColMajor>{Fp8Matrix<E4M3FN>{xq.data(), p.M, p.K, p.K},
                                                    colMajorView(xsCol.data(), p.M, G, alignUp(p.M, 4)).value(), 128},
                  w, yCol)
                  .isOk());
  EXPECT_EQ(std::memcmp(yRow.data(), yCol.data(), yRow.size() * sizeof(double)), 0)
      << "the result depends on the scale layout, not only on the values";
  // Naive: dequantize each element in double, one running sum.
  for (index_t m = 0; m < p.M; ++m)
    for (index_t n = 0; n < p.N; ++n) {
      double acc = 0.0;
      for (index_t k = 0; k < p.K; ++k)
        acc += static_cast<double>(decode<E4M3FN>(xq[m * p.K + k])) * p.xsRow[m * G + k / 128] *
               static_cast<double>(decode<E4M3FN>(wq[n * p.K + k])) * ws[(n / 128) * weightScaleLd(p.K) + k / 128];
      EXPECT_NEAR(yRow[m * p.N + n], acc, 1e-12 * mag[m * p.N + n]) << "(" << m << ", " << n << ")";
    }
}

TEST(ReferenceBlockScaledGemm, ColumnRangesAddUpToTheWholeBitForBit) {
  const RandomProblem p(3, 256, 384, 11);
  const index_t G = p.K / 128;
  const std::vector<float> xv = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(p.xq.data()), p.M, p.K, p.K});
  const std::vector<float> wv = reference::decodeFp8(Fp8Matrix<E4M3FN>{const_cast<std::uint8_t*>(p.wq.data()), p.N, p.K, p.K});
  const auto xs = rowMajorView(p.xsRow.data(), p.M, G).value();
  const auto ws = ScaleView<const float, RowMajor>::fromValidated(p.ws.data(), weightScaleRows(p.N), G,
                                                                  RowMajor{weightScaleLd(p.K)});
  std::vector<double> whole(p.M * p.N), split(p.M * p.N);
  reference::blockScaledGemmColumns(xv.data(), xs, wv.data(), ws, p.M, p.K, 0, p.N, whole.data(), p.N);
  reference::blockScaledGemmColumns(xv.data(), xs, wv.data(), ws, p.M, p.K, 0, 100, split.data(), p.N);
  reference::blockScaledGemmColumns(xv.data(), xs, wv.data(), ws, p.M, p.K, 100, p.N, split.data(), p.N);
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(double)), 0);
}

TEST(ReferenceBlockScaledGemm, MismatchedOperandsAreRefusedByName) {
  std::vector<std::uint8_t> xq(4 * 256), wq(16 * 384);
  std::vector<float> xs(8), ws(4);
  const QuantizedTensor<E4M3FN, ColMajor> x{Fp8Matrix<E4M3FN>{xq.data(), 4, 256, 256},
                                            colMajorView(xs.data(), 4, 2, 4).value(), 128};
  const BlockQuantizedWeight<E4M3FN> w{Fp8Matrix<E4M3FN>{wq.data(), 16, 384, 384},
                                       weightScaleView(ws.data(), 16, 384).value()};
  std::vector<double> y;
  const Status st = reference::blockScaledGemm(x, w, y);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "w");
}

}  // namespace
}  // namespace fp8scale
