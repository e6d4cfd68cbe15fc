// fp8scale-pipeline, host path: the host reference producers
// (include/fp8scale/reference), materializeHost and the fp64 reference GEMM
// (reference/block_scaled_gemm.hpp) at the checked columns, standing in for
// the device launchers, materialize and cuBLASLt. The site code is the
// device site's, call for call; only the executor differs. Times are wall
// clock of scalar reference code: they show where the work is, not what a
// GPU takes.
#pragma once

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8scale/fp8scale.hpp"
#include "pipeline/site_checks.hpp"
#include "pipeline/site_data.hpp"

namespace fp8scale {
namespace pipeline {

/// Runs one site's two paths on the host for any M up to the input's rows.
template <class In>
class HostSite {
 public:
  /// `iters`: timed repetitions of each producer call (the median is kept).
  HostSite(const SiteInput<In>& in, const WeightSample& ws, float swigluLimit, int iters)
      : in_(in), ws_(ws), limit_(swigluLimit), iters_(std::max(1, iters)) {}

  SiteRun run(index_t M) {
    SiteRun r;
    r.M = M;
    r.ld = consumerScaleLd(kConsumer, M);
    r.transposed = gateEmitsTransposed(M);
    runPath(r.transposed, M, r.ld, r.gate, nullptr);
    runPath(false, M, r.ld, r.old, &r.rowMajorScales);
    return r;
  }

 private:
  /// One producer call on the host reference, scales through `scale`.
  template <class Layout>
  Status produce(index_t M, Fp8Matrix<E4M3FN> q, ScaleView<float, Layout> scale, In* residual) const {
    const SiteShape& s = in_.shape;
    switch (s.producer) {
      case ProducerKind::kRmsNorm: {
        const RmsNormQuantInput<In> r{in_.x.data(), M, s.K, s.inputCols, residual, s.K, in_.normWeight.data(),
                                      kNormEps, nullptr, 0};
        return reference::rmsNormQuant<E4M3FN, ScaleFp32>(r, q, scale, kGroup);
      }
      case ProducerKind::kGroupQuant:  // [M, H, D] contiguous is the matrix [M, H * D]
        return reference::groupQuant<E4M3FN, ScaleFp32>(in_.x.data(), M, s.K, s.inputCols, kGroup, q, scale);
      case ProducerKind::kSiluClamp:
        return reference::siluClampQuant<E4M3FN, ScaleFp32>(SiluClampInput<In>{in_.x.data(), M, s.K, s.inputCols, limit_},
                                                            q, scale, kGroup);
    }
    return Status::error(StatusCode::kInvalidValue, "HostSite::produce", "producer", "unknown producer");
  }

  /// One path: the producer emits column-major itself (`emitColMajor`) or
  /// row-major followed by materializeHost; then the GEMM at the checked
  /// columns reads the resulting ColMajor{ld} view.
  void runPath(bool emitColMajor, index_t M, index_t ld, PathRun& out, std::vector<float>* rowMajorOut) {
    const SiteShape& s = in_.shape;
    const index_t G = s.K / kGroup;
    const bool rmsNorm = s.producer == ProducerKind::kRmsNorm;
    out.q.assign(static_cast<std::size_t>(M * s.K), 0);
    // Scale buffers start as NaN bit patterns: padding left unwritten would show.
    std::vector<float> emitted(static_cast<std::size_t>(std::max(G * ld, M * G)), bitCast<float>(0xFFFFFFFFu));
    std::vector<float> relayout(static_cast<std::size_t>(G * ld), bitCast<float>(0xFFFFFFFFu));
    std::vector<In> residual;
    const Fp8Matrix<E4M3FN> q{out.q.data(), M, s.K, s.K};

    ScaleView<float, ColMajor> forGemm;
    auto call = [&]() {
      if (emitColMajor) {
        const auto view = colMajorView(emitted.data(), M, G, ld).value();
        if (Status st = produce(M, q, view, residual.data()); !st) throw std::runtime_error(st.message());
        forGemm = view;
      } else {
        const auto view = rowMajorView(emitted.data(), M, G).value();
        if (Status st = produce(M, q, view, residual.data()); !st) throw std::runtime_error(st.message());
        auto m = materializeHost(view, relayout.data(), ld);
        if (!m) throw std::runtime_error(m.status().message());
        forGemm = m.value();
      }
    };
    std::vector<double> seconds;
    for (int i = 0; i < iters_; ++i) {
      if (rmsNorm) residual.assign(in_.residual.begin(), in_.residual.begin() + M * s.K);  // in place: restart
      seconds.push_back(wallSeconds(call));
    }
    std::sort(seconds.begin(), seconds.end());
    out.producerUs = seconds[seconds.size() / 2] * 1e6;
    out.relayouts = forGemm.data() != emitted.data() ? 1 : 0;
    out.scales.assign(forGemm.data(), forGemm.data() + G * ld);
    if (rowMajorOut != nullptr) rowMajorOut->assign(emitted.begin(), emitted.begin() + M * G);
    if (rmsNorm) {
      out.residual.resize(residual.size() * sizeof(In));
      std::memcpy(out.residual.data(), residual.data(), out.residual.size());
    }

    // The GEMM: fp64 reference through the view, rounded to fp32 like the GPU's output.
    const std::vector<float> xv = decodeRows(out.q);
    const ScaleView<const float, ColMajor> xs = forGemm;
    const double gemmSeconds = wallSeconds([&] { out.gemmSampled = sampledGemm(xv, xs, ws_, M, s.K); });
    for (double& y : out.gemmSampled) y = static_cast<double>(static_cast<float>(y));
    out.totalUs = out.producerUs + gemmSeconds * 1e6;
  }

  const SiteInput<In>& in_;
  const WeightSample& ws_;
  float limit_;
  int iters_;
};

}  // namespace pipeline
}  // namespace fp8scale
