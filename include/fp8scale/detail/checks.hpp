// fp8scale: argument checks shared by every quantizing launcher and by the host
// reference. Each check names the argument it rejects.
#pragma once

#include <cstdint>

#include "../platform.hpp"
#include "../scale_math.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"
#include "span.hpp"

namespace fp8scale {

/// Group sizes with an instantiation: 128 is the hot path (DeepSeek-V3 1x128).
FP8SCALE_HOST_DEVICE constexpr bool isSupportedGroupSize(int groupSize) {
  return groupSize == 32 || groupSize == 64 || groupSize == 128;
}

/// Group sizes the exponent layouts (PackedUe8m0, Swizzled128x4) take: 32
/// (MXFP8: cuBLASLt VEC32_UE8M0, CUTLASS block-scaled SM100) and 128
/// (DeepGEMM's SM100 1 x 128 activation scales).
FP8SCALE_HOST_DEVICE constexpr bool isExponentLayoutGroupSize(int groupSize) {
  return groupSize == 32 || groupSize == 128;
}

namespace detail {

/// 2^-126, the smallest normal fp32 value: the floor of eps / fmax.
constexpr float kMinNormalFloat = 1.17549435e-38f;
/// The largest finite fp32 value: the ceiling of eps / fmax.
constexpr float kMaxFloat = 3.40282347e+38f;

/// The scale options every quantizer takes (QuantOptions, WeightQuantOptions:
/// fields fmax, eps, rule): fmax in (0, Format::kMax] (0 selects kMax, written
/// to `fmax`), eps > 0 with eps / fmax in [2^-126, FLT_MAX] (in fp32: a
/// normal, finite smallest scale with a finite inverse), a known rule.
template <class Format, class Options>
inline Status checkQuantOptions(const char* fn, const Options& o, float& fmax) {
  fmax = o.fmax == 0.0f ? Format::kMax : o.fmax;
  if (!(fmax > 0.0f) || fmax > Format::kMax)
    return Status::errorFloat(StatusCode::kInvalidValue, fn, "fmax",
                              "must be in (0, format max] (448 e4m3fn, 240 e4m3fnuz)", o.fmax);
  if (!(o.eps > 0.0f)) return Status::errorFloat(StatusCode::kInvalidValue, fn, "eps", "must be > 0", o.eps);
  // The smallest scale is eps / fmax; below 2^-126 its inverse can overflow
  // to inf and an all-zero group would encode 0 * inf = NaN. Above the
  // largest float every scale is inf and dequantizes to NaN.
  if (!(o.eps / fmax >= kMinNormalFloat))
    return Status::errorFloat(StatusCode::kInvalidValue, fn, "eps",
                              "eps / fmax must be at least 2^-126 (the smallest normal fp32 scale)", o.eps);
  if (!(o.eps / fmax <= kMaxFloat))
    return Status::errorFloat(StatusCode::kInvalidValue, fn, "eps", "eps / fmax must be a finite fp32 number",
                              o.eps);
  if (o.rule != ScaleRule::kFp32 && o.rule != ScaleRule::kUE8M0)
    return Status::error(StatusCode::kInvalidValue, fn, "rule", "unknown scale rule", static_cast<int>(o.rule));
  return Status::ok();
}

/// An optional [rows, cols] row buffer (nullptr: absent): row stride `ld` >=
/// cols (kLdTooSmall), a span within checkSpan's bounds (kInvalidShape),
/// pointer and row stride in bytes 16-byte aligned (kMisaligned), named
/// `name` / `ldName`.
inline Status checkOptionalRows(const char* fn, const char* name, const char* ldName, const void* p, index_t rows,
                                index_t ld, index_t cols, index_t elementBytes) {
  if (p == nullptr) return Status::ok();
  if (ld < cols) return Status::error(StatusCode::kLdTooSmall, fn, ldName, "row stride is smaller than K", ld, cols);
  if (Status s = checkSpan(fn, name, p, stridedSpan(rows, cols, ld), elementBytes); !s) return s;
  if (Status s = checkAligned(fn, name, p, 16); !s) return s;
  if (!isWholeVectors(ld, elementBytes, 16))
    return Status::error(StatusCode::kMisaligned, fn, ldName, "row stride in bytes is not a multiple of 16", ld, 16);
  return Status::ok();
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
  index_t scaleLd = 0;       ///< the view's ld
  index_t scaleMinLd = 0;    ///< its layout's minimum (RowMajor: G, ColMajor: M)
  int groupSize = 0;
  const char* colsName = "K";  ///< how the producer calls its column count
  /// Elements of x the input spans; kUnsetSpan: stridedSpan(rows, cols, ldx)
  /// (SiLU-clamp reads 2 I columns a row, head-major input has two strides).
  index_t inputSpan = kUnsetSpan;
  static constexpr index_t kUnsetSpan = -2;
};

/// Fills the scale fields of `a` from a producer's scale view.
template <class T, class Layout>
void setScale(QuantArgs& a, const ScaleView<T, Layout>& scale) {
  a.scale = scale.data();
  a.scaleRows = scale.rows();
  a.scaleCols = scale.cols();
  a.scaleLd = scale.ld();
  a.scaleMinLd = Layout::minLd(scale.rows(), scale.cols());
}

/// QuantArgs of a producer writing q and scale from an input of `rows` x
/// `cols` elements of `inputBytes` with row stride `ldx`.
template <class Format, class T, class Layout>
QuantArgs quantArgs(const void* x, index_t rows, index_t cols, index_t ldx, int inputBytes, const Fp8Matrix<Format>& q,
                    const ScaleView<T, Layout>& scale, int groupSize) {
  QuantArgs a;
  a.x = x;
  a.rows = rows;
  a.cols = cols;
  a.ldx = ldx;
  a.inputBytes = inputBytes;
  a.q = q.data;
  a.ldq = q.ld;
  setScale(a, scale);
  a.groupSize = groupSize;
  return a;
}


/// Checks, in this order: group size; shape (M >= 0, K >= 0, K % groupSize);
/// leading dimensions; the scale view's extents; the spans of x and q
/// (checkSpan: at most 2^48 bytes, not past the end of the address space,
/// kInvalidShape naming 'x' / 'q'); then, only when M > 0, null
/// pointers and alignment: the input pointer and row stride to
/// `inputVectorBytes` (the width of one vector load), the fp8 output pointer
/// and row stride to `outputVectorBytes` (the width of one fp8 store), the
/// scale pointer to 4. M == 0 is valid input.
inline Status checkQuantArgs(const char* fn, const QuantArgs& a, int inputVectorBytes, int outputVectorBytes) {
  if (!isSupportedGroupSize(a.groupSize))
    return Status::error(StatusCode::kUnsupportedGroupSize, fn, "groupSize", "supported group sizes are 32, 64, 128",
                         a.groupSize);
  if (a.rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", a.rows);
  if (a.cols < 0) return Status::error(StatusCode::kInvalidShape, fn, a.colsName, "extent is negative", a.cols);
  if (a.cols % a.groupSize != 0)
    return Status::error(StatusCode::kInvalidShape, fn, a.colsName, "not a multiple of the group size", a.cols,
                         a.groupSize);
  if (a.ldx < a.cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "input row stride is smaller than K", a.ldx, a.cols);
  if (a.ldq < a.cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldq", "output row stride is smaller than K", a.ldq, a.cols);
  if (a.scaleRows != a.rows)
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view rows differ from M", a.scaleRows, a.rows);
  if (a.scaleCols != a.cols / a.groupSize)
    return Status::error(StatusCode::kInvalidShape, fn, "scale", "scale view cols differ from K / groupSize",
                         a.scaleCols, a.cols / a.groupSize);
  if (a.scaleLd < a.scaleMinLd)
    return Status::error(StatusCode::kLdTooSmall, fn, "scale", "scale view ld is below its layout's minimum",
                         a.scaleLd, a.scaleMinLd);
  const index_t xSpan = a.inputSpan == QuantArgs::kUnsetSpan ? stridedSpan(a.rows, a.cols, a.ldx) : a.inputSpan;
  if (Status s = checkSpan(fn, "x", a.x, xSpan, a.inputBytes); !s) return s;
  if (Status s = checkSpan(fn, "q", a.q, stridedSpan(a.rows, a.cols, a.ldq), 1); !s) return s;
  if (a.rows == 0 || a.cols == 0) return Status::ok();
  if (a.x == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x", "null input with M > 0");
  if (a.q == nullptr) return Status::error(StatusCode::kNullPointer, fn, "q", "null fp8 output with M > 0");
  if (a.scale == nullptr) return Status::error(StatusCode::kNullPointer, fn, "scale", "null scale output with M > 0");
  if (Status s = checkAligned(fn, "x", a.x, inputVectorBytes); !s) return s;
  if (!isWholeVectors(a.ldx, a.inputBytes, inputVectorBytes))
    return Status::error(StatusCode::kMisaligned, fn, "ldx",
                         "input row stride (elements) is not a whole number of vector loads (bytes)", a.ldx,
                         inputVectorBytes);
  if (Status s = checkAligned(fn, "q", a.q, outputVectorBytes); !s) return s;
  if (a.ldq % outputVectorBytes != 0)
    return Status::error(StatusCode::kMisaligned, fn, "ldq",
                         "fp8 row stride is not a multiple of the vector store width", a.ldq, outputVectorBytes);
  if (Status s = checkAligned(fn, "scale", a.scale, 4); !s) return s;
  return Status::ok();
}

}  // namespace detail
}  // namespace fp8scale
