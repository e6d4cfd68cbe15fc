// The library's AMD device kernels, instantiated explicitly so that a
// device-only compile puts each one in the code object, where
// check_code_object.py reads its registers, spills and instructions.
// Built by CMakeLists.txt in this folder (hip_compat.h is force-included).
// Beside the HIP build of the suite it is compiled with
// FP8SCALE_KERNEL_LIBRARY: the launchers of the kernel library
// (detail/kernel_instances.hpp) are then declared extern, and their kernels,
// checked in the suite's binaries, are not compiled here again.
#include <cstdint>

#include <fp8scale/fp8.hpp>
#include <fp8scale/layout_policy.hpp>
#include <fp8scale/scale_view.hpp>

namespace fp8scale_isa {

/// Converts in[2i], in[2i + 1] to the two bytes of out[i] through cvtPack2,
/// so the code object shows which conversion path each format takes on each
/// arch (the v_cvt_pk_fp8_f32 instruction or the software encode).
/// in: [2 * pairs] floats; out: [pairs] packed fp8 pairs.
template <class Format>
__global__ void fp8ConvertKernel(const float* in, std::uint16_t* out, fp8scale::index_t pairs) {
  const fp8scale::index_t i =
      static_cast<fp8scale::index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  out[i] = fp8scale::cvtPack2<Format>(in[2 * i], in[2 * i + 1]).bits;  // [pairs]
}

template __global__ void fp8ConvertKernel<fp8scale::E4M3FN>(const float*, std::uint16_t*,
                                                            fp8scale::index_t);
template __global__ void fp8ConvertKernel<fp8scale::E4M3FNUZ>(const float*, std::uint16_t*,
                                                              fp8scale::index_t);

}  // namespace fp8scale_isa

// Relayout kernels behind fp8scale::materialize(): fp32 scales from both
// source layouts, and packed UE8M0 exponents (one byte per scale).
template __global__ void fp8scale::detail::materializeKernel<float, fp8scale::RowMajor>(
    fp8scale::ScaleView<const float, fp8scale::RowMajor>, fp8scale::ScaleView<float, fp8scale::ColMajor>);
template __global__ void fp8scale::detail::materializeKernel<float, fp8scale::ColMajor>(
    fp8scale::ScaleView<const float, fp8scale::ColMajor>, fp8scale::ScaleView<float, fp8scale::ColMajor>);
template __global__ void fp8scale::detail::materializeKernel<std::uint8_t, fp8scale::RowMajor>(
    fp8scale::ScaleView<const std::uint8_t, fp8scale::RowMajor>,
    fp8scale::ScaleView<std::uint8_t, fp8scale::ColMajor>);

// Every producer instantiation: each launcher instantiates its kernels for
// both scale rules and the three group sizes (the small-M column-major
// kernels twice: with the padding tile's code and without), so these 12
// launcher instantiations per producer cover input type x format x rule x
// group size x TRANSPOSE_SCALE x launch shape.
#include <fp8scale/producers/group_quant.hpp>
#include <fp8scale/producers/rmsnorm_quant.hpp>
#include <fp8scale/producers/silu_clamp_quant.hpp>

namespace fp8scale_isa {

template <class In, class Format, class Layout>
void instantiateProducers() {
  using namespace fp8scale;
  const QuantOptions opt;
  const Fp8Matrix<Format> q{};
  const ScaleView<float, Layout> scale{};
  (void)groupQuant<Format>(GroupQuantInput<In>{}, q, scale, opt, nullptr);
  (void)siluClampQuant<Format>(SiluClampInput<In>{}, q, scale, opt, nullptr);
  (void)rmsNormQuant<Format>(RmsNormQuantInput<In>{}, q, scale, opt, nullptr);
}

#define FP8SCALE_ISA_PRODUCERS(In)                                                             \
  template void instantiateProducers<In, fp8scale::E4M3FN, fp8scale::RowMajor>();             \
  template void instantiateProducers<In, fp8scale::E4M3FN, fp8scale::ColMajor>();             \
  template void instantiateProducers<In, fp8scale::E4M3FNUZ, fp8scale::RowMajor>();           \
  template void instantiateProducers<In, fp8scale::E4M3FNUZ, fp8scale::ColMajor>();
FP8SCALE_ISA_PRODUCERS(float)
FP8SCALE_ISA_PRODUCERS(fp8scale::BFloat16)
FP8SCALE_ISA_PRODUCERS(fp8scale::Float16)
#undef FP8SCALE_ISA_PRODUCERS

// rmsNormQuant's launch plan as AMD builds it (the host tests check CUDA's):
// blocks of whole wave64s, the row loop where CUDA runs the staged kernel,
// and the row loop for short rows past HIP's 2^32 - 1 threads a grid.
namespace plan {
using fp8scale::BFloat16;
using fp8scale::RmsNormKernel;
using fp8scale::detail::rmsNormQuantLaunch;
constexpr bool is(fp8scale::RmsNormLaunch got, RmsNormKernel kernel, fp8scale::index_t threads) {
  return got.kernel == kernel && got.threads == threads;
}
static_assert(is(rmsNormQuantLaunch<BFloat16>(1, 2176), RmsNormKernel::kBlockPerRow, 320), "272 vectors: 5 waves");
static_assert(is(rmsNormQuantLaunch<BFloat16>(1023, 7168), RmsNormKernel::kBlockPerRow, 896), "below kRowsMinRows");
static_assert(is(rmsNormQuantLaunch<BFloat16>(1024, 7168), RmsNormKernel::kRowLoop, 256), "no staged kernel on AMD");
static_assert(is(rmsNormQuantLaunch<BFloat16>(16777214, 2048), RmsNormKernel::kBlockPerRow, 256),
              "(M + 1) x 256 threads fit 2^32 - 1");
static_assert(is(rmsNormQuantLaunch<BFloat16>(16777215, 2048), RmsNormKernel::kRowLoop, 256), "one row more");
}  // namespace plan

}  // namespace fp8scale_isa

// The fused allreduce + residual + RMSNorm + group quant: the
// one-stage, two-stage and gathered (fallback) kernels of every input type x
// format x rule x group size x TRANSPOSE_SCALE, through the launchers, and the
// allreduce-only kernels the long-row path and allreduceSum() launch.
#include <fp8scale/producers/allreduce_rmsnorm_quant.hpp>

namespace fp8scale_isa {

template <class In, class Format, class Layout>
void instantiateAllreduce() {
  using namespace fp8scale;
  const QuantOptions opt;
  const Fp8Matrix<Format> q{};
  const ScaleView<float, Layout> scale{};
  const AllreduceCommunicator* comm = nullptr;
  (void)allreduceRmsNormQuant<Format>(*comm, RmsNormQuantInput<In>{}, q, scale, opt, nullptr);
  (void)gatheredRmsNormQuant<Format>(RmsNormQuantInput<In>{}, 1, 0, static_cast<In*>(nullptr), q, scale, opt,
                                     nullptr);
}

#define FP8SCALE_ISA_ALLREDUCE(In)                                                             \
  template void instantiateAllreduce<In, fp8scale::E4M3FN, fp8scale::RowMajor>();             \
  template void instantiateAllreduce<In, fp8scale::E4M3FN, fp8scale::ColMajor>();             \
  template void instantiateAllreduce<In, fp8scale::E4M3FNUZ, fp8scale::RowMajor>();           \
  template void instantiateAllreduce<In, fp8scale::E4M3FNUZ, fp8scale::ColMajor>();
FP8SCALE_ISA_ALLREDUCE(float)
FP8SCALE_ISA_ALLREDUCE(fp8scale::BFloat16)
FP8SCALE_ISA_ALLREDUCE(fp8scale::Float16)
#undef FP8SCALE_ISA_ALLREDUCE

}  // namespace fp8scale_isa
