// fp8scale: overflow-checked element and byte counts of strided buffers.
//
// Every validation (the view factories, the launchers' checks, the host
// references, materialize) computes the span of each buffer argument with
// these before anything else is computed from its extents, so that no later
// product of an extent with a stride can wrap.
#pragma once

#include <cstdint>

#include "../platform.hpp"
#include "../status.hpp"

namespace fp8scale {
namespace detail {

/// The most bytes one buffer argument may span: 2^48 (256 TiB). No single
/// buffer of a process on the systems this library targets is that large
/// (x86-64 and AArch64 user address spaces of 47 to 52 bits, GPU virtual
/// addresses of 49 bits, a few TiB of memory per node), so a larger span is
/// a bad shape rather than a big tensor; and with spans this far below 2^63
/// no product of a span with an element size or an offset wraps int64.
constexpr index_t kMaxSpanBytes = index_t{1} << 48;

/// What the span helpers return for a count above kMaxSpanBytes or an
/// operand that is negative or itself kSpanTooLarge.
constexpr index_t kSpanTooLarge = -1;

/// a * b for counts a, b >= 0; kSpanTooLarge above kMaxSpanBytes.
FP8SCALE_HOST_DEVICE constexpr index_t spanMul(index_t a, index_t b) {
  if (a < 0 || b < 0) return kSpanTooLarge;
  if (a == 0 || b == 0) return 0;
  return a > kMaxSpanBytes / b ? kSpanTooLarge : a * b;
}

/// a + b for counts a, b >= 0; kSpanTooLarge above kMaxSpanBytes.
FP8SCALE_HOST_DEVICE constexpr index_t spanAdd(index_t a, index_t b) {
  if (a < 0 || b < 0) return kSpanTooLarge;
  return a > kMaxSpanBytes - b ? kSpanTooLarge : a + b;
}

/// Elements addressed by `rows` rows of `cols` elements, `stride` elements
/// apart: (rows - 1) * stride + cols, or 0 when rows or cols is 0 (mdspan's
/// required_span_size of a layout_stride mapping). Extents and stride >= 0.
FP8SCALE_HOST_DEVICE constexpr index_t stridedSpan(index_t rows, index_t cols, index_t stride) {
  if (rows < 0 || cols < 0 || stride < 0) return kSpanTooLarge;
  if (rows == 0 || cols == 0) return 0;
  return spanAdd(spanMul(rows - 1, stride), cols);
}

/// kInvalidShape naming `argument` when `elements` elements of
/// `elementBytes` bytes (a span from the helpers above, kSpanTooLarge
/// included) exceed kMaxSpanBytes, or do not fit between `p` and the end of
/// the address space. The status value is `elements` (-1: too large to count).
inline Status checkSpan(const char* fn, const char* argument, const void* p, index_t elements,
                        index_t elementBytes) {
  const index_t bytes = spanMul(elements, elementBytes);
  if (bytes < 0)
    return Status::error(StatusCode::kInvalidShape, fn, argument,
                         "the buffer's extents and strides span more than 2^48 bytes", elements, kMaxSpanBytes);
  if (p != nullptr &&
      static_cast<std::uintptr_t>(bytes) > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(p))
    return Status::error(StatusCode::kInvalidShape, fn, argument,
                         "the buffer's span runs past the end of the address space", elements);
  return Status::ok();
}

/// Whether `count` elements of `elementBytes` bytes (count >= 0, any size)
/// are a whole number of `vectorBytes`-byte vectors, without forming the
/// product (a stride only bounded by its buffer's span can be near 2^63).
FP8SCALE_HOST_DEVICE constexpr bool isWholeVectors(index_t count, index_t elementBytes, int vectorBytes) {
  return (count % vectorBytes) * elementBytes % vectorBytes == 0;
}

inline bool isAligned(const void* p, int bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes)) == 0;
}

/// kMisaligned naming `argument` when `p` is not a multiple of `bytes`
/// (the vector width of a load or store, or an element type's alignment,
/// as `reason` says); the status value is the pointer's offset past the
/// last aligned address, the limit `bytes`.
inline Status checkAligned(const char* fn, const char* argument, const void* p, int bytes,
                           const char* reason = "pointer is not aligned to the vector width") {
  if (bytes <= 1 || isAligned(p, bytes)) return Status::ok();
  return Status::error(StatusCode::kMisaligned, fn, argument, reason,
                       static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes)),
                       bytes);
}

}  // namespace detail
}  // namespace fp8scale
