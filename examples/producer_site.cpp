// A producer site as an inference engine writes it, on the host reference so
// that it runs anywhere: the gate decides whether the producer emits its
// scales column-major itself; if not, materialize() relayouts them for the
// column-major consumer. Both paths must give the GEMM the same scales.
//
// The device producers keep this exact shape: replace
// reference::groupQuant with the launcher and materializeHost with materialize.
#include <fp8scale/fp8scale.hpp>

#include <cstdio>
#include <random>
#include <vector>

using namespace fp8scale;

int main() {
  // MI355X running aiter's bpreshuffle blockscale GEMM (a host-side stand-in
  // for queryDevice()).
  DeviceInfo device;
  device.isAmd = true;
  device.archName = "gfx950:sramecc+:xnack-";
  const ScaleConsumer consumer = detectScaleConsumer(device);

  const index_t M = 17, K = 7168, G = K / 128;
  const index_t ld = consumerScaleLd(consumer, M);  // == M on gfx950
  std::vector<float> x(M * K);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);

  std::vector<std::uint8_t> q(M * K);
  std::vector<float> scaleBuffer(G * ld), relayoutBuffer(G * ld);
  Fp8Matrix<E4M3FN> qView{q.data(), M, K, K};

  // ---- The site -----------------------------------------------------------
  ScaleView<float, ColMajor> forGemm;
  if (emitTransposed(consumer, M)) {
    // TRANSPOSE_SCALE = true: the producer writes [G][ld] itself; no copy.
    forGemm = colMajorView(scaleBuffer.data(), M, G, ld).value();
    reference::groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, 128, qView, forGemm);
  } else {
    // Row-major emission, then the relayout (a no-op at M == 1).
    auto rowMajor = rowMajorView(scaleBuffer.data(), M, G).value();
    reference::groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, 128, qView, rowMajor);
    forGemm = materializeHost(rowMajor, relayoutBuffer.data(), ld).value();
  }
  // ---------------------------------------------------------------------------

  // The other path, for comparison: row-major emission + materialize.
  std::vector<std::uint8_t> q2(M * K);
  std::vector<float> rm(M * G), cm(G * ld);
  auto rmView = rowMajorView(rm.data(), M, G).value();
  reference::groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, 128, Fp8Matrix<E4M3FN>{q2.data(), M, K, K}, rmView);
  auto materialized = materializeHost(rmView, cm.data(), ld).value();

  int mismatches = q == q2 ? 0 : 1;
  for (index_t m = 0; m < M; ++m)
    for (index_t g = 0; g < G; ++g) mismatches += forGemm(m, g) != materialized(m, g);
  std::printf("consumer %d, M=%lld G=%lld ld=%lld: transposed emit %s, strides (%lld, %lld), %s\n",
              static_cast<int>(consumer), static_cast<long long>(M), static_cast<long long>(G),
              static_cast<long long>(ld), emitTransposed(consumer, M) ? "yes" : "no",
              static_cast<long long>(forGemm.stride(0)), static_cast<long long>(forGemm.stride(1)),
              mismatches == 0 ? "identical to row-major + materialize" : "MISMATCH");
  return mismatches == 0 ? 0 : 1;
}
