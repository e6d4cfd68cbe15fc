// fp8scale: host reference of the fused allreduce + residual + RMSNorm +
// group quant (producers/allreduce_rmsnorm_quant.hpp).
//
// The allreduce step is specified exactly: x(m, k) = round_In(((x_0 + x_1) +
// x_2) + ... + x_{W-1}), fp32 additions in rank order starting from x_0 (not
// from 0, so an all -0 column stays -0). Every device algorithm matches it
// bit for bit. The epilogue is reference::rmsNormQuant on that x, so the
// device differs from this reference exactly as rmsNormQuant() does (one fp8
// step on a small fraction of elements: the device sums squares in fp32 in
// its own order, the reference in double), while all device paths agree
// with each other bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "../numeric.hpp"
#include "../status.hpp"
#include "fused_quant.hpp"

namespace fp8scale {
namespace detail {
/// The partial sums of an allreduce over [M, K] with row stride ldx, as
/// allreduceSum and allreduceRmsNormQuant take them: at least one rank
/// (kInvalidValue), non-negative extents (kInvalidShape 'M' / 'K'), ldx >= K
/// (kLdTooSmall), each partial's span within checkSpan's bounds
/// (kInvalidShape), and, when M > 0 and K > 0, no null partial
/// (kNullPointer). Every error names 'partials' unless it names an extent.
template <class In>
Status checkAllreducePartials(const char* fn, const std::vector<const In*>& partials, index_t rows, index_t cols,
                              index_t ldx) {
  if (partials.empty()) return Status::error(StatusCode::kInvalidValue, fn, "partials", "no ranks");
  if (rows < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", rows);
  if (cols < 0) return Status::error(StatusCode::kInvalidShape, fn, "K", "extent is negative", cols);
  if (ldx < cols) return Status::error(StatusCode::kLdTooSmall, fn, "ldx", "row stride is smaller than K", ldx, cols);
  const index_t bytes = static_cast<index_t>(sizeof(In));
  for (const In* p : partials)
    if (Status s = checkSpan(fn, "partials", p, stridedSpan(rows, cols, ldx), bytes); !s) return s;
  if (rows == 0 || cols == 0) return Status::ok();
  for (const In* p : partials)
    if (p == nullptr) return Status::error(StatusCode::kNullPointer, fn, "partials", "null partial");
  return Status::ok();
}
}  // namespace detail

namespace reference {


/// out(m, k) = round_In(sum over p = 0..W-1 of partials[p](m, k)), fp32 in
/// rank order. partials[p]: [M, K] with row stride ldx; out: row stride
/// ldOut. Errors: detail::checkAllreducePartials's, then kLdTooSmall
/// ('ldOut' < K), kInvalidShape ('out' spanning more than 2^48 bytes) and
/// kNullPointer ('out' null with M > 0 and K > 0).
template <class In>
Status allreduceSum(const std::vector<const In*>& partials, index_t rows, index_t cols, index_t ldx, In* out,
                    index_t ldOut) {
  const char* fn = "reference::allreduceSum";
  if (Status s = detail::checkAllreducePartials(fn, partials, rows, cols, ldx); !s) return s;
  if (ldOut < cols)
    return Status::error(StatusCode::kLdTooSmall, fn, "ldOut", "row stride is smaller than K", ldOut, cols);
  if (Status s = detail::checkSpan(fn, "out", out, detail::stridedSpan(rows, cols, ldOut), sizeof(In)); !s) return s;
  if (rows == 0 || cols == 0) return Status::ok();
  if (out == nullptr) return Status::error(StatusCode::kNullPointer, fn, "out", "null output");
  for (index_t m = 0; m < rows; ++m)
    for (index_t k = 0; k < cols; ++k) {
      float acc = toFloat(partials[0][m * ldx + k]);
      for (std::size_t p = 1; p < partials.size(); ++p) acc += toFloat(partials[p][m * ldx + k]);
      out[m * ldOut + k] = fromFloat<In>(acc);
    }
  return Status::ok();
}

/// The fused call on the host: allreduceSum of `partials` (row stride
/// in.ldx), then rmsNormQuant with that sum as x (in.x is ignored; residual
/// updated in place and normOut written when given, as there).
/// Errors: detail::checkAllreducePartials's, then rmsNormQuant's (with
/// partials[0] standing for x), all checked before any work, so nothing
/// is allocated or written for a refused call; kInvalidShape ('M') when the
/// M x K sum does not fit in host memory.
template <class Format, class Rule, class In, class Layout>
Status allreduceRmsNormQuant(const std::vector<const In*>& partials, const RmsNormQuantInput<In>& in,
                             Fp8Matrix<Format> q, ScaleOutput<Layout> scale, int groupSize,
                             float fmax = Format::kMax, float eps = kDefaultAmaxEps) {
  const char* fn = "reference::allreduceRmsNormQuant";
  // The partials first, so that a null or oversized partial is named
  // 'partials', then the epilogue's arguments with partials[0] as x.
  if (Status s = detail::checkAllreducePartials(fn, partials, in.rows, in.cols, in.ldx); !s) return s;
  RmsNormQuantInput<In> first = in;
  first.x = partials[0];
  float checkedFmax = 0.0f;
  if (Status s = detail::checkRmsNormQuant(fn, first, q, scale, referenceOptions<Rule>(groupSize, fmax, eps), checkedFmax);
      !s) {
    // in.x is not read: what the checks say of x (its alignment) is said of partials[0].
    if (std::strcmp(s.argument(), "x") == 0)
      return Status::error(s.code(), fn, "partials", s.reason(), s.value(), s.limit());
    return s;
  }
  std::vector<In> reduced;
  try {
    reduced.resize(static_cast<std::size_t>(in.rows * in.cols));  // checked: at most 2^48 bytes
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::kInvalidShape, fn, "M", "the M x K sum does not fit in host memory", in.rows);
  }
  if (Status s = allreduceSum(partials, in.rows, in.cols, in.ldx, reduced.data(), in.cols); !s) return s;
  RmsNormQuantInput<In> local = in;
  local.x = reduced.empty() ? nullptr : reduced.data();
  local.ldx = in.cols;
  return rmsNormQuant<Format, Rule>(local, q, scale, groupSize, fmax, eps);
}

}  // namespace reference
}  // namespace fp8scale
