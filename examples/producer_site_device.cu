// The producer site of the README on the device: the gate, asked for the
// device's consumer (on an H200: DeepGEMM's TMA-aligned ld), decides whether
// group quant writes its scales column-major itself (one launch, zero-copy
// view) or row-major followed by materialize (two launches) for a
// column-major consumer. Built by the CUDA test build; runs on any CUDA GPU
// of sm_90 and newer, and says so and exits 0 where there is none.
#include <fp8scale/fp8scale.hpp>

#include <cstdio>
#include <vector>

using namespace fp8scale;

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("producer_site_device: no CUDA device here; nothing to run\n");
    return 0;
  }
  const index_t M = 17, K = 7168, G = K / 128;
  std::vector<BFloat16> hx(M * K);
  for (index_t i = 0; i < M * K; ++i) hx[i] = toBFloat16(static_cast<float>(i % 97) - 48.0f);
  BFloat16* x = nullptr;
  std::uint8_t* qBuf = nullptr;
  float *sBuf = nullptr, *relayoutBuf = nullptr;
  cudaMalloc(&x, M * K * sizeof(BFloat16));
  cudaMalloc(&qBuf, M * K);
  cudaMalloc(&sBuf, G * alignUp(M, 4) * sizeof(float));
  cudaMalloc(&relayoutBuf, G * alignUp(M, 4) * sizeof(float));
  cudaMemcpy(x, hx.data(), M * K * sizeof(BFloat16), cudaMemcpyHostToDevice);
  cudaStream_t stream = nullptr;

  // ---- The site (as in the README) -------------------------------------------
  DeviceInfo device;
  if (queryDevice(0, device) != kDeviceSuccess) return 1;
  const ScaleConsumer consumer = detectScaleConsumer(device);  // kDeepGemmTma on sm_90
  const index_t ld = consumerScaleLd(consumer, M);  // M (gfx950), align(M, 4) (TMA); 0: row-major consumer
  const auto in = GroupQuantInput<BFloat16>::matrix(x, M, K, K);
  const Fp8Matrix<E4M3FN> q{qBuf, M, K, K};
  QuantOptions opt;  // fp32 scales, groups of 128, fmax 448

  ScaleView<float, ColMajor> forGemm;
  if (emitTransposed(consumer, M)) {
    // TRANSPOSE_SCALE = true: [G][ld] written by the producer itself.
    auto out = groupQuant<E4M3FN>(in, q, colMajorView(sBuf, M, G, ld).value(), opt, stream);
    if (!out) return std::printf("%s\n", out.status().message().c_str()), 1;
    forGemm = out.value().scale;
  } else if (consumerIsColumnMajor(consumer)) {
    // Row-major emission, then the relayout (no launch when the bytes already fit).
    auto out = groupQuant<E4M3FN>(in, q, rowMajorView(sBuf, M, G).value(), opt, stream);
    if (!out) return std::printf("%s\n", out.status().message().c_str()), 1;
    auto view = materialize(out.value().scale, relayoutBuf, ld, stream);
    if (!view) return std::printf("%s\n", view.status().message().c_str()), 1;
    forGemm = view.value();
  }
  // ------------------------------------------------------------------------------
  const cudaError_t e = cudaStreamSynchronize(stream);
  std::printf("producer_site_device: consumer %d, ld %lld, %s, scale view strides (%lld, %lld): %s\n",
              static_cast<int>(consumer), static_cast<long long>(ld),
              emitTransposed(consumer, M) ? "transposed emit" : "row-major emit + materialize", static_cast<long long>(forGemm.stride(0)),
              static_cast<long long>(forGemm.stride(1)), cudaGetErrorString(e));
  cudaFree(x);
  cudaFree(qBuf);
  cudaFree(sBuf);
  cudaFree(relayoutBuf);
  return e == cudaSuccess ? 0 : 1;
}
