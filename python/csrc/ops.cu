// The fp8scale op library: every schema and its CUDA implementation, each a
// launcher of fp8scale on torch tensors. One translation unit: the launchers'
// kernels are compiled in the kernel library (cmake/fp8scale_kernels.cmake),
// so what is left here is mostly parsing, paid once.
//
// Out-variant ops: each writes the caller's tensors (annotated (a!)) and
// returns nothing, so no op output aliases an input. The scale layout of
// every op is read from its scale tensor's strides (tensor_args.hpp).

#include <torch/csrc/stable/library.h>

#include <cuda_runtime.h>

#include <optional>

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
  m.def("materialize_packed_ue8m0(Tensor src, Tensor(a!) dst) -> ()");
  m.def("materialize_swizzled_128x4(Tensor src, Tensor(a!) dst) -> ()");
}

namespace fp8scale::torch_binding {
namespace {

/// The producer ops' last step, after their own checks: the scale as an
/// exponent layout (withExponentScale: bfloat16 x into float8_e4m3fn) or as a
/// float32 row-major / column-major view, `disjoint()` (the outputs' overlap
/// check), then `launch(input, out, view, stream)` on the current stream,
/// where `inputOf(In{})` is the producer's input for x's dtype and `out` the
/// fp8 q (M, cols), row stride ldq.
template <class Disjoint, class InputOf, class Launch>
void runProducer(const char* op, int32_t device, const Tensor& x, const Tensor& q, const Tensor& scale, index_t M,
                 index_t cols, index_t G, index_t ldq, bool scaleUe8m0, int64_t groupSize, Disjoint disjoint,
                 InputOf inputOf, Launch launch) {
  if (withExponentScale(op, x, q, scale, M, G, scaleUe8m0, groupSize, [&](auto view) {
        disjoint();
        const CurrentStream cs(device);
        const Fp8Matrix<E4M3FN> out{static_cast<std::uint8_t*>(q.data_ptr()), M, cols, ldq};
        check(op, launch(inputOf(BFloat16{}), out, view, cs.stream));
      }))
    return;
  const ScaleArg s = scaleArg(op, "scale", scale, M, G);
  disjoint();
  const CurrentStream cs(device);
  withInputType(op, "x", x, [&](auto in) {
    const auto input = inputOf(in);
    withOutputs(op, q, M, cols, ldq, s, [&](auto out, auto view) { check(op, launch(input, out, view, cs.stream)); });
  });
}

/// x (M, K) with contiguous rows, or (M, H, D) with stride(2) == 1 and free
/// token and head strides; q (M, K) or (M, H, D) with contiguous rows;
/// scale (M, K / group_size) float32, row-major or column-major (scaleArg),
/// or an exponent layout of the SM100 consumers: DeepGEMM's packed UE8M0
/// int32 words or the 128 x 4 swizzled UE8M0 bytes as uint8 (bfloat16 x
/// into float8_e4m3fn, scale_ue8m0 and groups of 32 or 128: the library's
/// instantiations for them; withExponentScale).
void groupQuantOp(Tensor x, Tensor q, Tensor scale, int64_t groupSize, bool scaleUe8m0, double fmax, double eps,
                  bool enablePdl) {
  constexpr const char* kOp = "group_quant";
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
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const auto inputOf = [&](auto in) {
    using In = decltype(in);
    const In* px = static_cast<const In*>(x.data_ptr());
    if (x.dim() == 2) return GroupQuantInput<In>::matrix(px, M, K, rowStride(kOp, "x", x));
    if (x.size(2) > 1 && x.stride(2) != 1)
      fail(kOp, "x", "must have contiguous heads (stride(2) == 1), got strides " + strideString(x));
    return GroupQuantInput<In>::headMajor(px, M, x.size(1), x.size(2), M <= 1 ? K : x.stride(0),
                                          x.size(1) <= 1 ? x.size(2) : x.stride(1));
  };
  runProducer(
      kOp, device, x, q, scale, M, K, G, ldq, scaleUe8m0, groupSize,
      [&] { expectDisjoint(kOp, {{"q", &q}, {"scale", &scale}}, {{"x", &x}, {"q", &q}, {"scale", &scale}}); },
      inputOf,
      [&](const auto& in, auto out, auto view, Stream st) { return groupQuant(in, out, view, opt, st).status(); });
}

/// x (M, 2 I) with contiguous rows, gate in columns [0, I) and up in
/// [I, 2 I); q (M, I); scale (M, I / group_size), row-major or column-major,
/// or an exponent layout as group_quant's.
void siluClampQuantOp(Tensor x, Tensor q, Tensor scale, double limit, int64_t groupSize, bool scaleUe8m0, double fmax,
                      double eps, bool enablePdl) {
  constexpr const char* kOp = "silu_clamp_quant";
  const int32_t device = commonCudaDevice(kOp, {{"x", &x}, {"q", &q}, {"scale", &scale}});
  const index_t ldx = rowStride(kOp, "x", x);
  const index_t M = x.size(0);
  if (x.size(1) % 2 != 0) fail(kOp, "x", "has an odd number of columns " + std::to_string(x.size(1)) + " (gate | up)");
  const index_t I = x.size(1) / 2;
  const index_t G = groupsOf(kOp, I, groupSize);
  expectShape(kOp, "q", q, {M, I});
  const index_t ldq = rowStride(kOp, "q", q);
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const auto inputOf = [&](auto in) {
    using In = decltype(in);
    return SiluClampInput<In>{static_cast<const In*>(x.data_ptr()), M, I, ldx, static_cast<float>(limit)};
  };
  runProducer(
      kOp, device, x, q, scale, M, I, G, ldq, scaleUe8m0, groupSize,
      [&] { expectDisjoint(kOp, {{"q", &q}, {"scale", &scale}}, {{"x", &x}, {"q", &q}, {"scale", &scale}}); },
      inputOf,
      [&](const auto& in, auto out, auto view, Stream st) { return siluClampQuant(in, out, view, opt, st).status(); });
}

/// x (M, K) and weight (K,) of one input dtype; q (M, K); scale
/// (M, K / group_size), row-major or column-major, or an exponent layout as
/// group_quant's; residual (M, K), read and
/// overwritten with x + residual (rounded to the input dtype) before the norm;
/// norm_out (M, K) receives the normalized values in the input dtype.
void rmsNormQuantOp(Tensor x, Tensor weight, Tensor q, Tensor scale, std::optional<Tensor> residual,
                    std::optional<Tensor> normOut, double normEps, int64_t groupSize, bool scaleUe8m0, double fmax,
                    double eps, bool enablePdl) {
  constexpr const char* kOp = "rmsnorm_quant";
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
  if (!(normEps >= 0.0)) fail(kOp, "norm_eps", "= " + std::to_string(normEps) + ": must be >= 0");
  const ScalarType xDtype = dtypeOf(kOp, "x", x);
  expectDtype(kOp, "weight", weight, xDtype);
  expectShape(kOp, "weight", weight, {K});
  if (K > 1 && weight.stride(0) != 1) fail(kOp, "weight", "must be contiguous, got strides " + strideString(weight));
  expectShape(kOp, "q", q, {M, K});
  const index_t ldq = rowStride(kOp, "q", q);
  index_t ldResidual = 0, ldNormOut = 0;
  if (residual) {
    expectDtype(kOp, "residual", *residual, xDtype);
    expectShape(kOp, "residual", *residual, {M, K});
    ldResidual = rowStride(kOp, "residual", *residual);
  }
  if (normOut) {
    expectDtype(kOp, "norm_out", *normOut, xDtype);
    expectShape(kOp, "norm_out", *normOut, {M, K});
    ldNormOut = rowStride(kOp, "norm_out", *normOut);
  }
  const QuantOptions opt = quantOptions(groupSize, scaleUe8m0, fmax, eps, enablePdl);
  const auto inputOf = [&](auto in) {
    using In = decltype(in);
    RmsNormQuantInput<In> input =
        RmsNormQuantInput<In>::matrix(static_cast<const In*>(x.data_ptr()), M, K, ldx,
                                      static_cast<const In*>(weight.data_ptr()));
    input.normEps = static_cast<float>(normEps);
    if (residual) input = input.withResidual(static_cast<In*>(residual->data_ptr()), ldResidual);
    if (normOut) input = input.withNormOut(static_cast<In*>(normOut->data_ptr()), ldNormOut);
    return input;
  };
  runProducer(
      kOp, device, x, q, scale, M, K, G, ldq, scaleUe8m0, groupSize, [&] { expectDisjoint(kOp, outputs, all); },
      inputOf,
      [&](const auto& in, auto out, auto view, Stream st) { return rmsNormQuant(in, out, view, opt, st).status(); });
}

/// The materialize ops' source: src (M, G) float32, row-major or
/// column-major, on the device of src and dst.
struct MaterializeSource {
  int32_t device = 0;
  index_t M = 0, G = 0;
  ScaleArg scale;
};

MaterializeSource materializeSource(const char* op, const Tensor& src, const Tensor& dst) {
  MaterializeSource from;
  from.device = commonCudaDevice(op, {{"src", &src}, {"dst", &dst}});
  if (src.dim() != 2) fail(op, "src", "must be 2-D (M, G), got shape " + shapeString(src));
  from.M = src.size(0);
  from.G = src.size(1);
  from.scale = scaleArg(op, "src", src, from.M, from.G);
  return from;
}

/// src (M, G) float32, row-major or column-major; dst (M, G) float32
/// column-major (1, ld), ld >= M, over a storage of G * ld floats. dst
/// receives every s(m, g) and 0 in its padding slots [M, ld). Where src
/// already addresses the bytes of ColMajor{ld} (materialize() would return
/// it as is), those G * ld slots are copied.
void materializeOp(Tensor src, Tensor dst) {
  constexpr const char* kOp = "materialize";
  const MaterializeSource from = materializeSource(kOp, src, dst);
  const index_t G = from.G;
  const ScaleArg to = scaleArg(kOp, "dst", dst, from.M, G, /*preferColumnMajor=*/true);
  if (!to.columnMajor)
    fail(kOp, "dst", "has strides " + strideString(dst) + ": expected column-major (1, ld) with ld >= M");
  const index_t ld = to.ld;
  expectDisjoint(kOp, {{"dst", &dst}}, {{"src", &src}});
  const CurrentStream cs(from.device);
  withScaleView(kOp, from.scale, [&](auto view) {
    auto out = materialize(view, to.data, ld, cs.stream);
    check(kOp, out.status());
    if (out.value().data() != to.data && G * ld > 0) {
      // The bytes were already ColMajor{ld}: no relayout, a copy of them.
      if (from.scale.columnMajor) expectStorageHolds(kOp, "src", src, G * ld - 1, "its [G][ld] block with padding");
      const cudaError_t e = cudaMemcpyAsync(to.data, out.value().data(), static_cast<size_t>(G * ld) * sizeof(float),
                                            cudaMemcpyDeviceToDevice, cs.stream);
      if (e != cudaSuccess) check(kOp, Status::fromDevice(kOp, e));
    }
  });
}

/// src (M, G) float32 UE8M0-rule scales, row-major or column-major, into
/// dst in an exponent layout (`parseDst(op, "dst", dst, M, G)` gives its
/// view: packedUe8m0Arg or swizzled128x4Arg), every padding byte 0.
template <class ParseDst>
void materializeExponents(const char* op, const Tensor& src, const Tensor& dst, ParseDst parseDst) {
  const MaterializeSource from = materializeSource(op, src, dst);
  const auto to = parseDst(op, "dst", dst, from.M, from.G);
  expectDisjoint(op, {{"dst", &dst}}, {{"src", &src}});
  const CurrentStream cs(from.device);
  withScaleView(op, from.scale, [&](auto v) { check(op, materialize(v, to, cs.stream)); });
}

/// dst: the int32 (M, ceil(G / 4)) tensor with strides (1, ld), ld >=
/// align(M, 4) and a multiple of 4, over ceil(G / 4) * ld words: DeepGEMM's
/// packed UE8M0 scales (byte g % 4 of word (g / 4) * ld + m is the exponent
/// of s(m, g)).
void materializePackedUe8m0Op(Tensor src, Tensor dst) {
  materializeExponents("materialize_packed_ue8m0", src, dst, packedUe8m0Arg);
}

/// dst: the contiguous 1-D uint8 tensor of align(M, 128) * align(G, 4)
/// bytes (the Python API's float8_e8m0fnu tensor viewed as bytes:
/// swizzled128x4Arg): the 128 x 4 swizzled scales of cuBLASLt's
/// VEC32_UE8M0 mode and F.scaled_mm's SWIZZLE_32_4_4.
void materializeSwizzled128x4Op(Tensor src, Tensor dst) {
  materializeExponents("materialize_swizzled_128x4", src, dst, swizzled128x4Arg);
}

}  // namespace
}  // namespace fp8scale::torch_binding

STABLE_TORCH_LIBRARY_IMPL(fp8scale, CUDA, m) {
  m.impl("group_quant", TORCH_BOX(&fp8scale::torch_binding::groupQuantOp));
  m.impl("silu_clamp_quant", TORCH_BOX(&fp8scale::torch_binding::siluClampQuantOp));
  m.impl("rmsnorm_quant", TORCH_BOX(&fp8scale::torch_binding::rmsNormQuantOp));
  m.impl("materialize", TORCH_BOX(&fp8scale::torch_binding::materializeOp));
  m.impl("materialize_packed_ue8m0", TORCH_BOX(&fp8scale::torch_binding::materializePackedUe8m0Op));
  m.impl("materialize_swizzled_128x4", TORCH_BOX(&fp8scale::torch_binding::materializeSwizzled128x4Op));
}
