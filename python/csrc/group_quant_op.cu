// fp8scale::group_quant: groupQuant() on torch tensors.

#include <torch/csrc/stable/library.h>

#include "tensor_args.hpp"

namespace fp8scale::torch_binding {
namespace {

constexpr const char* kOp = "group_quant";

/// x (M, K) with contiguous rows, or (M, H, D) with stride(2) == 1 and free
/// token and head strides; q (M, K) or (M, H, D) with contiguous rows;
/// scale (M, K / group_size), row-major or column-major (scaleArg).
void groupQuantOp(Tensor x, Tensor q, Tensor scale, int64_t groupSize, bool scaleUe8m0, double fmax, double eps,
                  bool enablePdl) {
  const int32_t device = commonCudaDevice(kOp, {{"x", &x}, {"q", &q}, {"scale", &scale}});
  if (x.dim() != 2 && x.dim() != 3) fail(kOp, "x", "must be (M, K) or (M, H, D), got shape " + shapeString(x));
  const index_t M = x.size(0);
  const index_t K = x.dim() == 2 ? x.size(1) : x.size(1) * x.size(2);
  const index_t G = groupsOf(kOp, K, groupSize);
  // q: (M, K), or x's own (M, H, D) with rows of H * D contiguous bytes.
  index_t ldq = 0;
  if (q.dim() == 3 && x.dim() == 3) {
    expectShape(kOp, "q", q, {M, x.size(1), x.size(2)});
    if ((q.size(2) > 1 && q.stride(2) != 1) || (q.size(1) > 1 && q.stride(1) != q.size(2)))
      fail(kOp, "q", "must have contiguous rows of H * D elements, got strides " + strideString(q));
    ldq = M <= 1 ? K : q.stride(0);
  } else {
    expectShape(kOp, "q", q, {M, K});
    ldq = rowStride(kOp, "q", q);
  }
  const ScaleArg s = scaleArg(kOp, "scale", scale, M, G);
  expectDisjoint(kOp, {{"q", &q}, {"scale", &scale}}, {{"x", &x}, {"q", &q}, {"scale", &scale}});
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const CurrentStream cs(device);
  withInputType(kOp, "x", x, [&](auto in) {
    using In = decltype(in);
    const In* px = static_cast<const In*>(x.data_ptr());
    GroupQuantInput<In> input;
    if (x.dim() == 2) {
      input = GroupQuantInput<In>::matrix(px, M, K, rowStride(kOp, "x", x));
    } else {
      if (x.size(2) > 1 && x.stride(2) != 1)
        fail(kOp, "x", "must have contiguous heads (stride(2) == 1), got strides " + strideString(x));
      input = GroupQuantInput<In>::headMajor(px, M, x.size(1), x.size(2), M <= 1 ? K : x.stride(0),
                                             x.size(1) <= 1 ? x.size(2) : x.stride(1));
    }
    withOutputs(kOp, q, M, K, ldq, s,
                [&](auto out, auto view) { check(kOp, groupQuant(input, out, view, opt, cs.stream).status()); });
  });
}

}  // namespace
}  // namespace fp8scale::torch_binding

STABLE_TORCH_LIBRARY_IMPL(fp8scale, CUDA, m) {
  m.impl("group_quant", TORCH_BOX(&fp8scale::torch_binding::groupQuantOp));
}
