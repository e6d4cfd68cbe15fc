// libfp8scale_dispatch_floor.so: ops with the schemas of fp8scale's producer
// ops and empty bodies, registered the same way (stable ABI, TORCH_BOX), for
// benchmarks/bench_ops.py: the eager cost of one of them is what torch's
// dispatch alone costs, so the ops' own host work is the difference.

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <optional>

namespace {

using torch::stable::Tensor;

void groupQuant(Tensor, Tensor, Tensor, int64_t, bool, double, double, bool) {}
void siluClampQuant(Tensor, Tensor, Tensor, double, int64_t, bool, double, double, bool) {}
void rmsNormQuant(Tensor, Tensor, Tensor, Tensor, std::optional<Tensor>, std::optional<Tensor>, double, int64_t,
                  bool, double, double, bool) {}

}  // namespace

STABLE_TORCH_LIBRARY(fp8scale_floor, m) {
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
}

STABLE_TORCH_LIBRARY_IMPL(fp8scale_floor, CUDA, m) {
  m.impl("group_quant", TORCH_BOX(&groupQuant));
  m.impl("silu_clamp_quant", TORCH_BOX(&siluClampQuant));
  m.impl("rmsnorm_quant", TORCH_BOX(&rmsNormQuant));
}
