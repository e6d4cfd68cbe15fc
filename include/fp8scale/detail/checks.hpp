// fp8scale: argument checks shared by every quantizing launcher and by the host
// reference. Each check names the argument it rejects.
#pragma once

#include <cstdint>

#include "../platform.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"

namespace fp8scale {

/// Group sizes with an instantiation: 128 is the hot path (DeepSeek-V3 1x128).
FP8SCALE_HOST_DEVICE constexpr bool isSupportedGroupSize(int groupSize) {
  return groupSize == 32 || groupSize == 64 || groupSize == 128;
}

namespace detail {

inline bool isAligned(const void* p, int bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes)) == 0;
}

/// The shape and pointer arguments of a per-group quantization of x[M, K]
/// (row stride ldx elements of `inputBytes`) into q[M, K] (row stride ldq
/// bytes) and scales (M, K / groupSize).
struct QuantArgs {
  const void* x = nullptr;
  index_t rows = 0;  ///< M
  index_t cols = 0;  ///< K
  index_t ldx = 0;
  int inputBytes = 0;
  void* q = nullptr;
  index_t ldq = 0;
  const void* scale = nullptr;
  index_t scaleRows = 0;
  index_t scaleCols = 0;
  int groupSize = 0;
};

/// Checks, in this order: group size; shape (M >= 0, K >= 0, K % groupSize);
/// leading dimensions; the scale view's extents; then, only when M > 0, null
/// pointers and alignment to `vectorBytes` (pointers and row strides) of the
/// vector loads and stores the kernel uses. M == 0 is valid input.
inline Status checkQuantArgs(const char* fn, const QuantArgs& a, int vectorBytes) {
  if (!isSupportedGroupSize(a.groupSize))
    return Status::error(StatusCode::kUnsupportedGroupSize, fn, "groupSize", "supported group sizes are 32, 64, 128",
                         a.groupSize);
  if (a.rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", a.rows);
  if (a.cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", a.cols);
  if (a.cols % a.groupSize != 0)
    return Status::error(StatusCode::kInvalidShape, fn, "K", "K is not a multiple of the group size", a.cols,
                         a.groupSize);
  if (a.ldx < a.cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "input row stride is smaller than K", a.ldx, a.cols);
  if (a.ldq < a.cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldq", "output row stride is smaller than K", a.ldq, a.cols);
  if (a.scaleRows != a.rows)
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view rows differ from M", a.scaleRows, a.rows);
  if (a.scaleCols != a.cols / a.groupSize)
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view cols differ from K / groupSize",
                         a.scaleCols, a.cols / a.groupSize);
  if (a.rows == 0 || a.cols == 0) return Status::ok();
  if (a.x == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x", "null input with M > 0");
  if (a.q == nullptr) return Status::error(StatusCode::kNullPointer, fn, "q", "null fp8 output with M > 0");
  if (a.scale == nullptr) return Status::error(StatusCode::kNullPointer, fn, "scale", "null scale output with M > 0");
  if (vectorBytes > 1) {
    if (!isAligned(a.x, vectorBytes))
      return Status::error(StatusCode::kMisaligned, fn, "x", "input pointer not aligned to the vector width",
                           static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(a.x) % vectorBytes), vectorBytes);
    if ((a.ldx * a.inputBytes) % vectorBytes != 0)
      return Status::error(StatusCode::kMisaligned, fn, "ldx", "input row stride in bytes not a multiple of the vector width",
                           a.ldx, vectorBytes);
    if (!isAligned(a.q, vectorBytes / a.inputBytes))
      return Status::error(StatusCode::kMisaligned, fn, "q", "fp8 output pointer not aligned to the vector width",
                           static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(a.q) % (vectorBytes / a.inputBytes)),
                           vectorBytes / a.inputBytes);
    if (a.ldq % (vectorBytes / a.inputBytes) != 0)
      return Status::error(StatusCode::kMisaligned, fn, "ldq", "fp8 row stride not a multiple of the vector width",
                           a.ldq, vectorBytes / a.inputBytes);
  }
  if (!isAligned(a.scale, 4))
    return Status::error(StatusCode::kMisaligned, fn, "scale", "scale pointer not 4-byte aligned");
  return Status::ok();
}

}  // namespace detail
}  // namespace fp8scale
