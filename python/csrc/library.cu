// The fp8scale op library: every schema, and fp8scale::materialize.
//
// Out-variant ops: each writes the caller's tensors (annotated (a!)) and
// returns nothing, so no op output aliases an input. The scale layout of
// every op is read from its scale tensor's strides (tensor_args.hpp).

#include <torch/csrc/stable/library.h>

#include <cuda_runtime.h>

#include "tensor_args.hpp"

STABLE_TORCH_LIBRARY(fp8scale, m) {
  m.def(
      "group_quant(Tensor x, Tensor(a!) q, Tensor(b!) scale, int group_size=128, bool scale_ue8m0=False, "
      "float fmax=0.0, float eps=1e-10, bool enable_pdl=False) -> ()");
  m.def(
      "silu_clamp_quant(Tensor x, Tensor(a!) q, Tensor(b!) scale, float limit=0.0, int group_size=128, "
      "bool scale_ue8m0=False, float fmax=0.0, float eps=1e-10, bool enable_pdl=False) -> ()");
  m.def(
      "rmsnorm_quant(Tensor x, Tensor weight, Tensor(a!) q, Tensor(b!) scale, Tensor(c!)? residual=None, "
      "Tensor(d!)? norm_out=None, float norm_eps=1e-6, int group_size=128, bool scale_ue8m0=False, "
      "float fmax=0.0, float eps=1e-10, bool enable_pdl=False) -> ()");
  m.def("materialize(Tensor src, Tensor(a!) dst) -> ()");
}

namespace fp8scale::torch_binding {
namespace {

constexpr const char* kOp = "materialize";

/// src (M, G) float32, row-major or column-major; dst (M, G) float32
/// column-major (1, ld), ld >= M, over a storage of G * ld floats. dst
/// receives every s(m, g) and 0 in its padding slots [M, ld). Where src
/// already addresses the bytes of ColMajor{ld} (materialize() would return
/// it as is), those G * ld slots are copied.
void materializeOp(Tensor src, Tensor dst) {
  const int32_t device = commonCudaDevice(kOp, {{"src", &src}, {"dst", &dst}});
  if (src.dim() != 2) fail(kOp, "src", "must be 2-D (M, G), got shape " + shapeString(src));
  const index_t M = src.size(0), G = src.size(1);
  const ScaleArg from = scaleArg(kOp, "src", src, M, G);
  const ScaleArg to = scaleArg(kOp, "dst", dst, M, G, /*preferColumnMajor=*/true);
  if (!to.columnMajor)
    fail(kOp, "dst", "has strides " + strideString(dst) + ": expected column-major (1, ld) with ld >= M");
  const index_t ld = to.ld;
  expectDisjoint(kOp, {{"dst", &dst}}, {{"src", &src}});
  const CurrentStream cs(device);
  withScaleView(kOp, from, [&](auto view) {
    auto out = materialize(view, to.data, ld, cs.stream);
    check(kOp, out.status());
    if (out.value().data() != to.data && G * ld > 0) {
      // The bytes were already ColMajor{ld}: no relayout, a copy of them.
      if (from.columnMajor) expectStorageHolds(kOp, "src", src, G * ld - 1, "its [G][ld] block with padding");
      const cudaError_t e = cudaMemcpyAsync(to.data, out.value().data(), static_cast<size_t>(G * ld) * sizeof(float),
                                            cudaMemcpyDeviceToDevice, cs.stream);
      if (e != cudaSuccess) check(kOp, Status::fromDevice(kOp, e));
    }
  });
}

}  // namespace
}  // namespace fp8scale::torch_binding

STABLE_TORCH_LIBRARY_IMPL(fp8scale, CUDA, m) {
  m.impl("materialize", TORCH_BOX(&fp8scale::torch_binding::materializeOp));
}
