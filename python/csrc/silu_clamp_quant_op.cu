// fp8scale::silu_clamp_quant: siluClampQuant() on torch tensors.

#include <torch/csrc/stable/library.h>

#include "tensor_args.hpp"

namespace fp8scale::torch_binding {
namespace {

constexpr const char* kOp = "silu_clamp_quant";

/// x (M, 2 I) with contiguous rows, gate in columns [0, I) and up in
/// [I, 2 I); q (M, I); scale (M, I / group_size), row-major or column-major.
void siluClampQuantOp(Tensor x, Tensor q, Tensor scale, double limit, int64_t groupSize, bool scaleUe8m0, double fmax,
                      double eps, bool enablePdl) {
  const int32_t device = commonCudaDevice(kOp, {{"x", &x}, {"q", &q}, {"scale", &scale}});
  const index_t ldx = rowStride(kOp, "x", x);
  const index_t M = x.size(0);
  if (x.size(1) % 2 != 0) fail(kOp, "x", "has an odd number of columns " + std::to_string(x.size(1)) + " (gate | up)");
  const index_t I = x.size(1) / 2;
  const index_t G = groupsOf(kOp, I, groupSize);
  expectShape(kOp, "q", q, {M, I});
  const index_t ldq = rowStride(kOp, "q", q);
  const ScaleArg s = scaleArg(kOp, "scale", scale, M, G);
  expectDisjoint(kOp, {{"q", &q}, {"scale", &scale}}, {{"x", &x}, {"q", &q}, {"scale", &scale}});
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const CurrentStream cs(device);
  withInputType(kOp, "x", x, [&](auto in) {
    using In = decltype(in);
    const SiluClampInput<In> input{static_cast<const In*>(x.data_ptr()), M, I, ldx, static_cast<float>(limit)};
    withOutputs(kOp, q, M, I, ldq, s,
                [&](auto out, auto view) { check(kOp, siluClampQuant(input, out, view, opt, cs.stream).status()); });
  });
}

}  // namespace
}  // namespace fp8scale::torch_binding

STABLE_TORCH_LIBRARY_IMPL(fp8scale, CUDA, m) {
  m.impl("silu_clamp_quant", TORCH_BOX(&fp8scale::torch_binding::siluClampQuantOp));
}
