// libfp8scale_launcher_shim.so: the C++ producer launchers behind a bare C
// interface, for ctypes. The torch ops' tests compare the ops' bytes with the
// launchers' own on the same input, and the benchmarks compare the ops' cost
// with a call that has no torch in it. Raw pointers and extents in, the
// launcher's Status out: no checks of its own beyond what the launchers do.
// bfloat16 input only (the engines' activation dtype); not installed.

#include <fp8scale/fp8scale.hpp>

#include <cstdint>
#include <cstring>

extern "C" {

/// The fp8 output and the scale destination of one call.
struct fp8scale_shim_outputs {
  void* q;                 ///< fp8 bytes, rows of ldq
  std::int64_t ldq;        ///< q's row stride, elements
  std::int32_t e4m3fnuz;   ///< 0: e4m3fn, 1: e4m3fnuz
  std::int32_t col_major;  ///< 0: row-major scales, 1: column-major
  float* scale;            ///< s(m, g) at m * ld + g (row-major) or g * ld + m
  std::int64_t ld;         ///< the scale view's leading dimension
};

/// QuantOptions.
struct fp8scale_shim_options {
  std::int32_t group_size;
  std::int32_t ue8m0;
  float fmax;  ///< 0: the format's max
  float eps;
  std::int32_t enable_pdl;
};

}  // extern "C"

namespace {

using namespace fp8scale;

int report(const Status& s, char* err, std::int64_t errLen) {
  if (!s && err != nullptr && errLen > 0) {
    std::strncpy(err, s.message().c_str(), static_cast<std::size_t>(errLen - 1));
    err[errLen - 1] = '\0';
  }
  return static_cast<int>(s.code());
}

QuantOptions optionsOf(const fp8scale_shim_options& o) {
  QuantOptions q;
  q.groupSize = o.group_size;
  q.rule = o.ue8m0 ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
  q.fmax = o.fmax;
  q.eps = o.eps;
  q.programmaticLaunch = o.enable_pdl != 0;
  return q;
}

/// f(q as Fp8Matrix<Format>, the scale as its ScaleView) -> Status.
template <class F>
Status withOutputs(const fp8scale_shim_outputs& o, index_t rows, index_t cols, index_t groups, F&& f) {
  auto withView = [&](auto out) -> Status {
    if (o.col_major) {
      auto v = colMajorView(o.scale, rows, groups, o.ld);
      return v ? f(out, v.value()) : v.status();
    }
    auto v = rowMajorView(o.scale, rows, groups, o.ld);
    return v ? f(out, v.value()) : v.status();
  };
  auto* q = static_cast<std::uint8_t*>(o.q);
  if (o.e4m3fnuz) return withView(Fp8Matrix<E4M3FNUZ>{q, rows, cols, o.ldq});
  return withView(Fp8Matrix<E4M3FN>{q, rows, cols, o.ldq});
}

index_t groupsOf(index_t cols, const fp8scale_shim_options& o) { return o.group_size > 0 ? cols / o.group_size : 0; }

}  // namespace

extern "C" {

/// groupQuant over x (M, K) bf16 with row stride ldx.
int fp8scale_shim_group_quant(const void* x, std::int64_t M, std::int64_t K, std::int64_t ldx,
                              const fp8scale_shim_outputs* out, const fp8scale_shim_options* opt, void* stream,
                              char* err, std::int64_t errLen) {
  const auto input = GroupQuantInput<BFloat16>::matrix(static_cast<const BFloat16*>(x), M, K, ldx);
  const QuantOptions o = optionsOf(*opt);
  return report(withOutputs(*out, M, K, groupsOf(K, *opt),
                            [&](auto q, auto view) {
                              return groupQuant(input, q, view, o, static_cast<Stream>(stream)).status();
                            }),
                err, errLen);
}

/// siluClampQuant over x (M, 2 I) bf16 (gate | up) with row stride ldx.
int fp8scale_shim_silu_clamp_quant(const void* x, std::int64_t M, std::int64_t I, std::int64_t ldx, float limit,
                                   const fp8scale_shim_outputs* out, const fp8scale_shim_options* opt, void* stream,
                                   char* err, std::int64_t errLen) {
  const SiluClampInput<BFloat16> input{static_cast<const BFloat16*>(x), M, I, ldx, limit};
  const QuantOptions o = optionsOf(*opt);
  return report(withOutputs(*out, M, I, groupsOf(I, *opt),
                            [&](auto q, auto view) {
                              return siluClampQuant(input, q, view, o, static_cast<Stream>(stream)).status();
                            }),
                err, errLen);
}

/// rmsNormQuant over x (M, K) bf16 and weight (K,); residual and norm_out
/// may be null.
int fp8scale_shim_rmsnorm_quant(const void* x, std::int64_t M, std::int64_t K, std::int64_t ldx, const void* weight,
                                float normEps, void* residual, std::int64_t ldResidual, void* normOut,
                                std::int64_t ldNormOut, const fp8scale_shim_outputs* out,
                                const fp8scale_shim_options* opt, void* stream, char* err, std::int64_t errLen) {
  auto input = RmsNormQuantInput<BFloat16>::matrix(static_cast<const BFloat16*>(x), M, K, ldx,
                                                   static_cast<const BFloat16*>(weight));
  input.normEps = normEps;
  if (residual != nullptr) input = input.withResidual(static_cast<BFloat16*>(residual), ldResidual);
  if (normOut != nullptr) input = input.withNormOut(static_cast<BFloat16*>(normOut), ldNormOut);
  const QuantOptions o = optionsOf(*opt);
  return report(withOutputs(*out, M, K, groupsOf(K, *opt),
                            [&](auto q, auto view) {
                              return rmsNormQuant(input, q, view, o, static_cast<Stream>(stream)).status();
                            }),
                err, errLen);
}

}  // extern "C"
