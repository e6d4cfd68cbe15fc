// fp8scale consumers: a small RAII wrapper around cuBLASLt's block-scaled fp8
// GEMM on Hopper, fed with a producer's zero-copy column-major scale view.
//
//   Y[Mpad, N] (row-major, bf16 or fp32) = X[Mpad, K] (e4m3fn, 1 x 128 scales)
//                                        . W[N, K]^T  (e4m3fn, 128 x 128 scales)
//
// with Mpad = align(M, 4). In cuBLAS's column-major terms this is
// D (N x Mpad) = op(A) . op(B) with A = W (CUBLAS_OP_T, stored [N][K] row-major,
// i.e. K x N column-major) and B = X (CUBLAS_OP_N, stored [Mpad][K] row-major,
// i.e. K x Mpad column-major): the "TN" form, the only one cuBLASLt's fp8
// kernels take on compute capability 9.0 (cuBLAS documentation, 3.4.17
// cublasLtMatmul(), "To use tensor- or block-scaled FP8 kernels",
// https://docs.nvidia.com/cuda/cublas/#cublasltmatmul). D's rows are Y's
// columns, so D is Y row-major with ld = ldy.
//
// Scale modes (cuBLAS documentation 3.1.4.5 and 3.1.4.5.1,
// https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts):
//   A = W: CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, "K-major", shape
//          L_4 x ceil(N / 128) with L_4 = align(K / 128, 4): the RowMajor{L_4}
//          view weightBlockQuant() writes.
//   B = X: CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, "N-major" with shape
//          Mpad x L: scale(m, g) at g * Mpad + m, the token-contiguous
//          ColMajor{align(M, 4)} view a producer writes with TRANSPOSE_SCALE
//          (or materialize() makes from row-major). The layout has no stride
//          attribute: the column stride is the padded token count itself.
//   (BLK128x128 on A with VEC128 on B is one of the three combinations the
//   documentation's table lists as supported.)
// Other facts from the same sections: compute capability 9.0 and cuBLAS >=
// 12.9; scale pointers 16-byte aligned; cuBLAS's M and N (here N and Mpad)
// multiples of 4; D must be CUDA_R_16F / CUDA_R_16BF / CUDA_R_32F; compute
// type CUBLAS_COMPUTE_32F, scale type CUDA_R_32F; fp8 matrix dimensions
// 16-byte aligned ("Tensor Core Usage").
//
// The caller's one-time duty: the fp8 buffer of X holds Mpad rows (row stride
// x.data.ld) and rows [M, Mpad) are zero fp8 bytes (a memset when the buffer
// is allocated; producers only write rows < M). Output rows [M, Mpad) are
// then exactly 0. The scale view's padding slots are written 0 by the
// producer (or materialize), never read as garbage.
//
// CUDA only; not included by fp8scale.hpp. Link CUDA::cublasLt.
#pragma once

#include "../platform.hpp"

#if !defined(FP8SCALE_PLATFORM_CUDA)
#error "fp8scale/consumers/cublaslt_block_gemm.hpp wraps cuBLASLt and needs a CUDA compile (nvcc)"
#endif

#include <cublasLt.h>

#if !defined(CUBLAS_VERSION) || CUBLAS_VERSION < 120900
#error "the VEC128_32F / BLK128x128_32F scale modes need cuBLAS 12.9 or newer"
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/checks.hpp"
#include "../fp8.hpp"
#include "../numeric.hpp"
#include "../scale_view.hpp"
#include "../status.hpp"
#include "weight_block_quant.hpp"

namespace fp8scale {

/// The enumerator name of a cublasStatus_t, e.g. "CUBLAS_STATUS_NOT_SUPPORTED"
/// (cuBLASLt's own cublasLtGetStatusName: a static string).
inline const char* cublasStatusName(cublasStatus_t s) { return cublasLtGetStatusName(s); }

namespace detail {

/// kDeviceError whose reason is the cuBLAS status name; `call` names the
/// failing cuBLASLt call (a string literal), the value is the status number.
inline Status fromCublas(const char* call, cublasStatus_t s) {
  Status st = Status::error(StatusCode::kDeviceError, call, "", cublasStatusName(s), static_cast<int>(s));
  return st;
}

/// The cuBLAS data type of a GEMM output element type.
template <class OutT>
struct GemmOutputType;
template <>
struct GemmOutputType<BFloat16> {
  static constexpr cudaDataType_t kType = CUDA_R_16BF;
};
template <>
struct GemmOutputType<float> {
  static constexpr cudaDataType_t kType = CUDA_R_32F;
};

/// The largest power of two, at most 256, that divides the address: the
/// alignment the heuristic may assume (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
inline std::uint32_t pointerAlignment(const void* p) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace detail

/// cuBLASLt handle, workspace and matmul descriptor for Y = Xq . Wq^T with
/// 1 x 128 activation scales and 128 x 128 weight scales (see the header
/// comment for the mapping and its sources). Layouts and the heuristic's
/// algorithm are cached per problem shape, so after the first call of a shape
/// run() only sets the two scale pointers and enqueues cublasLtMatmul (CUDA
/// graph capture works once the shape has run outside capture).
///
/// Not thread-safe: one object per thread (the descriptor's scale pointers
/// are per call state). Bound to the device current at create().
class CublasLtBlockGemm {
 public:
  /// 32 MiB: the workspace cuBLAS recommends on Hopper.
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  /// What the heuristic chose for the last shape run() planned or reused.
  struct PlanInfo {
    int candidates = 0;            ///< algorithms the heuristic returned (at most 8 asked)
    int algoId = -1;               ///< CUBLASLT_ALGO_CONFIG_ID of the chosen one
    std::size_t workspaceBytes = 0;
  };

  /// Creates the handle, the workspace (device memory of the current device)
  /// and the descriptor (TRANSA = T, TRANSB = N, A_SCALE_MODE = BLK128x128_32F,
  /// B_SCALE_MODE = VEC128_32F, compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F).
  /// Errors: kUnsupportedDevice ('device': compute capability is not 9.0;
  /// 'cuBLASLt': the loaded library is older than 12.9), kDeviceError
  /// (runtime errors; cuBLAS errors with the cublasStatus_t name).
  static Result<CublasLtBlockGemm> create(std::size_t workspaceBytes = kDefaultWorkspaceBytes) {
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
      return Status::fromDevice("CublasLtBlockGemm::create", e);
    DeviceInfo info;
    if (const DeviceError e = queryDevice(device, info); e != kDeviceSuccess)
      return Status::fromDevice("CublasLtBlockGemm::create", e);
    if (info.ccMajor != 9 || info.ccMinor != 0)
      return Status::error(StatusCode::kUnsupportedDevice, "CublasLtBlockGemm::create", "device",
                           "cuBLASLt's VEC128 / BLK128x128 scale modes run on compute capability 9.0 only",
                           info.ccMajor * 10 + info.ccMinor, 90);
    if (cublasLtGetVersion() < 120900)
      return Status::error(StatusCode::kUnsupportedDevice, "CublasLtBlockGemm::create", "cuBLASLt",
                           "the loaded cuBLASLt is older than 12.9 (no block scale modes)",
                           static_cast<std::int64_t>(cublasLtGetVersion()), 120900);
    CublasLtBlockGemm g;
    g.device_ = device;
    if (const cublasStatus_t s = cublasLtCreate(&g.handle_); s != CUBLAS_STATUS_SUCCESS)
      return detail::fromCublas("CublasLtBlockGemm::create: cublasLtCreate", s);
    if (workspaceBytes > 0) {
      if (const cudaError_t e = cudaMalloc(&g.workspace_, workspaceBytes); e != cudaSuccess)
        return Status::fromDevice("CublasLtBlockGemm::create", e);
      g.workspaceBytes_ = workspaceBytes;
    }
    if (const cublasStatus_t s = cublasLtMatmulDescCreate(&g.desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        s != CUBLAS_STATUS_SUCCESS)
      return detail::fromCublas("CublasLtBlockGemm::create: cublasLtMatmulDescCreate", s);
    const std::int32_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
    const std::int32_t modeA = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const std::int32_t modeB = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (Status s = g.setDesc(CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof(transA)); !s) return s;
    if (Status s = g.setDesc(CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof(transB)); !s) return s;
    if (Status s = g.setDesc(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &modeA, sizeof(modeA)); !s) return s;
    if (Status s = g.setDesc(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &modeB, sizeof(modeB)); !s) return s;
    return Result<CublasLtBlockGemm>(std::move(g));
  }

  /// An empty object (run() refuses it); use create().
  CublasLtBlockGemm() = default;
  ~CublasLtBlockGemm() { release(); }
  CublasLtBlockGemm(const CublasLtBlockGemm&) = delete;
  CublasLtBlockGemm& operator=(const CublasLtBlockGemm&) = delete;
  CublasLtBlockGemm(CublasLtBlockGemm&& o) noexcept { swap(o); }
  CublasLtBlockGemm& operator=(CublasLtBlockGemm&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }

  /// Y = Xq . Wq^T on `stream` (asynchronous).
  ///
  /// @param x    a producer's output: e4m3fn data [M, K] (row stride x.data.ld
  ///             bytes, a multiple of 16) whose buffer holds Mpad = align(M, 4)
  ///             rows, rows [M, Mpad) zero; scales (M, K / 128) in a ColMajor
  ///             view with ld == Mpad exactly (cuBLASLt VEC128_32F, "N-major",
  ///             stride = its padded token count). groupSize 128.
  /// @param w    weightBlockQuant()'s output: e4m3fn [N, K] (row stride a
  ///             multiple of 16), scales RowMajor (ceil(N / 128), K / 128) with
  ///             ld == align(K / 128, 4) (BLK128x128_32F, "K-major", L_4).
  /// @param y    output [Mpad, N] row-major, row stride ldy elements (ldy >= N,
  ///             16-byte multiple); OutT is BFloat16 or float.
  /// Pointers x.data, x.scale, w.data, w.scale and y must be 16-byte aligned.
  /// M == 0 (or N == 0) enqueues nothing and succeeds.
  /// Errors, before anything is enqueued: kInvalidValue ('x': the operands,
  /// which share one Format, are not e4m3fn; 'this': not created),
  /// kUnsupportedGroupSize ('x.groupSize'),
  /// kInvalidShape ('K' not a positive multiple of 128, 'N' not a multiple of
  /// 16, 'w' K mismatch, 'x.scale' / 'w.scale' extents or ld), kLdTooSmall and
  /// kMisaligned ('x.ld', 'w.ld', 'ldy' and the pointers by name),
  /// kInvalidShape ('x' (Mpad rows), 'w', 'y': a span beyond 2^48 bytes or
  /// the end of the address space), kNullPointer. cuBLAS failures: kDeviceError whose reason is the
  /// cublasStatus_t name and whose function names the cuBLASLt call.
  template <class OutT, class Format, class Layout>
  Status run(const QuantizedTensor<Format, Layout>& x, const BlockQuantizedWeight<Format>& w, OutT* y, index_t ldy,
             Stream stream) {
    static_assert(Layout::kColumnMajor,
                  "cuBLASLt's VEC128_32F operand reads token-contiguous scales: pass the ColMajor{align(M, 4)} view "
                  "of a TRANSPOSE_SCALE producer, or materialize() a row-major one (P1 views: viewTransposedScale())");
    static_assert(std::is_same<OutT, BFloat16>::value || std::is_same<OutT, float>::value,
                  "the block-scaled GEMM writes bf16 or fp32 (cuBLAS: D is CUDA_R_16BF / CUDA_R_32F here)");
    const char* fn = "CublasLtBlockGemm::run";
    if (Status s = check(fn, x, w, y, ldy); !s) return s;
    const index_t M = x.data.rows, N = w.data.rows;
    if (M == 0 || N == 0) return Status::ok();
    if (handle_ == nullptr)
      return Status::error(StatusCode::kInvalidValue, fn, "this", "not created: use CublasLtBlockGemm::create()");
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return Status::fromDevice(fn, e);
    if (device != device_)
      return Status::error(StatusCode::kInvalidValue, fn, "device", "current device differs from the one at create()",
                           device, device_);

    Plan key;
    key.rowsPadded = alignUp(M, 4);
    key.n = N;
    key.k = x.data.cols;
    key.ldx = x.data.ld;
    key.ldw = w.data.ld;
    key.ldy = ldy;
    key.out = detail::GemmOutputType<OutT>::kType;
    key.alignX = detail::pointerAlignment(x.data.data);
    key.alignW = detail::pointerAlignment(w.data.data);
    key.alignY = detail::pointerAlignment(y);

    // The scale pointers are the only per-call attributes.
    const float* scaleW = w.scale.data();
    const float* scaleX = x.scale.data();
    if (Status s = setDesc(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scaleW, sizeof(scaleW)); !s) return s;
    if (Status s = setDesc(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scaleX, sizeof(scaleX)); !s) return s;

    const Plan* plan = nullptr;
    if (Status s = findOrMakePlan(key, plan); !s) return s;
    last_ = plan->info;

    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t st =
        cublasLtMatmul(handle_, desc_, &alpha, w.data.data, plan->a, x.data.data, plan->b, &beta, y, plan->d, y,
                       plan->d, &plan->algo, workspace_, workspaceBytes_, stream);
    if (st != CUBLAS_STATUS_SUCCESS) return detail::fromCublas("CublasLtBlockGemm::run: cublasLtMatmul", st);
    return Status::ok();
  }

  /// The heuristic's choice for the shape of the last successful run().
  const PlanInfo& lastPlan() const { return last_; }
  /// Shapes planned so far.
  std::size_t planCount() const { return plans_.size(); }
  /// The loaded cuBLASLt's version, e.g. 130100 for 13.1.0.
  static std::size_t libraryVersion() { return cublasLtGetVersion(); }

 private:
  struct Plan {
    index_t rowsPadded = 0, n = 0, k = 0, ldx = 0, ldw = 0, ldy = 0;
    cudaDataType_t out = CUDA_R_32F;
    std::uint32_t alignX = 0, alignW = 0, alignY = 0;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    PlanInfo info;
    bool sameShape(const Plan& o) const {
      return rowsPadded == o.rowsPadded && n == o.n && k == o.k && ldx == o.ldx && ldw == o.ldw && ldy == o.ldy &&
             out == o.out && alignX == o.alignX && alignW == o.alignW && alignY == o.alignY;
    }
  };

  Status setDesc(cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t bytes) {
    const cublasStatus_t s = cublasLtMatmulDescSetAttribute(desc_, attr, value, bytes);
    return s == CUBLAS_STATUS_SUCCESS ? Status::ok()
                                      : detail::fromCublas("CublasLtBlockGemm: cublasLtMatmulDescSetAttribute", s);
  }

  template <class OutT, class Format, class Layout>
  static Status check(const char* fn, const QuantizedTensor<Format, Layout>& x, const BlockQuantizedWeight<Format>& w,
                      const OutT* y, index_t ldy) {
    if (!std::is_same<Format, E4M3FN>::value)
      return Status::error(StatusCode::kInvalidValue, fn, "x",
                           "cuBLASLt reads CUDA_R_8F_E4M3 (e4m3fn) operands; e4m3fnuz bytes would be misread");
    if (x.groupSize != kWeightBlock)
      return Status::error(StatusCode::kUnsupportedGroupSize, fn, "x.groupSize",
                           "VEC128_32F scales cover groups of 128", x.groupSize, kWeightBlock);
    const index_t M = x.data.rows, K = x.data.cols, N = w.data.rows;
    if (M < 0) return Status::error(StatusCode::kInvalidShape, fn, "M", "extent is negative", M);
    if (M > detail::kMaxSpanBytes)
      return Status::error(StatusCode::kInvalidShape, fn, "M", "more than 2^48 rows", M, detail::kMaxSpanBytes);
    const index_t rowsPadded = alignUp(M, 4);
    if (K <= 0 || K % kWeightBlock != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "K", "not a positive multiple of 128", K, kWeightBlock);
    if (w.data.cols != K)
      return Status::error(StatusCode::kInvalidShape, fn, "w", "weight K differs from the activation's", w.data.cols, K);
    if (N < 0 || N % 16 != 0)
      return Status::error(StatusCode::kInvalidShape, fn, "N",
                           "not a multiple of 16 (fp8 tensor-core dimensions are 16-byte multiples)", N, 16);
    if (x.scale.rows() != M || x.scale.cols() != K / kWeightBlock)
      return Status::error(StatusCode::kInvalidShape, fn, "x.scale", "scale view extents differ from (M, K / 128)",
                           x.scale.rows() != M ? x.scale.rows() : x.scale.cols(),
                           x.scale.rows() != M ? M : K / kWeightBlock);
    if (M > 0 && x.scale.ld() != rowsPadded)
      return Status::error(StatusCode::kInvalidShape, fn, "x.scale",
                           "VEC128_32F scales need ld == align(M, 4): cuBLASLt's token stride is the padded M",
                           x.scale.ld(), rowsPadded);
    if (x.data.ld < K) return Status::error(StatusCode::kLdTooSmall, fn, "x.ld", "fp8 row stride is smaller than K", x.data.ld, K);
    if (x.data.ld % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "x.ld", "fp8 row stride is not a multiple of 16 bytes",
                           x.data.ld, 16);
    if (w.scale.rows() != weightScaleRows(N) || w.scale.cols() != K / kWeightBlock)
      return Status::error(StatusCode::kInvalidShape, fn, "w.scale",
                           "scale view extents differ from (ceil(N / 128), K / 128)",
                           w.scale.rows() != weightScaleRows(N) ? w.scale.rows() : w.scale.cols(),
                           w.scale.rows() != weightScaleRows(N) ? weightScaleRows(N) : K / kWeightBlock);
    if (w.scale.ld() != weightScaleLd(K))
      return Status::error(StatusCode::kInvalidShape, fn, "w.scale",
                           "BLK128x128_32F scales need the K-block stride align(K / 128, 4)", w.scale.ld(),
                           weightScaleLd(K));
    if (w.data.ld < K) return Status::error(StatusCode::kLdTooSmall, fn, "w.ld", "fp8 row stride is smaller than K", w.data.ld, K);
    if (w.data.ld % 16 != 0)
      return Status::error(StatusCode::kMisaligned, fn, "w.ld", "fp8 row stride is not a multiple of 16 bytes",
                           w.data.ld, 16);
    if (ldy < N) return Status::error(StatusCode::kLdTooSmall, fn, "ldy", "output row stride is smaller than N", ldy, N);
    if (!detail::isWholeVectors(ldy, sizeof(OutT), 16))
      return Status::error(StatusCode::kMisaligned, fn, "ldy",
                           "output row stride (elements) is not a whole number of 16 bytes", ldy, 16);
    // x's buffer holds Mpad rows: cuBLASLt reads the padded operand.
    if (Status s = detail::checkSpan(fn, "x", x.data.data, detail::stridedSpan(rowsPadded, K, x.data.ld), 1); !s)
      return s;
    if (Status s = detail::checkSpan(fn, "w", w.data.data, detail::stridedSpan(N, K, w.data.ld), 1); !s) return s;
    if (Status s = detail::checkSpan(fn, "y", y, detail::stridedSpan(rowsPadded, N, ldy), sizeof(OutT)); !s)
      return s;
    if (M == 0 || N == 0) return Status::ok();
    if (x.data.data == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x", "null fp8 activation");
    if (x.scale.data() == nullptr) return Status::error(StatusCode::kNullPointer, fn, "x.scale", "null activation scales");
    if (w.data.data == nullptr) return Status::error(StatusCode::kNullPointer, fn, "w", "null fp8 weight");
    if (w.scale.data() == nullptr) return Status::error(StatusCode::kNullPointer, fn, "w.scale", "null weight scales");
    if (y == nullptr) return Status::error(StatusCode::kNullPointer, fn, "y", "null output");
    if (Status s = detail::checkAligned(fn, "x", x.data.data, 16); !s) return s;
    if (Status s = detail::checkAligned(fn, "x.scale", x.scale.data(), 16); !s) return s;
    if (Status s = detail::checkAligned(fn, "w", w.data.data, 16); !s) return s;
    if (Status s = detail::checkAligned(fn, "w.scale", w.scale.data(), 16); !s) return s;
    if (Status s = detail::checkAligned(fn, "y", y, 16); !s) return s;
    return Status::ok();
  }

  /// The cached plan of `key`'s shape, or a new one: layouts A (K x N, ld
  /// ldw), B (K x Mpad, ld ldx), D (N x Mpad, ld ldy), and the heuristic's
  /// first algorithm for the workspace and the pointers' alignments.
  Status findOrMakePlan(const Plan& key, const Plan*& out) {
    for (const Plan& p : plans_)
      if (p.sameShape(key)) {
        out = &p;
        return Status::ok();
      }
    Plan p = key;
    const char* fn = "CublasLtBlockGemm::run: cublasLtMatrixLayoutCreate";
    cublasStatus_t s = cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(p.k),
                                                  static_cast<std::uint64_t>(p.n), p.ldw);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(p.k),
                                     static_cast<std::uint64_t>(p.rowsPadded), p.ldx);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutCreate(&p.d, p.out, static_cast<std::uint64_t>(p.n),
                                     static_cast<std::uint64_t>(p.rowsPadded), p.ldy);
    if (s != CUBLAS_STATUS_SUCCESS) {
      destroy(p);
      return detail::fromCublas(fn, s);
    }
    cublasLtMatmulPreference_t pref = nullptr;
    s = cublasLtMatmulPreferenceCreate(&pref);
    const std::uint32_t alignC = p.alignY;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes_,
                                               sizeof(workspaceBytes_));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p.alignW,
                                               sizeof(p.alignW));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p.alignX,
                                               sizeof(p.alignX));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
                                               sizeof(alignC));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p.alignY,
                                               sizeof(p.alignY));
    if (s != CUBLAS_STATUS_SUCCESS) {
      if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
      destroy(p);
      return detail::fromCublas("CublasLtBlockGemm::run: cublasLtMatmulPreference", s);
    }
    constexpr int kAsked = 8;
    cublasLtMatmulHeuristicResult_t results[kAsked] = {};
    int returned = 0;
    s = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, p.a, p.b, p.d, p.d, pref, kAsked, results, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || returned == 0) {
      destroy(p);
      return detail::fromCublas("CublasLtBlockGemm::run: cublasLtMatmulAlgoGetHeuristic (no algorithm)",
                                s != CUBLAS_STATUS_SUCCESS ? s : CUBLAS_STATUS_NOT_SUPPORTED);
    }
    p.algo = results[0].algo;
    p.info.candidates = returned;
    p.info.workspaceBytes = results[0].workspaceSize;
    std::int32_t id = -1;
    std::size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written) ==
        CUBLAS_STATUS_SUCCESS)
      p.info.algoId = id;
    plans_.push_back(p);
    out = &plans_.back();
    return Status::ok();
  }

  static void destroy(Plan& p) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
    p.a = p.b = p.d = nullptr;
  }

  void release() {
    for (Plan& p : plans_) destroy(p);
    plans_.clear();
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (handle_) cublasLtDestroy(handle_);
    if (workspace_) cudaFree(workspace_);
    desc_ = nullptr;
    handle_ = nullptr;
    workspace_ = nullptr;
    workspaceBytes_ = 0;
  }

  void swap(CublasLtBlockGemm& o) noexcept {
    std::swap(handle_, o.handle_);
    std::swap(desc_, o.desc_);
    std::swap(workspace_, o.workspace_);
    std::swap(workspaceBytes_, o.workspaceBytes_);
    std::swap(device_, o.device_);
    std::swap(plans_, o.plans_);
    std::swap(last_, o.last_);
  }

  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspaceBytes_ = 0;
  int device_ = 0;
  std::vector<Plan> plans_;
  PlanInfo last_;
};

}  // namespace fp8scale
