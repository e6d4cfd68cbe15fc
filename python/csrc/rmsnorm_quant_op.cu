// fp8scale::rmsnorm_quant: rmsNormQuant() on torch tensors.

#include <torch/csrc/stable/library.h>

#include <optional>

#include "tensor_args.hpp"

namespace fp8scale::torch_binding {
namespace {

constexpr const char* kOp = "rmsnorm_quant";

/// x (M, K) and weight (K,) of one input dtype; q (M, K); scale
/// (M, K / group_size), row-major or column-major; residual (M, K), read and
/// overwritten with x + residual (rounded to the input dtype) before the norm;
/// norm_out (M, K) receives the normalized values in the input dtype.
void rmsNormQuantOp(Tensor x, Tensor weight, Tensor q, Tensor scale, std::optional<Tensor> residual,
                    std::optional<Tensor> normOut, double normEps, int64_t groupSize, bool scaleUe8m0, double fmax,
                    double eps, bool enablePdl) {
  std::vector<std::pair<const char*, const Tensor*>> all{{"x", &x}, {"weight", &weight}, {"q", &q}, {"scale", &scale}};
  std::vector<std::pair<const char*, const Tensor*>> outputs{{"q", &q}, {"scale", &scale}};
  if (residual) {
    all.push_back({"residual", &*residual});
    outputs.push_back({"residual", &*residual});
  }
  if (normOut) {
    all.push_back({"norm_out", &*normOut});
    outputs.push_back({"norm_out", &*normOut});
  }
  const int32_t device = commonCudaDevice(kOp, all);
  const index_t ldx = rowStride(kOp, "x", x);
  const index_t M = x.size(0), K = x.size(1);
  const index_t G = groupsOf(kOp, K, groupSize);
  expectDtype(kOp, "weight", weight, x.scalar_type());
  expectShape(kOp, "weight", weight, {K});
  if (K > 1 && weight.stride(0) != 1) fail(kOp, "weight", "must be contiguous, got strides " + strideString(weight));
  expectShape(kOp, "q", q, {M, K});
  const index_t ldq = rowStride(kOp, "q", q);
  index_t ldResidual = 0, ldNormOut = 0;
  if (residual) {
    expectDtype(kOp, "residual", *residual, x.scalar_type());
    expectShape(kOp, "residual", *residual, {M, K});
    ldResidual = rowStride(kOp, "residual", *residual);
  }
  if (normOut) {
    expectDtype(kOp, "norm_out", *normOut, x.scalar_type());
    expectShape(kOp, "norm_out", *normOut, {M, K});
    ldNormOut = rowStride(kOp, "norm_out", *normOut);
  }
  const ScaleArg s = scaleArg(kOp, "scale", scale, M, G);
  expectDisjoint(kOp, outputs, all);
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const CurrentStream cs(device);
  withInputType(kOp, "x", x, [&](auto in) {
    using In = decltype(in);
    RmsNormQuantInput<In> input =
        RmsNormQuantInput<In>::matrix(static_cast<const In*>(x.data_ptr()), M, K, ldx,
                                      static_cast<const In*>(weight.data_ptr()));
    input.normEps = static_cast<float>(normEps);
    if (residual) input = input.withResidual(static_cast<In*>(residual->data_ptr()), ldResidual);
    if (normOut) input = input.withNormOut(static_cast<In*>(normOut->data_ptr()), ldNormOut);
    withOutputs(kOp, q, M, K, ldq, s,
                [&](auto out, auto view) { check(kOp, rmsNormQuant(input, out, view, opt, cs.stream).status()); });
  });
}

}  // namespace
}  // namespace fp8scale::torch_binding

STABLE_TORCH_LIBRARY_IMPL(fp8scale, CUDA, m) {
  m.impl("rmsnorm_quant", TORCH_BOX(&fp8scale::torch_binding::rmsNormQuantOp));
}
