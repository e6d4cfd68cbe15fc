// fp8scale-pipeline, GPU path: the device producers, materialize and (CUDA)
// cuBLASLt's block-scaled fp8 GEMM (consumers/cublaslt_block_gemm.hpp) on one
// stream. HIP builds run the producers and materialize on the AMD GPU and
// take the GEMM at the checked columns from the host fp64 reference
// (site_checks.hpp's sampledGemm, as the host path does): no block-scaled
// GEMM is wired for AMD here, so their "+ GEMM" times are not measured.
//
// Per site and M, both paths first run once from the same inputs and their
// results are copied back for the checks (site_checks.hpp). Then each path is
// timed twice with events around the replay of a graph of `iters`
// calls: the producer side alone (producer, + materialize on the old path)
// and the producer side + GEMM; the median of kReplays replays, divided by
// `iters`. RMSNorm updates its residual in place, so the residual is restored
// before every replay (outside the timed span).
#pragma once

#include "fp8scale/platform.hpp"

#if defined(FP8SCALE_HAS_DEVICE)

#if defined(FP8SCALE_PLATFORM_CUDA)
#include <dlfcn.h>
#endif

#include <limits>

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "graph_timing.cuh"
#if defined(FP8SCALE_PLATFORM_CUDA)
#include "fp8scale/consumers/cublaslt_block_gemm.hpp"
#endif
#include "fp8scale/consumers/weight_block_quant.hpp"
#include "fp8scale/fp8scale.hpp"
#include "pipeline/site_checks.hpp"
#include "pipeline/site_data.hpp"

namespace fp8scale {
namespace pipeline {

/// Replays per timing; the median is reported.
constexpr int kReplays = 7;

/// Whether this build runs the GEMM on the GPU (CUDA: cuBLASLt).
#if defined(FP8SCALE_PLATFORM_CUDA)
constexpr bool kDeviceGemm = true;
#else
constexpr bool kDeviceGemm = false;
#endif

inline void checkDevice(DeviceError e, const char* what) {
  if (e != kDeviceSuccess) throw std::runtime_error(std::string(what) + ": " + deviceErrorString(e));
}
inline void checkStatus(const Status& s) {
  if (!s) throw std::runtime_error(s.message());
}

/// Device memory of n elements of T, freed with the object.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n > 0) checkDevice(runtime::malloc(&p_, n * sizeof(T)), "malloc");
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) (void)runtime::free(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Host -> device copy on `stream`, finished on return. (The legacy-stream
/// a plain memcpy would not be ordered with the non-blocking stream's work.)
template <class T>
void upload(T* dst, const T* src, std::size_t n, Stream stream) {
  if (n == 0) return;
  checkDevice(runtime::memcpyAsync(dst, src, n * sizeof(T), runtime::Copy::HostToDevice, stream),
              "memcpyAsync (to device)");
  checkDevice(runtime::streamSynchronize(stream), "streamSynchronize (upload)");
}
/// Device -> host copy of n elements on `stream`, after the stream's earlier work.
template <class T>
std::vector<T> download(const T* src, std::size_t n, Stream stream) {
  std::vector<T> out(n);
  if (n == 0) return out;
  checkDevice(runtime::memcpyAsync(out.data(), src, n * sizeof(T), runtime::Copy::DeviceToHost, stream),
              "memcpyAsync (to host)");
  checkDevice(runtime::streamSynchronize(stream), "streamSynchronize (download)");
  return out;
}

#if defined(FP8SCALE_PLATFORM_CUDA)
/// Whether the CUDA driver library (libcuda.so.1) is installed.
inline bool driverLibraryLoads() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

/// Why the CUDA runtime found no device it can use ("" when it did).
inline std::string noDeviceReason(DeviceError e, int count) {
  if (e == cudaSuccess) return count > 0 ? "" : "no CUDA device or driver found";
  // The runtime reports a missing driver as one "insufficient" for it: only a
  // driver library that loads is an old driver.
  if (e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && !driverLibraryLoads()))
    return "no CUDA device or driver found";
  if (e == cudaErrorInsufficientDriver) return "the CUDA driver is older than this build's CUDA runtime";
  return std::string("no usable CUDA device (getDeviceCount: ") + deviceErrorString(e) + ")";
}
#else
/// Why the HIP runtime found no device it can use ("" when it did).
inline std::string noDeviceReason(DeviceError e, int count) {
  if (e == hipSuccess) return count > 0 ? "" : "no AMD GPU found";
  if (e == hipErrorNoDevice) return "no AMD GPU found";
  return std::string("no usable AMD GPU (getDeviceCount: ") + deviceErrorString(e) + ")";
}
#endif

/// The GPU: a stream and (CUDA) the cuBLASLt GEMM. create() fails (with the
/// reason) when there is no usable GPU; the program then takes the host path.
class GpuContext {
 public:
  static std::string create(GpuContext& ctx) {
#if defined(FP8SCALE_HIP_NO_DEVICE_LIBS)
    (void)ctx;
    return "built without ROCm's device libraries (FP8SCALE_HIP_NOGPULIB), no GPU used";
#endif
    int count = 0;
    const DeviceError e = runtime::getDeviceCount(&count);
    (void)deviceLastError();  // a failed query leaves an error the next check would read
    if (std::string why = noDeviceReason(e, count); !why.empty()) return why;
    if (runtime::setDevice(0) != kDeviceSuccess) return "setDevice(0) failed";
#if defined(FP8SCALE_PLATFORM_CUDA)
    auto gemm = CublasLtBlockGemm::create();
    if (!gemm) return "cuBLASLt block-scaled GEMM unavailable: " + gemm.status().message();
    ctx.gemm_ = std::move(gemm.value());
#endif
    if (runtime::streamCreate(&ctx.stream_, true) != kDeviceSuccess) return "streamCreate failed";
#if defined(FP8SCALE_PLATFORM_CUDA)
    cudaDeviceProp p{};
    (void)cudaGetDeviceProperties(&p, 0);
    const std::size_t v = CublasLtBlockGemm::libraryVersion();
    ctx.description_ = std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
                       std::to_string(p.multiProcessorCount) + " SMs, cuBLASLt " + std::to_string(v / 10000) + "." +
                       std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
#else
    hipDeviceProp_t p{};
    (void)hipGetDeviceProperties(&p, 0);
    ctx.description_ = std::string(p.name) + ", " + p.gcnArchName + ", " + std::to_string(p.multiProcessorCount) +
                       " CUs, GEMM: host fp64 reference";
#endif
    return {};
  }
  GpuContext() = default;
  ~GpuContext() {
    if (stream_ != nullptr) (void)runtime::streamDestroy(stream_);
  }
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  Stream stream() const { return stream_; }
#if defined(FP8SCALE_PLATFORM_CUDA)
  CublasLtBlockGemm& gemm() { return gemm_; }
#endif
  const std::string& description() const { return description_; }

 private:
  Stream stream_ = nullptr;
#if defined(FP8SCALE_PLATFORM_CUDA)
  CublasLtBlockGemm gemm_;
#endif
  std::string description_;
};

/// Microseconds per call of `body` (which enqueues one call on `stream`):
/// a graph of `iters` calls, replayed kReplays times after a warm-up, the
/// median replay over `iters`. `prepare` enqueues untimed work before each
/// replay. graph_timing.cuh's timer; a runtime error throws (graph and events are
/// released).
inline double timeGraph(Stream stream, int iters, const std::function<void()>& body,
                        const std::function<void()>& prepare) {
  bench::GraphTiming t;
  t.launches = iters;
  t.reps = kReplays;
  t.callOutsideCapture = false;
  return 1e6 * bench::timeGraphReplays(stream, body, prepare, t, checkDevice);
}

/// One site on the GPU: inputs, the block-quantized weight and both paths'
/// buffers, sized for `maxRows` tokens.
template <class In>
class DeviceSite {
 public:
  DeviceSite(GpuContext& ctx, const SiteInput<In>& in, index_t maxRows, const WeightSample& ws, float swigluLimit,
             int iters, std::uint64_t seed)
      : ctx_(ctx), in_(in), ws_(ws), limit_(swigluLimit), iters_(std::max(1, iters)) {
    const SiteShape& s = in.shape;
    const index_t G = s.K / kGroup;
    const index_t rowsPadded = alignUp(maxRows, 4);
    const std::size_t scaleElems = static_cast<std::size_t>(G * rowsPadded);
    x_ = DeviceBuffer<In>(static_cast<std::size_t>(maxRows * s.inputCols));
    upload(x_.get(), in.x.data(), x_.size(), ctx.stream());
    if (s.producer == ProducerKind::kRmsNorm) {
      residualInit_ = DeviceBuffer<In>(static_cast<std::size_t>(maxRows * s.K));
      upload(residualInit_.get(), in.residual.data(), residualInit_.size(), ctx.stream());
      normWeight_ = DeviceBuffer<In>(static_cast<std::size_t>(s.K));
      upload(normWeight_.get(), in.normWeight.data(), normWeight_.size(), ctx.stream());
    }
    for (PathBuffers* b : {&gate_, &old_}) {
      b->q = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(rowsPadded * s.K));
      checkDevice(deviceMemsetAsync(b->q.get(), 0, b->q.size(), ctx.stream()), "memsetAsync");
      b->emitted = DeviceBuffer<float>(scaleElems);
      b->relayout = DeviceBuffer<float>(scaleElems);
      if (s.producer == ProducerKind::kRmsNorm) b->residual = DeviceBuffer<In>(static_cast<std::size_t>(maxRows * s.K));
      if (kDeviceGemm) b->y = DeviceBuffer<float>(static_cast<std::size_t>(rowsPadded * s.N));
    }

    // The weight: seeded bf16 W[N, K], block-quantized 128 x 128 on the device.
    wq_ = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(s.N * s.K));
    wScale_ = DeviceBuffer<float>(static_cast<std::size_t>(weightScaleElems(s.N, s.K)));
    {
      const std::vector<BFloat16> w = makeWeight(s, seed);
      DeviceBuffer<BFloat16> wd(w.size());
      upload(wd.get(), w.data(), w.size(), ctx.stream());
      auto q = weightBlockQuant<E4M3FN>(WeightQuantInput<BFloat16>{wd.get(), s.N, s.K, s.K},
                                        Fp8Matrix<E4M3FN>{wq_.get(), s.N, s.K, s.K},
                                        weightScaleView(wScale_.get(), s.N, s.K).value(), WeightQuantOptions{},
                                        ctx_.stream());
      checkStatus(q.status());
      weight_ = q.value();
      checkDevice(runtime::streamSynchronize(ctx_.stream()), "weightBlockQuant");
    }
    // The checked blocks against the host reference quantization (bit for bit).
    for (const WeightBlockSample& b : ws.blocks) {
      const auto q = download(wq_.get() + b.block * kWeightBlock * s.K, static_cast<std::size_t>(b.rows * s.K), ctx.stream());
      const auto sc = download(wScale_.get() + b.block * weightScaleLd(s.K), b.scale.size(), ctx.stream());
      weightMismatches_ += countDifferentBytes(q.data(), b.q.data(), q.size()) +
                           countDifferentBytes(sc.data(), b.scale.data(), sc.size() * sizeof(float));
    }
  }

  SiteRun run(index_t M) {
    const SiteShape& s = in_.shape;
    const index_t G = s.K / kGroup;
    Stream stream = ctx_.stream();
    SiteRun r;
    r.M = M;
    r.ld = consumerScaleLd(kConsumer, M);  // align(M, 4): the rows cuBLASLt reads
    r.transposed = gateEmitsTransposed(M);
    r.weightMismatches = weightMismatches_;

    // Rows [M, align(M, 4)) of the fp8 operand must be zero (an earlier larger
    // M wrote them); scale buffers start as NaN bit patterns, so padding a
    // producer or materialize failed to write shows up.
    for (PathBuffers* b : {&gate_, &old_}) {
      checkDevice(deviceMemsetAsync(b->q.get() + M * s.K, 0, static_cast<std::size_t>((r.ld - M) * s.K), stream),
                "memsetAsync");
      checkDevice(deviceMemsetAsync(b->emitted.get(), 0xFF, b->emitted.size() * sizeof(float), stream), "memsetAsync");
      checkDevice(deviceMemsetAsync(b->relayout.get(), 0xFF, b->relayout.size() * sizeof(float), stream),
                "memsetAsync");
    }
    restoreResidual(M);

    // One call of each path, from the same inputs, for the checks.
    ScaleView<float, ColMajor> gateView, oldView;
    r.gate.relayouts = enqueueCall(gate_, r.transposed, M, r.ld, true, &gateView);
    r.old.relayouts = enqueueCall(old_, false, M, r.ld, true, &oldView);
    checkDevice(runtime::streamSynchronize(stream), "first call of both paths");
    const std::vector<index_t> columns = ws_.columns();
    for (auto [path, b, view] : {std::tuple{&r.gate, &gate_, &gateView}, std::tuple{&r.old, &old_, &oldView}}) {
      path->q = download(b->q.get(), static_cast<std::size_t>(M * s.K), stream);
      path->scales = download(view->data(), static_cast<std::size_t>(G * r.ld), stream);
      if (s.producer == ProducerKind::kRmsNorm) {
        const std::vector<In> res = download(b->residual.get(), static_cast<std::size_t>(M * s.K), stream);
        path->residual.resize(res.size() * sizeof(In));
        std::memcpy(path->residual.data(), res.data(), path->residual.size());
      }
      if constexpr (kDeviceGemm) {
        path->gemmFull = download(b->y.get(), static_cast<std::size_t>(r.ld * s.N), stream);
        path->gemmSampled.resize(static_cast<std::size_t>(M * ws_.count));
        for (index_t m = 0; m < M; ++m)
          for (index_t c = 0; c < ws_.count; ++c)
            path->gemmSampled[m * ws_.count + c] = path->gemmFull[m * s.N + columns[c]];
      } else {
        // The host fp64 GEMM at the checked columns, through the view the
        // device wrote, rounded to fp32 like a GPU GEMM's output.
        const ScaleView<const float, ColMajor> xs = colMajorView(path->scales.data(), M, G, r.ld).value();
        path->gemmSampled = sampledGemm(decodeRows(path->q), xs, ws_, M, s.K);
        for (double& y : path->gemmSampled) y = static_cast<double>(static_cast<float>(y));
      }
    }
    r.rowMajorScales = download(old_.emitted.get(), static_cast<std::size_t>(M * G), stream);

    // Timing: producer side alone, then with the GEMM.
    const auto prepare = [&] { restoreResidual(M); };
    r.gate.producerUs = timeGraph(stream, iters_, [&] { enqueueCall(gate_, r.transposed, M, r.ld, false, nullptr); }, prepare);
    r.old.producerUs = timeGraph(stream, iters_, [&] { enqueueCall(old_, false, M, r.ld, false, nullptr); }, prepare);
    if constexpr (kDeviceGemm) {
      r.gate.totalUs = timeGraph(stream, iters_, [&] { enqueueCall(gate_, r.transposed, M, r.ld, true, nullptr); }, prepare);
      r.old.totalUs = timeGraph(stream, iters_, [&] { enqueueCall(old_, false, M, r.ld, true, nullptr); }, prepare);
    } else {
      r.gate.totalUs = r.old.totalUs = std::numeric_limits<double>::quiet_NaN();  // no device GEMM: not measured
    }
    checkDevice(runtime::streamSynchronize(stream), "timing");
    return r;
  }

 private:
  struct PathBuffers {
    DeviceBuffer<std::uint8_t> q;  ///< [align(maxRows, 4), K]
    DeviceBuffer<float> emitted;   ///< the producer's scales: [G][ld] or [M][G]
    DeviceBuffer<float> relayout;  ///< materialize's destination, [G][ld]
    DeviceBuffer<In> residual;     ///< RMSNorm: the residual this path updates
    DeviceBuffer<float> y;         ///< GEMM output [align(maxRows, 4), N]
  };

  void restoreResidual(index_t M) {
    if (in_.shape.producer != ProducerKind::kRmsNorm) return;
    const std::size_t bytes = static_cast<std::size_t>(M * in_.shape.K) * sizeof(In);
    for (PathBuffers* b : {&gate_, &old_})
      checkDevice(runtime::memcpyAsync(b->residual.get(), residualInit_.get(), bytes, runtime::Copy::DeviceToDevice,
                                       ctx_.stream()),
                  "memcpyAsync (residual)");
  }

  /// One producer launch writing scales through `scale`.
  template <class Layout>
  Result<QuantizedTensor<E4M3FN, Layout>> produce(index_t M, Fp8Matrix<E4M3FN> q, ScaleView<float, Layout> scale,
                                                  In* residual) {
    const SiteShape& s = in_.shape;
    const QuantOptions opt;  // fp32 scales, groups of 128, fmax 448
    switch (s.producer) {
      case ProducerKind::kRmsNorm: {
        const RmsNormQuantInput<In> r{x_.get(), M, s.K, s.inputCols, residual, s.K, normWeight_.get(), kNormEps, nullptr, 0};
        return rmsNormQuant<E4M3FN>(r, q, scale, opt, ctx_.stream());
      }
      case ProducerKind::kGroupQuant: {
        const auto in = s.heads > 1 ? GroupQuantInput<In>::headMajor(x_.get(), M, s.heads, s.headDim, s.inputCols, s.headDim)
                                    : GroupQuantInput<In>::matrix(x_.get(), M, s.K, s.inputCols);
        return groupQuant<E4M3FN>(in, q, scale, opt, ctx_.stream());
      }
      case ProducerKind::kSiluClamp:
        return siluClampQuant<E4M3FN>(SiluClampInput<In>{x_.get(), M, s.K, s.inputCols, limit_}, q, scale, opt,
                                      ctx_.stream());
    }
    return Status::error(StatusCode::kInvalidValue, "DeviceSite::produce", "producer", "unknown producer");
  }

  /// Enqueues one call of a path: the producer emitting column-major itself
  /// (`emitColMajor`) or row-major + materialize, then (`withGemm`) the GEMM
  /// on the ColMajor{ld} view. Returns the relayout kernels it launched.
  int enqueueCall(PathBuffers& b, bool emitColMajor, index_t M, index_t ld, bool withGemm,
                  ScaleView<float, ColMajor>* viewOut) {
    const SiteShape& s = in_.shape;
    const index_t G = s.K / kGroup;
    const Fp8Matrix<E4M3FN> q{b.q.get(), M, s.K, s.K};
    ScaleView<float, ColMajor> forGemm;
    int relayouts = 0;
    if (emitColMajor) {
      auto out = produce(M, q, colMajorView(b.emitted.get(), M, G, ld).value(), b.residual.get());
      checkStatus(out.status());
      forGemm = out.value().scale;
    } else {
      auto out = produce(M, q, rowMajorView(b.emitted.get(), M, G).value(), b.residual.get());
      checkStatus(out.status());
      auto m = materialize(out.value().scale, b.relayout.get(), ld, ctx_.stream());
      checkStatus(m.status());
      forGemm = m.value();
      relayouts = forGemm.data() != b.emitted.get() ? 1 : 0;
    }
#if defined(FP8SCALE_PLATFORM_CUDA)
    if (withGemm) {
      const QuantizedTensor<E4M3FN, ColMajor> x{q, forGemm, kGroup};
      checkStatus(ctx_.gemm().run(x, weight_, b.y.get(), s.N, ctx_.stream()));
    }
#else
    (void)withGemm;  // the GEMM is the host reference, taken in run()
#endif
    if (viewOut != nullptr) *viewOut = forGemm;
    return relayouts;
  }

  GpuContext& ctx_;
  const SiteInput<In>& in_;
  const WeightSample& ws_;
  float limit_;
  int iters_;
  DeviceBuffer<In> x_, residualInit_, normWeight_;
  PathBuffers gate_, old_;
  DeviceBuffer<std::uint8_t> wq_;
  DeviceBuffer<float> wScale_;
  BlockQuantizedWeight<E4M3FN> weight_;
  std::int64_t weightMismatches_ = 0;
};

}  // namespace pipeline
}  // namespace fp8scale

#endif  // FP8SCALE_HAS_DEVICE
