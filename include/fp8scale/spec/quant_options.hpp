// fp8scale spec: the options every producer takes and their checks. Host
// code only (no kernels): the device producers and the host references
// (reference/) both include it.
#pragma once

#include "../detail/checks.hpp"
#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../status.hpp"

namespace fp8scale {

/// The L2 cache policy of a producer's scale stores (NVIDIA sm_80+ with
/// CUDA 11.4+; elsewhere, AMD included, both are a plain store).
enum class ScaleStorePolicy {
  /// A plain st.global: the L2's normal priority. The default: the call
  /// leaves no lasting mark on the L2.
  kEvictNormal,
  /// createpolicy.fractional.L2::evict_last + st.global.L2::cache_hint. On
  /// the H200 column-major RMSNorm quant ran 3.7-4.9% faster at
  /// M = 8192 .. 65536 and group quant 1.4-3.1% at M = 8192 / 16384
  /// (SiLU-clamp: no consistent change; the fused allreduce: not measured;
  /// docs/performance.md). The cost is outside
  /// the call: the lines, up to M * G * 4 bytes (14.7 MB for K = 7168 at
  /// M = 65536), keep evict_last priority after the kernel, like lines of a
  /// persisting access window, until they are rewritten, reset
  /// (cudaCtxResetPersistingL2Cache) or evicted after all normal lines of
  /// their set; calls into many different scale buffers add up and crowd
  /// the next kernels' working sets. Opt in where the scale buffer is reused
  /// call after call (one workspace) or read right after.
  kEvictLast,
};

/// Per-call quantization options shared by every producer.
struct QuantOptions {
  /// fp32 (s = amax / fmax) or UE8M0 (s rounded up to a power of two).
  ScaleRule rule = ScaleRule::kFp32;
  /// Columns per scale: 32, 64 or 128 (the DeepSeek-V3 1x128 hot path).
  int groupSize = 128;
  /// Largest magnitude after scaling; 0 selects the format's max (448 for
  /// e4m3fn, 240 for e4m3fnuz). Some engines pass 224 on e4m3fnuz.
  float fmax = 0.0f;
  /// Floor on amax, so an all-zero group gets a finite scale.
  float eps = kDefaultAmaxEps;
  /// Programmatic dependent launch (CUDA sm_90+; ignored on AMD): the kernel
  /// is scheduled while the previous kernel on the stream finishes and waits
  /// for it (griddepcontrol.wait) before any memory access, so the results
  /// are the same; it also lets the next PDL launch start early. Saves launch
  /// latency at small M (docs/performance.md). Off by default: the previous
  /// kernel's last blocks then share the SMs with this grid's waiting blocks.
  /// The producer triggers its own dependents at entry: a PDL-launched kernel
  /// after it must not read its outputs before that kernel's own wait
  /// (griddepcontrol.wait / cudaGridDependencySynchronize).
  bool programmaticLaunch = false;
  /// L2 policy of the scale stores; see ScaleStorePolicy.
  ScaleStorePolicy scaleStore = ScaleStorePolicy::kEvictNormal;
};

namespace detail {
/// The options of a producer call (launcher or host reference) writing
/// scales in `Layout`, one of the four layouts producers write (any other is
/// a compile error): checkQuantOptions (fmax, eps, rule), the UE8M0 rule and
/// a group size of 32 or 128 for the exponent layouts (their bytes hold a
/// power of two's exponent alone; isExponentLayoutGroupSize), and a known
/// scaleStore (kInvalidValue naming the option otherwise).
template <class Format, class Layout>
inline Status checkProducerOptions(const char* fn, const QuantOptions& o, float& fmax) {
  static_assert(Layout::kStridedScales || Layout::kExponentBytes,
                "producers write RowMajor, ColMajor, PackedUe8m0 or Swizzled128x4 scales");
  if (Status s = checkQuantOptions<Format>(fn, o, fmax); !s) return s;
  if (Layout::kExponentBytes && o.rule != ScaleRule::kUE8M0)
    return Status::error(StatusCode::kInvalidValue, fn, "rule",
                         "exponent scale layouts (PackedUe8m0, Swizzled128x4) hold UE8M0 scales: use kUE8M0",
                         static_cast<int>(o.rule));
  if (Layout::kExponentBytes && isSupportedGroupSize(o.groupSize) && !isExponentLayoutGroupSize(o.groupSize))
    return Status::error(StatusCode::kUnsupportedGroupSize, fn, "groupSize",
                         "exponent scale layouts take group sizes 32 (MXFP8) and 128", o.groupSize);
  if (o.scaleStore != ScaleStorePolicy::kEvictNormal && o.scaleStore != ScaleStorePolicy::kEvictLast)
    return Status::error(StatusCode::kInvalidValue, fn, "scaleStore", "unknown scale store policy",
                         static_cast<int>(o.scaleStore));
  return Status::ok();
}

/// Whether the scale stores carry the evict_last policy.
inline bool storesScalesEvictLast(ScaleStorePolicy policy) { return policy == ScaleStorePolicy::kEvictLast; }
}  // namespace detail

}  // namespace fp8scale
