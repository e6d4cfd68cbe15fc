// fp8scale: the launcher instantiations of a compiled kernel library.
//
// fp8scale is header-only: a translation unit that calls a launcher
// (groupQuant<E4M3FN>(...) over a ColMajor view of bf16 input, say)
// instantiates it, and with it every kernel the launcher may pick, for each
// GPU arch it is compiled for. A program whose translation units call the
// same launchers compiles those kernels again in each of them. Such a
// program can compile each kernel once instead (docs/building.md):
//   - a few translation units of its own expand the lists below with an
//     empty PREFIX, inside namespace fp8scale, after including the header
//     that defines the launchers: explicit instantiation definitions (the
//     repository's own library is fp8scale_kernels, cmake/fp8scale_kernels.cmake);
//   - every other translation unit is compiled with FP8SCALE_KERNEL_LIBRARY
//     defined: each header that defines launchers then ends by declaring its
//     list `extern template` (FP8SCALE_DECLARE_LIBRARY_INSTANCES), so those
//     units compile calls to the launchers and none of their kernels.
// Every list that an included header declares must then be defined somewhere,
// and for the same GPU archs as the units that call it.
// Without FP8SCALE_KERNEL_LIBRARY nothing changes: the launchers are
// instantiated where they are used, as in any header-only library. A call
// that no list covers (another input type, a detail:: launcher with its own
// tuning) is instantiated where it is made either way.
//
// Macros only: the lists name fp8scale's types unqualified and are expanded
// inside namespace fp8scale, where the headers that use them have declared
// those types. platform.hpp says which GPU platform a list is for.
#pragma once

#include "../platform.hpp"

/// One producer's instantiation, for fp8 `Format`, scale `Layout` and input
/// `In`: PREFIX is empty (a definition) or `extern` (a declaration).
/// RMSNorm quant's also names the launcher of its block per row in the
/// launcher's own shape (built inside rmsNormQuant anyway), which the tests
/// call directly; its row loop (AMD's large-M kernel, which the tests on
/// CUDA hold to the launcher's bits) is a list of its own, so that a
/// CUDA library for the launchers alone can leave it out.
#define FP8SCALE_GROUP_QUANT_INSTANCE(PREFIX, Format, Layout, In)                                                   \
  PREFIX template Result<QuantizedTensor<Format, Layout>> groupQuant<Format, Layout, In>(                          \
      const GroupQuantInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>, const QuantOptions&, Stream);
#define FP8SCALE_SILU_CLAMP_QUANT_INSTANCE(PREFIX, Format, Layout, In)                                              \
  PREFIX template Result<QuantizedTensor<Format, Layout>> siluClampQuant<Format, Layout, In>(                      \
      const SiluClampInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>, const QuantOptions&, Stream);
#define FP8SCALE_RMSNORM_QUANT_INSTANCE(PREFIX, Format, Layout, In)                                                 \
  PREFIX template Result<QuantizedTensor<Format, Layout>> rmsNormQuant<Format, Layout, In>(                        \
      const RmsNormQuantInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>, const QuantOptions&, Stream);      \
  PREFIX template Status                                                                                            \
  detail::launchRmsNormQuantBlocks<Format, RmsNormPolicy<In>::kWideThreads, RmsNormPolicy<In>::kWideVecs, In,       \
                                   Layout>(const RmsNormQuantInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>, \
                                           const QuantOptions&, float, Stream, index_t);
#define FP8SCALE_RMSNORM_QUANT_ROW_LOOP_INSTANCE(PREFIX, Format, Layout, In)                                        \
  PREFIX template Status detail::launchRmsNormQuantRowLoop<Format, In, Layout>(                                     \
      const RmsNormQuantInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>, const QuantOptions&, float, Stream);

/// A producer's instantiations for one fp8 format and input type: both
/// scale layouts the producers write.
#define FP8SCALE_FORMAT_INSTANCES(PREFIX, INSTANCE, Format, In)                                                     \
  INSTANCE(PREFIX, Format, RowMajor, In)                                                                            \
  INSTANCE(PREFIX, Format, ColMajor, In)

/// A producer's instantiations for one input type: both fp8 formats.
#define FP8SCALE_PRODUCER_INSTANCES(PREFIX, INSTANCE, In)                                                           \
  FP8SCALE_FORMAT_INSTANCES(PREFIX, INSTANCE, E4M3FN, In)                                                           \
  FP8SCALE_FORMAT_INSTANCES(PREFIX, INSTANCE, E4M3FNUZ, In)

/// A producer over each input type (fp32, bf16, fp16).
#define FP8SCALE_INPUT_INSTANCES(PREFIX, INSTANCE)                                                                  \
  FP8SCALE_PRODUCER_INSTANCES(PREFIX, INSTANCE, float)                                                              \
  FP8SCALE_PRODUCER_INSTANCES(PREFIX, INSTANCE, BFloat16)                                                           \
  FP8SCALE_PRODUCER_INSTANCES(PREFIX, INSTANCE, Float16)

/// Each header's whole list. The producers: every input type, format and
/// layout. The rest as their callers use them: materialize of fp32 scales
/// from either layout; the block quant of bf16 weights into e4m3fn (the GEMM
/// consumer's callers); the fused allreduce of bf16 into e4m3fn (its tests,
/// benchmark and fp8scale-allreduce-ranks).
#define FP8SCALE_GROUP_QUANT_INSTANCES(PREFIX)                                                                      \
  FP8SCALE_INPUT_INSTANCES(PREFIX, FP8SCALE_GROUP_QUANT_INSTANCE)                                                   \
  FP8SCALE_GROUP_QUANT_EXPONENT_INSTANCES(PREFIX)
/// The producers into the exponent layouts, for their NVIDIA consumers (SM100
/// DeepGEMM, cuBLASLt / CUTLASS MXFP8): bf16 into e4m3fn (the kernels of the
/// UE8M0 rule and group sizes 32 and 128 alone, dispatchRuleAndGroup). Group
/// quant, SiLU-clamp quant and RMSNorm quant into both (the PyTorch ops'
/// scale_layout, the tests; SGLang's fused SiLU with UE8M0 scales for
/// DeepGEMM); the fused allreduce into both (its tests). Empty on AMD, whose MX GEMMs read
/// other layouts: a HIP call is instantiated where it is made.
#if defined(FP8SCALE_PLATFORM_CUDA)
#define FP8SCALE_EXPONENT_INSTANCES(PREFIX, INSTANCE)                                                               \
  INSTANCE(PREFIX, E4M3FN, PackedUe8m0, BFloat16)                                                                   \
  INSTANCE(PREFIX, E4M3FN, Swizzled128x4, BFloat16)
#define FP8SCALE_GROUP_QUANT_EXPONENT_INSTANCES(PREFIX)                                                             \
  FP8SCALE_EXPONENT_INSTANCES(PREFIX, FP8SCALE_GROUP_QUANT_INSTANCE)
#define FP8SCALE_SILU_CLAMP_QUANT_EXPONENT_INSTANCES(PREFIX)                                                        \
  FP8SCALE_EXPONENT_INSTANCES(PREFIX, FP8SCALE_SILU_CLAMP_QUANT_INSTANCE)
#define FP8SCALE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)                                                           \
  FP8SCALE_EXPONENT_INSTANCES(PREFIX, FP8SCALE_RMSNORM_QUANT_INSTANCE)
#define FP8SCALE_ALLREDUCE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)                                                 \
  FP8SCALE_EXPONENT_INSTANCES(PREFIX, FP8SCALE_ALLREDUCE_RMSNORM_QUANT_INSTANCE)
#else
#define FP8SCALE_GROUP_QUANT_EXPONENT_INSTANCES(PREFIX)
#define FP8SCALE_SILU_CLAMP_QUANT_EXPONENT_INSTANCES(PREFIX)
#define FP8SCALE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)
#define FP8SCALE_ALLREDUCE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)
#endif
#define FP8SCALE_SILU_CLAMP_QUANT_INSTANCES(PREFIX)                                                                 \
  FP8SCALE_INPUT_INSTANCES(PREFIX, FP8SCALE_SILU_CLAMP_QUANT_INSTANCE)                                              \
  FP8SCALE_SILU_CLAMP_QUANT_EXPONENT_INSTANCES(PREFIX)
#define FP8SCALE_RMSNORM_QUANT_INSTANCES(PREFIX)                                                                    \
  FP8SCALE_INPUT_INSTANCES(PREFIX, FP8SCALE_RMSNORM_QUANT_INSTANCE)                                                 \
  FP8SCALE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)
#define FP8SCALE_RMSNORM_QUANT_ROW_LOOP_INSTANCES(PREFIX)                                                           \
  FP8SCALE_INPUT_INSTANCES(PREFIX, FP8SCALE_RMSNORM_QUANT_ROW_LOOP_INSTANCE)
#define FP8SCALE_MATERIALIZE_INSTANCES(PREFIX)                                                                      \
  PREFIX template Result<ScaleView<float, ColMajor>> materialize<float, RowMajor>(ScaleView<float, RowMajor>,       \
                                                                                  float*, index_t, Stream);         \
  PREFIX template Result<ScaleView<float, ColMajor>> materialize<float, ColMajor>(ScaleView<float, ColMajor>,       \
                                                                                  float*, index_t, Stream);         \
  PREFIX template Status materialize<RowMajor, PackedUe8m0>(ScaleView<const float, RowMajor>,                       \
                                                            ScaleView<std::uint8_t, PackedUe8m0>, Stream);          \
  PREFIX template Status materialize<ColMajor, PackedUe8m0>(ScaleView<const float, ColMajor>,                       \
                                                            ScaleView<std::uint8_t, PackedUe8m0>, Stream);          \
  PREFIX template Status materialize<RowMajor, Swizzled128x4>(ScaleView<const float, RowMajor>,                     \
                                                              ScaleView<std::uint8_t, Swizzled128x4>, Stream);      \
  PREFIX template Status materialize<ColMajor, Swizzled128x4>(ScaleView<const float, ColMajor>,                     \
                                                              ScaleView<std::uint8_t, Swizzled128x4>, Stream);
#define FP8SCALE_WEIGHT_BLOCK_QUANT_INSTANCES(PREFIX)                                                               \
  PREFIX template Result<BlockQuantizedWeight<E4M3FN>> weightBlockQuant<E4M3FN, BFloat16>(                          \
      const WeightQuantInput<BFloat16>&, Fp8Matrix<E4M3FN>, ScaleView<float, RowMajor>, const WeightQuantOptions&,  \
      Stream);
#define FP8SCALE_ALLREDUCE_SUM_INSTANCES(PREFIX)                                                                    \
  PREFIX template Status allreduceSum<BFloat16>(const AllreduceCommunicator&, const BFloat16*, index_t, index_t,    \
                                                index_t, BFloat16*, index_t, Stream, AllreduceAlgorithm);
#define FP8SCALE_ALLREDUCE_RMSNORM_QUANT_INSTANCE(PREFIX, Format, Layout, In)                                       \
  PREFIX template Result<QuantizedTensor<Format, Layout>> allreduceRmsNormQuant<Format, Layout, In>(               \
      const AllreduceCommunicator&, const RmsNormQuantInput<In>&, Fp8Matrix<Format>, ScaleOutput<Layout>,      \
      const QuantOptions&, Stream, AllreduceAlgorithm);                                                             \
  PREFIX template Result<QuantizedTensor<Format, Layout>> gatheredRmsNormQuant<Format, Layout, In>(                \
      const RmsNormQuantInput<In>&, int, index_t, In*, Fp8Matrix<Format>, ScaleOutput<Layout>,                 \
      const QuantOptions&, Stream);
#define FP8SCALE_ALLREDUCE_RMSNORM_QUANT_INSTANCES(PREFIX)                                                          \
  FP8SCALE_FORMAT_INSTANCES(PREFIX, FP8SCALE_ALLREDUCE_RMSNORM_QUANT_INSTANCE, E4M3FN, BFloat16)                    \
  FP8SCALE_ALLREDUCE_RMSNORM_QUANT_EXPONENT_INSTANCES(PREFIX)

/// What each header above declares at its end: its list as `extern template`
/// declarations in a translation unit compiled with FP8SCALE_KERNEL_LIBRARY
/// (one that links the library), nothing otherwise.
#if defined(FP8SCALE_KERNEL_LIBRARY)
#define FP8SCALE_DECLARE_LIBRARY_INSTANCES(LIST) LIST(extern)
#else
#define FP8SCALE_DECLARE_LIBRARY_INSTANCES(LIST)
#endif
