// fp8scale: the single layout-policy header.
//
// Every producer site asks one question, emitTransposed(consumer, m): should
// the producer write its scales column-major itself (TRANSPOSE_SCALE = true),
// in the ld the consumer reads? When the answer is false but the consumer
// still reads column-major, the site calls materialize(), a row-major ->
// column-major relayout that is a no-op (no launch, same pointer) when the
// bytes already are what the consumer reads.
//
// The SM100 consumers read UE8M0 exponent bytes instead (DeepGEMM's packed
// words, the 128 x 4 tiles of MXFP8): consumerScaleLayout(consumer) names the
// layout, which group quant and SiLU-clamp quant write themselves, and which
// materialize(src, dst, stream) produces from fp32 UE8M0 scales otherwise.
//
// The bpreshuffle form emitTransposed(m, onBpreshuffleGfx95) follows sglang's
// fp8_utils (emit_transposed_bpreshuffle_scale,
// materialize_bpreshuffle_fp8_scale): transposed emission only for M >= 2,
// because at M == 1 both layouts are the same bytes.
#pragma once

#include <cstdint>
#include <string>

#include "platform.hpp"
#include "scale_math.hpp"
#include "scale_view.hpp"
#include "status.hpp"
#include "detail/kernel_instances.hpp"

namespace fp8scale {

// ---------------------------------------------------------------------------
// Consumers and what they read.
// ---------------------------------------------------------------------------

/// The block-scaled GEMM that reads the activation scales.
enum class ScaleConsumer : std::uint8_t {
  kRowMajor,          ///< reads (M, G) row-major (gfx942 blockscale GEMM, most Triton GEMMs)
  kBpreshuffleGfx95,  ///< aiter gemm_a8w8_blockscale_bpreshuffle on gfx950: [G][M], ld == M exactly
  kCublasLtVec128,    ///< cuBLASLt CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F (sm_90, CUDA >= 12.9)
  kDeepGemmTma,       ///< DeepGEMM-style TMA loads: [G][align(M, 4)]
  kDeepGemmSm100,     ///< DeepGEMM's SM100 FP8 GEMMs: packed UE8M0 words (PackedUe8m0, ld = align(M, 4))
  kMxfp8Swizzled,     ///< Blackwell MXFP8 block-scaled MMA (cuBLASLt VEC32_UE8M0, CUTLASS): Swizzled128x4
};

/// The scale layouts a consumer reads: the fp32 ones (TRANSPOSE_SCALE false
/// or true) and the UE8M0 exponent layouts.
enum class ScaleLayoutKind : std::uint8_t {
  kRowMajor,       ///< RowMajor fp32
  kColumnMajor,    ///< ColMajor fp32, ld = consumerScaleLd()
  kPackedUe8m0,    ///< PackedUe8m0 exponent bytes, ld = align(M, 4) words
  kSwizzled128x4,  ///< Swizzled128x4 exponent bytes
};

/// The layout `c` reads its activation scales in: what a producer feeding it
/// writes (directly, or through materialize). Keyed on the consumer, never on
/// the device: a consumer that reads row-major gets row-major on any GPU.
FP8SCALE_HOST_DEVICE constexpr ScaleLayoutKind consumerScaleLayout(ScaleConsumer c) {
  return c == ScaleConsumer::kRowMajor         ? ScaleLayoutKind::kRowMajor
         : c == ScaleConsumer::kDeepGemmSm100  ? ScaleLayoutKind::kPackedUe8m0
         : c == ScaleConsumer::kMxfp8Swizzled  ? ScaleLayoutKind::kSwizzled128x4
                                               : ScaleLayoutKind::kColumnMajor;
}

/// Whether `c` reads UE8M0 exponent bytes (the producer then takes
/// ScaleRule::kUE8M0 and a group of 128 for DeepGEMM, 32 for MXFP8).
FP8SCALE_HOST_DEVICE constexpr bool consumerReadsExponents(ScaleConsumer c) {
  return consumerScaleLayout(c) == ScaleLayoutKind::kPackedUe8m0 ||
         consumerScaleLayout(c) == ScaleLayoutKind::kSwizzled128x4;
}

/// True for the gfx95 family (MI350 / MI355X), from a gcnArchName such as
/// "gfx950:sramecc+:xnack-". Features after ':' are ignored.
inline bool isGfx95Arch(const std::string& archName) {
  const std::string base = archName.substr(0, archName.find(':'));
  return base.size() >= 5 && base.compare(0, 5, "gfx95") == 0;
}

/// The consumer of fp32 scales a device's default blockscale GEMM path uses:
/// gfx95 -> bpreshuffle; other AMD -> row-major; NVIDIA compute capability
/// >= 9.0 -> TMA-aligned column-major (DeepGEMM; cuBLASLt accepts the same
/// buffer when M is padded to a multiple of 4); older NVIDIA -> row-major.
/// Never an exponent consumer (kDeepGemmSm100, kMxfp8Swizzled): those take
/// the UE8M0 rule and their own group size, a numerics choice a site makes
/// by naming its GEMM, not one a device query may make for it.
inline ScaleConsumer detectScaleConsumer(const DeviceInfo& device) {
  if (device.isAmd) return isGfx95Arch(device.archName) ? ScaleConsumer::kBpreshuffleGfx95 : ScaleConsumer::kRowMajor;
  return device.ccMajor >= 9 ? ScaleConsumer::kDeepGemmTma : ScaleConsumer::kRowMajor;
}

/// The gate's second argument for a device.
inline bool onBpreshuffleGfx95(const DeviceInfo& device) {
  return detectScaleConsumer(device) == ScaleConsumer::kBpreshuffleGfx95;
}

/// Whether the consumer reads column-major fp32 scales.
FP8SCALE_HOST_DEVICE constexpr bool consumerIsColumnMajor(ScaleConsumer c) {
  return consumerScaleLayout(c) == ScaleLayoutKind::kColumnMajor;
}

/// The column-major ld the consumer reads for M rows:
///   kBpreshuffleGfx95 : M (the CK kernels ignore strides; ld must be exactly M)
///   kCublasLtVec128   : align(M, 4) (cuBLASLt needs the scale operand's row count
///                       a multiple of 4 with stride equal to it: the GEMM then
///                       runs on the padded M)
///   kDeepGemmTma      : align(M, 4) (16-byte TMA rows of fp32)
///   kDeepGemmSm100    : align(M, 4) (int32 words of the packed layout)
///   kRowMajor, kMxfp8Swizzled : 0 (no ld applies)
FP8SCALE_HOST_DEVICE constexpr index_t consumerScaleLd(ScaleConsumer c, index_t m) {
  return c == ScaleConsumer::kBpreshuffleGfx95 ? m
         : (c == ScaleConsumer::kCublasLtVec128 || c == ScaleConsumer::kDeepGemmTma ||
            c == ScaleConsumer::kDeepGemmSm100)
             ? alignUp(m, 4)
             : 0;
}

// ---------------------------------------------------------------------------
// The gate.
// ---------------------------------------------------------------------------

/// The gate every producer site asks: whether a producer feeding `consumer`
/// should emit its scales column-major (TRANSPOSE_SCALE = true) with
/// ld = consumerScaleLd(consumer, m). True when the consumer reads
/// column-major and row-major bytes are not already its bytes: for M >= 2,
/// and at M == 1 for consumers with a padded ld (cuBLASLt, DeepGEMM read
/// ld = align(1, 4) = 4, whose padding slots a row-major emission lacks).
/// False for kRowMajor and for m < 1; false for the exponent consumers too,
/// whose producers write consumerScaleLayout() directly (the fp32
/// transposed emission is not their bytes).
FP8SCALE_HOST_DEVICE constexpr bool emitTransposed(ScaleConsumer consumer, index_t m) {
  return consumerIsColumnMajor(consumer) && (m >= 2 || (m == 1 && consumerScaleLd(consumer, m) != m));
}

/// The bpreshuffle form of the gate (sglang's
/// emit_transposed_bpreshuffle_scale): onBpreshuffleGfx95 && m >= 2, i.e.
/// emitTransposed(ScaleConsumer::kBpreshuffleGfx95, m) on that path and
/// false elsewhere. One row is the same bytes in either layout.
FP8SCALE_HOST_DEVICE constexpr bool emitTransposed(index_t m, bool onBpreshuffleGfx95) {
  return onBpreshuffleGfx95 && emitTransposed(ScaleConsumer::kBpreshuffleGfx95, m);
}

// ---------------------------------------------------------------------------
// materialize: relayout to ColMajor{ld}.
// ---------------------------------------------------------------------------

namespace detail {

/// Whether a view already addresses every (m, g) exactly where ColMajor{ld}
/// does, with no padding to fill: then materialize returns it without a copy.
template <class T>
constexpr bool sameBytesAsColMajor(const ScaleView<T, ColMajor>& v, index_t ld) {
  return v.ld() == ld;
}
template <class T>
constexpr bool sameBytesAsColMajor(const ScaleView<T, RowMajor>& v, index_t ld) {
  if (ld != v.rows() && v.cols() > 0) return false;  // padding slots to write (M == 0 included)
  if (v.empty()) return true;
  // m * rowLd + g == g * M + m for all (m, g): one row (ld == M == 1), or one
  // group with unit row stride.
  return v.rows() == 1 || (v.cols() == 1 && v.ld() == 1);
}

/// Validation shared by the host and device versions. On success `out` is the
/// view materialize returns and `copy` says whether bytes must move.
template <class T, class SrcLayout>
Status planMaterialize(const char* fn, const ScaleView<T, SrcLayout>& src, T* dst, index_t ld,
                       ScaleView<T, ColMajor>& out, bool& copy) {
  if (ld < src.rows())
    return Status::error(StatusCode::kLdTooSmall, fn, "ld", "column-major ld is smaller than rows", ld, src.rows());
  const index_t dstSpan = spanMul(src.cols(), ld);  // every slot of ColMajor{ld}, padding included
  if (Status s = checkSpan(fn, "ld", dst, dstSpan, sizeof(T)); !s) return s;
  if (sameBytesAsColMajor(src, ld)) {
    out = ScaleView<T, ColMajor>::fromValidated(src.data(), src.rows(), src.cols(), ColMajor{ld});
    copy = false;
    return Status::ok();
  }
  if (dst == nullptr) return Status::error(StatusCode::kNullPointer, fn, "dst", "null destination for a relayout");
  if (Status s = checkAligned(fn, "dst", dst, static_cast<int>(alignof(T)), "pointer is not aligned to the element type"); !s)
    return s;
  const auto* s0 = reinterpret_cast<const unsigned char*>(src.data());
  const auto* s1 = reinterpret_cast<const unsigned char*>(src.data() + src.requiredSpan());
  const auto* d0 = reinterpret_cast<const unsigned char*>(dst);
  const auto* d1 = reinterpret_cast<const unsigned char*>(dst + dstSpan);
  if (d0 < s1 && s0 < d1)
    return Status::error(StatusCode::kInvalidValue, fn, "dst", "destination overlaps the source; relayout is not in place");
  out = ScaleView<T, ColMajor>::fromValidated(dst, src.rows(), src.cols(), ColMajor{ld});
  copy = true;
  return Status::ok();
}

}  // namespace detail

/// Already column-major, no ld requested: the same view. Resolved at compile
/// time from the view's type; no code runs.
template <class T>
FP8SCALE_HOST_DEVICE constexpr ScaleView<T, ColMajor> materialize(ScaleView<T, ColMajor> src) {
  return src;
}

/// Host version of materialize (the reference): dst(m, g) = src(m, g) for every
/// (m, g) and dst slots [M, ld) of each column = 0.
///
/// @param src  row-major or column-major (M, G) view
/// @param dst  buffer of at least G * ld elements (unused when no copy is
///             needed; at M == 0 with ld > 0 the result is all padding slots,
///             written to dst, so dst is needed there)
/// @param ld   the consumer's column-major ld (>= M), see consumerScaleLd()
/// @return the ColMajor{ld} view: `src`'s own pointer when its bytes already
///         are that layout (ColMajor with the same ld; M == 1 with ld == 1;
///         G == 1 with unit row stride and ld == M), else `dst`.
/// Errors: kLdTooSmall ('ld'), kInvalidShape ('ld': G * ld spans more than
/// 2^48 bytes), kNullPointer ('dst'), kMisaligned ('dst'), kInvalidValue
/// ('dst' overlapping src).
template <class T, class SrcLayout>
Result<ScaleView<T, ColMajor>> materializeHost(ScaleView<T, SrcLayout> src, T* dst, index_t ld) {
  static_assert(SrcLayout::kStridedScales,
                "materializeHost takes RowMajor or ColMajor views; view P1 buffers with asColumnMajor()");
  ScaleView<T, ColMajor> out;
  bool copy = false;
  const Status s = detail::planMaterialize("materializeHost", src, dst, ld, out, copy);
  if (!s) return s;
  if (!copy) return out;
  for (index_t g = 0; g < src.cols(); ++g)
    for (index_t m = 0; m < src.rows(); ++m) out(m, g) = src(m, g);
  zeroPadding(out);
  return out;
}

/// P1 input: same rules after the zero-copy P1 -> P2 step.
template <class T>
Result<ScaleView<T, ColMajor>> materializeHost(ScaleView<T, TransposedContiguous> src, T* dst, index_t ld) {
  return materializeHost(asColumnMajor(src), dst, ld);
}

// ---------------------------------------------------------------------------
// materialize into the UE8M0 exponent layouts (PackedUe8m0, Swizzled128x4).
// ---------------------------------------------------------------------------

/// Already in the layout: the same view, no code runs.
template <class T>
FP8SCALE_HOST_DEVICE constexpr ScaleView<T, PackedUe8m0> materialize(ScaleView<T, PackedUe8m0> src) {
  return src;
}
template <class T>
FP8SCALE_HOST_DEVICE constexpr ScaleView<T, Swizzled128x4> materialize(ScaleView<T, Swizzled128x4> src) {
  return src;
}

/// Whether `s` is a scale the UE8M0 rule produces: a positive normal power of
/// two (biased exponent 1..254, no mantissa bits), so that its exponent byte
/// alone carries it.
FP8SCALE_HOST_DEVICE inline bool isUe8m0Scale(float s) {
  const std::uint32_t b = bitCast<std::uint32_t>(s);
  const std::uint32_t e = b >> 23;  // the sign bit lands above the 8 exponent bits
  return (b & 0x7FFFFFu) == 0 && e >= 1 && e <= 254;
}

namespace detail {
/// The checks the host and device relayouts into an exponent layout share:
/// extents equal, destination not overlapping the source.
template <class SrcLayout, class DstLayout>
Status checkExponentMaterialize(const char* fn, ScaleView<const float, SrcLayout> src,
                                ScaleView<std::uint8_t, DstLayout> dst) {
  static_assert(SrcLayout::kStridedScales, "the source is RowMajor or ColMajor fp32 scales");
  static_assert(DstLayout::kExponentBytes, "the destination is PackedUe8m0 or Swizzled128x4");
  if (dst.rows() != src.rows() || dst.cols() != src.cols())
    return Status::error(StatusCode::kInvalidShape, fn, "dst", "extents differ from the source's (rows, cols)",
                         dst.rows() != src.rows() ? dst.rows() : dst.cols(),
                         dst.rows() != src.rows() ? src.rows() : src.cols());
  const auto* s0 = reinterpret_cast<const unsigned char*>(src.data());
  const auto* s1 = s0 + src.requiredSpan() * static_cast<index_t>(sizeof(float));
  const auto* d0 = reinterpret_cast<const unsigned char*>(dst.data());
  const auto* d1 = d0 + dst.requiredSpan();
  if (d0 < s1 && s0 < d1)
    return Status::error(StatusCode::kInvalidValue, fn, "dst", "destination overlaps the source; relayout is not in place");
  return Status::ok();
}
}  // namespace detail

/// Host relayout of fp32 UE8M0 scales into an exponent layout, the transform
/// engines run before an SM100 GEMM today (DeepGEMM
/// get_mn_major_tma_aligned_packed_ue8m0_tensor; the 128 x 4 swizzle of
/// cuBLASLt / CUTLASS MXFP8 scales): dst(m, g) = the biased exponent byte of
/// src(m, g), every padding slot of dst = 0.
///
/// @param src  (M, G) fp32 scales, RowMajor or ColMajor, produced with the
///             UE8M0 rule (powers of two; a scale of the fp32 rule would not
///             survive the conversion, and is refused)
/// @param dst  (M, G) PackedUe8m0 or Swizzled128x4 view (its requiredSpan()
///             bytes are written)
/// Errors: kInvalidShape ('dst': extents differ from src's), kInvalidValue
/// ('dst': its bytes overlap src's; 'src': a scale that is not a positive
/// normal power of two, its value reported). Nothing is written on error.
template <class SrcLayout, class DstLayout>
Status materializeHost(ScaleView<const float, SrcLayout> src, ScaleView<std::uint8_t, DstLayout> dst) {
  constexpr const char* fn = "materializeHost";
  if (Status s = detail::checkExponentMaterialize(fn, src, dst); !s) return s;
  for (index_t m = 0; m < src.rows(); ++m)
    for (index_t g = 0; g < src.cols(); ++g)
      if (!isUe8m0Scale(src(m, g)))
        return Status::errorFloat(StatusCode::kInvalidValue, fn, "src",
                                  "holds a scale that is not a normal power of two (exponent layouts need UE8M0-rule "
                                  "scales)",
                                  src(m, g));
  for (index_t m = 0; m < src.rows(); ++m)
    for (index_t g = 0; g < src.cols(); ++g) dst(m, g) = ue8m0Exponent(src(m, g));
  zeroPadding(dst);
  return Status::ok();
}
template <class SrcLayout, class DstLayout>
Status materializeHost(ScaleView<float, SrcLayout> src, ScaleView<std::uint8_t, DstLayout> dst) {
  return materializeHost(ScaleView<const float, SrcLayout>(src), dst);
}

#if defined(FP8SCALE_HAS_DEVICE)

/// Tuning of the relayout kernel: a 32 x 32 tile through shared memory, read
/// along g (contiguous in row-major) and written along m (contiguous in
/// column-major), so both global sides are coalesced. The padding slots are
/// the tile row past the rows (paddedRowTiles), 32 columns a block.
struct MaterializePolicy {
  static constexpr int kTile = 32;
  static constexpr int kRowsPerPass = 8;
  static constexpr int kThreads = kTile * kRowsPerPass;
};

namespace detail {

template <class T, class SrcLayout>
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE void materializeTile(ScaleView<const T, SrcLayout> src,
                                                          ScaleView<T, ColMajor> dst) {
  constexpr int kTile = MaterializePolicy::kTile;
  constexpr int kPass = MaterializePolicy::kRowsPerPass;
  __shared__ T tile[kTile][kTile + 1];  // (m, g), +1 column against bank conflicts

  const index_t m0 = static_cast<index_t>(blockIdx.x) * kTile;
  const index_t g0 = static_cast<index_t>(blockIdx.y) * kTile;
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;

  // Padding: the tile row past the rows writes its columns' slots [M, ld).
  if (m0 >= src.rows()) {
    if (isPaddingTile(dst, m0, kTile))
      for (int c = ty; c < kTile; c += kPass)
        if (g0 + c < dst.cols()) writeScalePadding(dst, g0 + c, tx, kTile);  // [G][ld]
    return;  // block-uniform: no thread of the block reaches the barrier
  }

  // Load: lanes walk g.
  for (int r = ty; r < kTile; r += kPass) {
    const index_t m = m0 + r;
    const index_t g = g0 + tx;
    if (m < src.rows() && g < src.cols()) tile[r][tx] = src(m, g);  // (M, G)
  }
  __syncthreads();

  // Store: lanes walk m.
  for (int c = ty; c < kTile; c += kPass) {
    const index_t g = g0 + c;
    const index_t m = m0 + tx;
    if (g < dst.cols() && m < dst.rows()) dst(m, g) = tile[tx][c];  // [G][ld]
  }
}

template <class T, class SrcLayout>
FP8SCALE_GLOBAL void __launch_bounds__(MaterializePolicy::kThreads)
    materializeKernel(ScaleView<const T, SrcLayout> src, ScaleView<T, ColMajor> dst) {
  materializeTile<T, SrcLayout>(src, dst);
}

}  // namespace detail

/// Relayout on the device: the kernel version of materializeHost(), same
/// arguments, same result view, same no-op rules (no launch when the bytes
/// already are ColMajor{ld}: the returned view then holds src's pointer).
/// Asynchronous on `stream`; `dst` must be device memory of G * ld elements.
/// Errors as materializeHost, plus kInvalidShape past the grid limits
/// ('cols': more than 65535 x 32 groups; 'ld': more than 2^31 - 1 row tiles)
/// and kDeviceError when the launch fails.
template <class T, class SrcLayout>
Result<ScaleView<T, ColMajor>> materialize(ScaleView<T, SrcLayout> src, T* dst, index_t ld, Stream stream) {
  static_assert(SrcLayout::kStridedScales,
                "materialize takes RowMajor or ColMajor views; view P1 buffers with asColumnMajor()");
  ScaleView<T, ColMajor> out;
  bool copy = false;
  const Status s = detail::planMaterialize("materialize", src, dst, ld, out, copy);
  if (!s || !copy) return {s, out};
  constexpr int kTile = MaterializePolicy::kTile;
  const index_t tilesM = paddedRowTiles(out, kTile);
  const index_t tilesG = (src.cols() + kTile - 1) / kTile;
  if (tilesG > 65535)
    return Status::error(StatusCode::kInvalidShape, "materialize", "cols", "too many groups for one launch",
                         src.cols(), 65535 * kTile);
  if (tilesM > 2147483647)
    return Status::error(StatusCode::kInvalidShape, "materialize", "ld", "too many rows for one launch", ld);
  const DeviceError e = launchKernel(
      detail::materializeKernel<T, SrcLayout>, dim3(static_cast<unsigned>(tilesM), static_cast<unsigned>(tilesG)),
      dim3(kTile, MaterializePolicy::kRowsPerPass), 0, stream, ScaleView<const T, SrcLayout>(src), out);
  if (e != kDeviceSuccess) return Status::fromDevice("materialize", e);
  return out;
}

/// P1 input: same rules after the zero-copy P1 -> P2 step.
template <class T>
Result<ScaleView<T, ColMajor>> materialize(ScaleView<T, TransposedContiguous> src, T* dst, index_t ld,
                                           Stream stream) {
  return materialize(asColumnMajor(src), dst, ld, stream);
}

namespace detail {

/// The relayout into an exponent layout: one thread a word of dst, the four
/// consecutive bytes of groups 4q .. 4q + 3 of row m (both exponent layouts
/// keep them together and 4-aligned), over dst's padded rectangle, rows
/// fastest (the packed words are MN-major). Each byte is ue8m0Exponent(src(m, g)),
/// or 0 for a padding slot.
constexpr int kExponentMaterializeThreads = 256;

template <class SrcLayout, class DstLayout>
FP8SCALE_GLOBAL void __launch_bounds__(kExponentMaterializeThreads)
    materializeExponentsKernel(ScaleView<const float, SrcLayout> src, ScaleView<std::uint8_t, DstLayout> dst,
                               index_t paddedRows, index_t words) {
  static_assert(DstLayout::kGroupsPerWord == 4, "four exponent bytes a 32-bit word");
  const index_t i = static_cast<index_t>(blockIdx.x) * kExponentMaterializeThreads + threadIdx.x;
  if (i >= paddedRows * words) return;
  const index_t m = i % paddedRows;
  const index_t g0 = (i / paddedRows) * 4;
  std::uint32_t word = 0;
  if (m < src.rows())
    for (int b = 0; b < 4; ++b)
      if (g0 + b < src.cols()) word |= static_cast<std::uint32_t>(ue8m0Exponent(src(m, g0 + b))) << (8 * b);  // (M, G)
  *reinterpret_cast<std::uint32_t*>(&dst(m, g0)) = word;  // bytes g0 .. g0 + 3 of row m, little-endian
}

}  // namespace detail

/// Relayout of fp32 UE8M0 scales into an exponent layout on the device: the
/// kernel version of materializeHost(src, dst), writing every byte of dst's
/// requiredSpan() (each exponent byte and every padding slot as 0) in one
/// launch on `stream`. The scales must come from the UE8M0 rule: each byte
/// is ue8m0Exponent of its scale, the scale itself only for a positive
/// normal power of two (the host version refuses any other; here it is not
/// checked, as DeepGEMM's own transform does not: any other scale gets the
/// exponent of the power of two above it).
/// Errors as materializeHost (extents, overlap), kInvalidShape ('rows')
/// past one launch, kDeviceError when the launch fails. M == 0: the packed
/// layout's padding rows [0, ld) are written; nothing else is launched.
template <class SrcLayout, class DstLayout>
Status materialize(ScaleView<const float, SrcLayout> src, ScaleView<std::uint8_t, DstLayout> dst, Stream stream) {
  constexpr const char* fn = "materialize";
  if (Status s = detail::checkExponentMaterialize(fn, src, dst); !s) return s;
  const detail::PaddedRect rect = dst.layout().padded(dst.rows(), dst.cols());
  const index_t words = rect.paddedCols / 4;
  const index_t threads = detail::spanMul(rect.paddedRows, words);
  if (threads == 0) return Status::ok();
  constexpr index_t kThreads = detail::kExponentMaterializeThreads;
  const index_t blocks = (threads + kThreads - 1) / kThreads;
  if (threads < 0 || blocks > 2147483647)
    return Status::error(StatusCode::kInvalidShape, fn, "rows", "too many exponent words for one launch", dst.rows());
  const DeviceError e =
      launchKernel(detail::materializeExponentsKernel<SrcLayout, DstLayout>, dim3(static_cast<unsigned>(blocks)),
                   dim3(static_cast<unsigned>(kThreads)), 0, stream, src, dst, rect.paddedRows, words);
  if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
  return Status::ok();
}
template <class SrcLayout, class DstLayout>
Status materialize(ScaleView<float, SrcLayout> src, ScaleView<std::uint8_t, DstLayout> dst, Stream stream) {
  return materialize(ScaleView<const float, SrcLayout>(src), dst, stream);
}

/// The compiled kernel library's instantiations (detail/kernel_instances.hpp).
FP8SCALE_DECLARE_LIBRARY_INSTANCES(FP8SCALE_MATERIALIZE_INSTANCES)

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
