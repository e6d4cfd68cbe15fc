// Producer benchmarks (Google Benchmark, GPU time from events over graph
// replays of kLaunchesPerGraph launches; one source for CUDA and HIP). Every
// figure comes with its baselines from the same run: a large device-to-device
// copy (bandwidth ceiling, bytes read + written), a copy of the producer's own
// input bytes (small-M latency baseline) and an empty kernel (launch floor).
//
//   bench_producers [--benchmark_out=FILE --benchmark_out_format=json] [--quick]
//
// At M >= 8192 a run's entries spread by up to 10% on the H200 (single
// outliers): run the set 3 times in random interleaving
// (--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true);
// benchmarks/bench_table.py and plot_bench.py read the medians.
// move_bytes/... entries move each producer's bytes with no arithmetic: the
// ceiling of its read:write mix in this harness (in address order; RMSNorm's
// also in its own row order, and in its small-M block-per-row shape, where
// the cluster_k entries measure what a thread-block cluster per row costs).
//
// Counters per producer benchmark: us_per_call, GBps (bytes read + written per
// second), vs_copy_bw (GBps / the faster large copy's GBps), vs_input_copy
// (time / time of copying the input bytes). The row-major emit + materialize
// path is its own benchmark; benchmarks/bench_table.py subtracts the two. With the
// full set, tune/... entries time the block shapes, register bounds and grid
// caps the policies chose between. .../pdl entries launch with programmatic dependent launch.
// naive/... entries time plain group quant, SiLU-clamp and RMSNorm kernels (a
// calibration: what a straightforward kernel reaches against the same copy); vs_input_copy_bw
// is GBps against the copy of the entry's input bytes at the same M.
// scale_store/... entries force each L2 policy of the scale stores
// (QuantOptions::scaleStore), also with an L2 flush after every call.
#include <benchmark/benchmark.h>

#include "fp8scale/platform.hpp"
#if defined(FP8SCALE_PLATFORM_CUDA)
// The CUDA-only entries: thread-block clusters (move_bytes/.../cluster_k) and
// the naive/ calibration kernels, written with CUDA's bf16 / fp8 intrinsics
// and cub. A HIP build has every other entry.
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph_timing.cuh"
#include "fp8scale/fp8scale.hpp"

namespace {

using namespace fp8scale;
using bench::expectOk;
using bench::kLaunchesPerGraph;

const index_t kHidden = 7168;
static_assert(kHidden / 8 <= 1024, "the RMSNorm byte moves cover rows of up to 1024 16-byte vectors");
const std::vector<index_t> kRows = {1, 2, 4, 8, 16, 32, 64, 128, 512, 2048, 8192, 16384, 65536};
/// M % 4 == 3 (odd_m/... entries): ld = align(M, 4) has a padding slot a column.
const std::vector<index_t> kOddRows = {3, 127, 2047, 8191, 65535};

Stream gStream;
/// SMs (CUs) of the device, for the grids of the copy kernels.
int gSms = 0;

/// Seconds per call of `body` on gStream (support/graph_timing.cuh).
double timePerCall(const std::function<void()>& body) { return bench::timePerCall(gStream, body); }

/// The timed loop of an entry: each iteration's time is `seconds()`;
/// returns the last one (what the entry's counters report).
template <class Seconds>
double timeIterations(benchmark::State& state, const Seconds& seconds) {
  double t = 0.0;
  for (auto _ : state) {
    t = seconds();
    state.SetIterationTime(t);
  }
  return t;
}

/// timeIterations of timePerCall(call): `call` enqueues one call on gStream.
double timeCalls(benchmark::State& state, const std::function<void()>& call) {
  return timeIterations(state, [&] { return timePerCall(call); });
}

__global__ void emptyKernel() {}

/// The bandwidth baseline next to the runtime's device-to-device memcpyAsync: 16-byte loads and stores,
/// four in flight per thread, grid-stride.
__global__ void __launch_bounds__(256) copyKernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                  std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

/// The producers' bytes moved without their arithmetic, the ceiling of each
/// producer's read:write mix in this harness. A thread stands for:
///   kGroup: 16 bf16 of group quant (reads 32 B of a, writes 16 B of fp8);
///   kRms: 8 bf16 of RMSNorm quant (reads 16 B of a = x and of b = residual,
///         writes 16 B of residual_out and 8 B of fp8; residual_out goes to
///         a separate buffer here, in place in the producer: see
///         moveBytesInPlaceKernel and moveRowsKernel for what each costs);
///   kSilu: 8 outputs of SiLU-clamp quant (reads 16 B of a = gate and of
///          b = up, writes 8 B of fp8).
/// Scales (1/32 of the fp8 bytes, ~1% of the total) are left out. One
/// thread per piece, in address order, n pieces: the producers' group-tile
/// grids run row tiles fastest instead, an order that moved these same
/// bytes 2.5-4.4% slower at M >= 8192 on an H200, and RMSNorm quant's row
/// loop order moves its bytes 8-10% slower (with a separate residual_out;
/// written in place, address order loses more), so the gap to this ceiling
/// is part order, part arithmetic (docs/performance.md).
enum class MoveKind { kGroup, kRms, kSilu };
template <MoveKind kKind>
__global__ void __launch_bounds__(256) moveBytesKernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                                       uint4* __restrict__ out16, uint2* __restrict__ out8,
                                                       std::size_t n) {
  const std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  if constexpr (kKind == MoveKind::kGroup) {
    const uint4 u = a[2 * t], v = a[2 * t + 1];
    out16[t] = make_uint4(u.x ^ v.x, u.y ^ v.y, u.z ^ v.z, u.w ^ v.w);
  } else {
    const uint4 u = a[t], v = b[t];
    if constexpr (kKind == MoveKind::kRms) out16[t] = make_uint4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    out8[t] = make_uint2(u.x ^ v.y ^ u.z ^ v.w, u.y ^ v.x ^ u.w ^ v.z);
  }
}

/// kRms with the residual written in place (b := a, so that it keeps real bf16
/// values), as RMSNorm quant does; in address order. Its own kernel because
/// moveBytesKernel's pointers are __restrict__ and these alias.
__global__ void __launch_bounds__(256) moveBytesInPlaceKernel(const uint4* a, uint4* b, uint2* out8, std::size_t n) {
  const std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const uint4 u = a[t], v = b[t];
  b[t] = u;
  out8[t] = make_uint2(u.x ^ v.y ^ u.z ^ v.w, u.y ^ v.x ^ u.w ^ v.z);
}

/// RMSNorm quant's bytes moved in the order of its row-looping kernel: block b
/// takes rows b, b + gridDim.x, ..., each thread kVecs 16-byte pieces of a
/// row (c = i * blockDim.x + t), x and the residual read, the residual
/// written (in place, or to rOut), 8 bytes of fp8 written a piece; no
/// arithmetic, no barrier.
template <int kVecs>
__global__ void __launch_bounds__(256) moveRowsKernel(const uint4* x, const uint4* r, uint4* rOut, uint2* out8,
                                                      index_t rows, int vecs) {
  for (index_t m = blockIdx.x; m < rows; m += gridDim.x) {
    uint4 u[kVecs], v[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      if (c < vecs) {
        u[i] = x[m * vecs + c];
        v[i] = r[m * vecs + c];
      }
    }
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      if (c < vecs) {
        rOut[m * vecs + c] = u[i];  // the residual := x: real bf16 values stay
        out8[m * vecs + c] = make_uint2(u[i].x ^ v[i].y ^ u[i].z ^ v[i].w, u[i].y ^ v[i].x ^ u[i].w ^ v[i].z);
      }
    }
  }
}

/// One thread's vector c of row m in the small-M RMSNorm byte moves: x, the
/// residual and the weight (zero past the row).
struct RowVector {
  uint4 u = make_uint4(0, 0, 0, 0), v = u, g = u;
  /// 8 bytes of "fp8" folded from all 48 bytes read (so that no load is
  /// narrowed or dropped) and `extra`.
  __device__ uint2 fold(unsigned extra = 0) const {
    return make_uint2(u.x ^ u.z ^ v.x ^ v.z ^ g.x ^ g.z ^ extra, u.y ^ u.w ^ v.y ^ v.w ^ g.y ^ g.w);
  }
};

/// Reads vector c of row m (x, residual, weight) and writes the residual in
/// place (:= x, so that it keeps real bf16 values); nothing past the row.
__device__ __forceinline__ RowVector readRowVectorWriteResidual(const uint4* x, uint4* r, const uint4* w, index_t m,
                                                                int c, int vecs) {
  RowVector rv;
  if (c < vecs) {
    rv.u = x[m * vecs + c];
    rv.v = r[m * vecs + c];
    rv.g = w[c];
    r[m * vecs + c] = rv.u;
  }
  return rv;
}

/// RMSNorm quant's bytes in a block of 1024 threads per row, a 16-byte
/// vector a thread (its small-M shape until blocks were sized to the row;
/// at K = 7168 it now runs 896): x, the residual and the weight read, the
/// residual written in place and 8 bytes of fp8 a vector (the bytes counted
/// leave the weight out, as the producer's do). With kBarrier, what the row
/// reduction's exchange costs without its arithmetic: lane 0 of every warp
/// publishes a value taken from its loads in shared memory, one block
/// barrier, and every thread folds another warp's value into its stores.
template <bool kBarrier>
__global__ void __launch_bounds__(1024) moveRowBlockKernel(const uint4* x, uint4* r, const uint4* w, uint2* out8,
                                                           int vecs) {
  __shared__ unsigned published[32];
  const index_t m = blockIdx.x;
  const int c = static_cast<int>(threadIdx.x);
  const RowVector rv = readRowVectorWriteResidual(x, r, w, m, c, vecs);
  unsigned extra = 0;
  if constexpr (kBarrier) {
    if (c % 32 == 0) published[c / 32] = rv.u.x ^ rv.v.y;
    __syncthreads();
    extra = published[(c / 32) ^ 1];
  }
  if (c < vecs) out8[m * vecs + c] = rv.fold(extra);
}

/// moveRowBlockKernel's row spread over a thread-block cluster of kCluster
/// blocks (1024 / kCluster threads each): the same loads and stores, with
/// the exchange a row split needs in between (each block publishes a value
/// taken from its loads in shared memory, the cluster syncs, every block
/// reads all of them through distributed shared memory, the cluster syncs
/// again so that no block exits while another still reads its memory).
#if defined(FP8SCALE_PLATFORM_CUDA)
template <int kCluster>
__global__ void __launch_bounds__(1024 / kCluster) moveRowClusterKernel(const uint4* x, uint4* r, const uint4* w,
                                                                        uint2* out8, int vecs) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ unsigned published;
  const index_t m = blockIdx.x / kCluster;
  const int c = static_cast<int>(cluster.block_rank()) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
  const RowVector rv = readRowVectorWriteResidual(x, r, w, m, c, vecs);
  if (threadIdx.x == 0) published = rv.u.x ^ rv.v.y;
  cluster.sync();
  unsigned extra = 0;
#pragma unroll
  for (int k = 0; k < kCluster; ++k) extra ^= *cluster.map_shared_rank(&published, k);
  cluster.sync();
  if (c < vecs) out8[m * vecs + c] = rv.fold(extra);
}

/// The plain kernels' group tail (calibration only): a lane's 8 values and
/// their largest magnitude `amax` -> the group's scale (amax over the 16
/// lanes of the group by shuffles, at least 1e-10, / 448), returned, and the
/// values times 1 / scale to e4m3fn by the CUDA intrinsic (satfinite),
/// packed into `packed`. All 32 lanes of the warp must call it.
__device__ __forceinline__ float naiveQuantize8(const float (&v)[8], float amax, uint2& packed) {
#pragma unroll
  for (int d = 8; d > 0; d /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
  const float scale = fmaxf(amax, 1e-10f) / 448.0f;
  const float inv = 1.0f / scale;
  unsigned short pairs[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    pairs[j] = __nv_cvt_float2_to_fp8x2(make_float2(v[2 * j] * inv, v[2 * j + 1] * inv), __NV_SATFINITE, __NV_E4M3);
  packed = make_uint2(pairs[0] | (unsigned{pairs[1]} << 16), pairs[2] | (unsigned{pairs[3]} << 16));
  return scale;
}

/// Calibration: group quant (or SiLU-clamp quant) written the plain way, the
/// kind of kernel the producers' bandwidth targets are stated against, so
/// that a run's copy baseline can be compared with other harnesses'. Each group of
/// 128 outputs is 16 lanes of 8 values: one 16-byte load of x (kSilu: of
/// gate and of up), the amax over 16 lanes by shuffles, scale = amax / 448
/// (amax at least 1e-10), the values times 1 / scale to e4m3fn by the CUDA
/// intrinsic (satfinite), one 8-byte store, lane 0 stores the scale at
/// (m, g) row-major or g * M + m column-major. A 256-thread block takes 16
/// consecutive groups in row-major group order (address order); the grid
/// covers M * G groups. Not the library's code, and not bit-compatible with
/// it (the library divides by the scale); only its time is used.
template <bool kSilu, bool kColMajor>
__global__ void __launch_bounds__(256) naiveGroupQuantKernel(const __nv_bfloat16* __restrict__ x, index_t rows,
                                                             index_t cols, std::uint8_t* __restrict__ q,
                                                             float* __restrict__ s) {
  const index_t groups = cols / 128;
  const index_t gid = static_cast<index_t>(blockIdx.x) * 16 + threadIdx.x / 16;  // m * groups + g
  const int lane = static_cast<int>(threadIdx.x % 16);
  const bool valid = gid < rows * groups;
  const index_t m = valid ? gid / groups : 0, g = valid ? gid % groups : 0;
  const index_t ldx = kSilu ? 2 * cols : cols;
  const index_t c = g * 128 + lane * 8;
  float v[8];
  uint4 a = make_uint4(0, 0, 0, 0), b = a;
  if (valid) {
    a = *reinterpret_cast<const uint4*>(x + m * ldx + c);
    if constexpr (kSilu) b = *reinterpret_cast<const uint4*>(x + m * ldx + cols + c);
  }
  const auto* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float2 f = __bfloat1622float2(a2[j]);
    if constexpr (kSilu) {
      const float limit = 7.0f;
      const float2 u = __bfloat1622float2(b2[j]);
      const float g0 = fminf(f.x, limit), g1 = fminf(f.y, limit);
      f.x = g0 / (1.0f + __expf(-g0)) * fminf(fmaxf(u.x, -limit), limit);
      f.y = g1 / (1.0f + __expf(-g1)) * fminf(fmaxf(u.y, -limit), limit);
    }
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
    amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  uint2 packed;
  const float scale = naiveQuantize8(v, amax, packed);
  if (!valid) return;
  *reinterpret_cast<uint2*>(q + m * cols + c) = packed;
  if (lane == 0) s[kColMajor ? g * rows + m : m * groups + g] = scale;
}

/// Calibration, as naiveGroupQuantKernel for RMSNorm quant with the residual:
/// a 256-thread block per row of K = 7168 (896 vectors of 8 bf16). Pass 1:
/// h = x + residual, rounded to bf16 and stored in place, the sum of squares
/// (cub::BlockReduce). Pass 2: h read back (the row is in L1 / L2), times
/// rsqrt(mean + 1e-6) and the weight, then each group of 128 as above (16
/// consecutive threads of one pass; the pass's vector count, 896, leaves
/// whole warps idle, so the shuffles stay warp-uniform).
template <bool kColMajor>
__global__ void __launch_bounds__(256) naiveRmsNormQuantKernel(const __nv_bfloat16* __restrict__ x,
                                                               __nv_bfloat16* residual,
                                                               const __nv_bfloat16* __restrict__ w, index_t rows,
                                                               std::uint8_t* __restrict__ q, float* __restrict__ s) {
  constexpr index_t kCols = 7168, kVecs = kCols / 8, kGroups = kCols / 128;  // kHidden (static_assert below)
  const index_t m = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  float sumSq = 0.0f;
  for (index_t v = t; v < kVecs; v += 256) {
    const uint4 a = *reinterpret_cast<const uint4*>(x + m * kCols + v * 8);
    uint4 b = *reinterpret_cast<const uint4*>(residual + m * kCols + v * 8);
    const auto* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
    auto* b2 = reinterpret_cast<__nv_bfloat162*>(&b);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      b2[j] = __float22bfloat162_rn(make_float2(__bfloat162float(a2[j].x) + __bfloat162float(b2[j].x),
                                                __bfloat162float(a2[j].y) + __bfloat162float(b2[j].y)));
      const float2 h = __bfloat1622float2(b2[j]);
      sumSq += h.x * h.x + h.y * h.y;
    }
    *reinterpret_cast<uint4*>(residual + m * kCols + v * 8) = b;
  }
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ float inv;
  const float total = Reduce(temp).Sum(sumSq);
  if (t == 0) inv = rsqrtf(total / static_cast<float>(kCols) + 1e-6f);
  __syncthreads();
  for (index_t v = t; v < kVecs; v += 256) {
    const uint4 b = *reinterpret_cast<const uint4*>(residual + m * kCols + v * 8);
    const uint4 c = *reinterpret_cast<const uint4*>(w + v * 8);
    const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
    const auto* c2 = reinterpret_cast<const __nv_bfloat162*>(&c);
    float y[8], amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 h = __bfloat1622float2(b2[j]), g = __bfloat1622float2(c2[j]);
      y[2 * j] = h.x * inv * g.x;
      y[2 * j + 1] = h.y * inv * g.y;
      amax = fmaxf(amax, fmaxf(fabsf(y[2 * j]), fabsf(y[2 * j + 1])));
    }
    uint2 packed;
    const float scale = naiveQuantize8(y, amax, packed);
    *reinterpret_cast<uint2*>(q + m * kCols + v * 8) = packed;
    const index_t g = v / 16;
    if (t % 16 == 0) s[kColMajor ? g * rows + m : m * kGroups + g] = scale;
  }
}

#endif  // FP8SCALE_PLATFORM_CUDA

/// Device buffers sized for the largest case, reused by every benchmark.
struct Buffers {
  BFloat16* x = nullptr;     // [65536, 2 * 3072] or [65536, 7168]
  BFloat16* r = nullptr;     // residual [65536, 7168]
  BFloat16* w = nullptr;     // weight [7168]
  std::uint8_t* q = nullptr;
  float* s = nullptr;        // scales, column-major room: G * align(M, 4)
  float* sRow = nullptr;     // row-major scales for the emit + materialize path
  void* copySrc = nullptr;
  void* copyDst = nullptr;
  std::size_t copyBytes = 0;
};
Buffers gBuf;

void allocate() {
  const index_t maxM = kRows.back();
  const std::size_t xElems = static_cast<std::size_t>(maxM) * 2 * 3072 > static_cast<std::size_t>(maxM) * kHidden
                                 ? static_cast<std::size_t>(maxM) * 2 * 3072
                                 : static_cast<std::size_t>(maxM) * kHidden;
  BENCH_CHECK(runtime::malloc(&gBuf.x, xElems * 2));
  BENCH_CHECK(runtime::malloc(&gBuf.r, static_cast<std::size_t>(maxM) * kHidden * 2));
  BENCH_CHECK(runtime::malloc(&gBuf.w, kHidden * 2));
  BENCH_CHECK(runtime::malloc(&gBuf.q, static_cast<std::size_t>(maxM) * kHidden));
  BENCH_CHECK(runtime::malloc(&gBuf.s, static_cast<std::size_t>(alignUp(maxM, 4)) * 56 * 4));
  BENCH_CHECK(runtime::malloc(&gBuf.sRow, static_cast<std::size_t>(maxM) * 56 * 4));
  gBuf.copyBytes = static_cast<std::size_t>(maxM) * kHidden * 4;  // the largest input (RMSNorm: x + residual)
  BENCH_CHECK(runtime::malloc(&gBuf.copySrc, gBuf.copyBytes));
  BENCH_CHECK(runtime::malloc(&gBuf.copyDst, gBuf.copyBytes));
  // Activation-like data (never zeros: zeros can run faster than real data).
  std::vector<BFloat16> host(xElems);
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (std::size_t i = 0; i < std::min<std::size_t>(host.size(), std::size_t{1} << 24); ++i) host[i] = toBFloat16(n(rng));
  for (std::size_t i = std::size_t{1} << 24; i < host.size(); ++i) host[i] = host[i % (std::size_t{1} << 24)];
  BENCH_CHECK(runtime::memcpy(gBuf.x, host.data(), xElems * 2, runtime::Copy::HostToDevice));
  BENCH_CHECK(runtime::memcpy(gBuf.r, host.data(), static_cast<std::size_t>(maxM) * kHidden * 2, runtime::Copy::HostToDevice));
  BENCH_CHECK(runtime::memcpy(gBuf.w, host.data(), kHidden * 2, runtime::Copy::HostToDevice));
  BENCH_CHECK(runtime::memset(gBuf.copySrc, 0x3C, gBuf.copyBytes));
}

// Baselines measured first, read by the producer benchmarks.
double gCopyBandwidth = 0.0;          // bytes (read + written) / s of the faster 256 MiB copy, at start
std::map<std::size_t, double> gInputCopyTime;  // seconds to copy n bytes

double inputCopyTime(std::size_t bytes) {
  auto it = gInputCopyTime.find(bytes);
  if (it != gInputCopyTime.end()) return it->second;
  const double t = timePerCall([bytes] {
    BENCH_CHECK(runtime::memcpyAsync(gBuf.copyDst, gBuf.copySrc, bytes, runtime::Copy::DeviceToDevice, gStream));
  });
  gInputCopyTime[bytes] = t;
  return t;
}

void report(benchmark::State& state, double seconds, double bytes, std::size_t inputBytes) {
  state.counters["us_per_call"] = seconds * 1e6;
  state.counters["GBps"] = bytes / seconds * 1e-9;
  state.counters["vs_copy_bw"] = bytes / seconds / gCopyBandwidth;
  state.counters["vs_input_copy"] = seconds / inputCopyTime(inputBytes);
  // Bandwidth against the copy of the input bytes at the same M (bytes read +
  // written by that copy: 2 x inputBytes): a baseline of the entry's own size,
  // next to the large copy's.
  const double inputCopyBandwidth = 2.0 * static_cast<double>(inputBytes) / inputCopyTime(inputBytes);
  state.counters["vs_input_copy_bw"] = bytes / seconds / inputCopyBandwidth;
  state.counters["M"] = static_cast<double>(state.range(0));
}

/// Seconds per 256 MiB copy (4x the L2): kind 0 = runtime::memcpyAsync, 1 = copyKernel.
double timeLargeCopy(int kind) {
  constexpr std::size_t bytes = std::size_t{256} << 20;
  return kind == 0 ? timePerCall([] {
    BENCH_CHECK(runtime::memcpyAsync(gBuf.copyDst, gBuf.copySrc, bytes, runtime::Copy::DeviceToDevice, gStream));
  }) : timePerCall([] {
    copyKernel<<<gSms * 8, 256, 0, gStream>>>(static_cast<const uint4*>(gBuf.copySrc), static_cast<uint4*>(gBuf.copyDst),
                                            bytes / 16);
  });
}

/// The large copies again, as entries of the run (arg = kind). The baseline of
/// the vs_copy_bw counters is the faster of the two measured at start (main),
/// so that it is the same for every entry whatever order they run in.
void BM_CopyLarge(benchmark::State& state) {
  const std::size_t bytes = std::size_t{256} << 20;
  const double t = timeIterations(state, [&] { return timeLargeCopy(static_cast<int>(state.range(0))); });
  state.counters["GBps"] = 2.0 * static_cast<double>(bytes) / t * 1e-9;
  state.counters["us_per_call"] = t * 1e6;
}

void BM_EmptyKernel(benchmark::State& state) {
  const double t = timeCalls(state, [] { emptyKernel<<<1, 32, 0, gStream>>>(); });
  state.counters["us_per_call"] = t * 1e6;
}

void BM_CopyInput(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) * kHidden * 2;
  const double t = timeIterations(state, [&] {
    gInputCopyTime.erase(bytes);
    return inputCopyTime(bytes);
  });
  state.counters["us_per_call"] = t * 1e6;
  state.counters["GBps"] = 2.0 * bytes / t * 1e-9;
  state.counters["M"] = static_cast<double>(state.range(0));
}

/// moveBytesKernel for a producer's shape: args (M) for group quant and
/// RMSNorm (K = 7168), (M, I) for SiLU-clamp. Reported like the producer
/// (bytes of the producer without its scales).
template <MoveKind kKind>
void BM_MoveBytes(benchmark::State& state) {
  const index_t M = state.range(0);
  const index_t cols = kKind == MoveKind::kSilu ? state.range(1) : kHidden;
  const std::size_t n = static_cast<std::size_t>(M) * cols / (kKind == MoveKind::kGroup ? 16 : 8);
  const double bytesPerPiece = kKind == MoveKind::kGroup ? 48.0 : kKind == MoveKind::kRms ? 56.0 : 40.0;
  const auto* a = reinterpret_cast<const uint4*>(gBuf.x);
  const auto* b = reinterpret_cast<const uint4*>(gBuf.r);
  const double t = timeCalls(state, [&] {
    moveBytesKernel<kKind><<<static_cast<unsigned>((n + 255) / 256), 256, 0, gStream>>>(
        a, b, static_cast<uint4*>(gBuf.copyDst), reinterpret_cast<uint2*>(gBuf.q), n);
  });
  report(state, t, bytesPerPiece * static_cast<double>(n), n * 32);  // 32 input bytes a piece
}

/// Times `launch` (one call) as a move of RMSNorm quant's bytes over M rows
/// of K = 7168: 56 bytes per 16-byte vector of x (x and the residual read,
/// the residual written, 8 bytes of fp8), 32 input bytes per vector.
template <class Launch>
void timeRmsMove(benchmark::State& state, const Launch& launch) {
  const double vectors = static_cast<double>(state.range(0)) * (kHidden / 8);
  const double t = timeCalls(state, launch);
  report(state, t, 56.0 * vectors, static_cast<std::size_t>(vectors) * 32);
}

/// moveBytesInPlaceKernel over M rows of K = 7168 (RMSNorm quant's mix).
void BM_MoveBytesInPlace(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) * kHidden / 8;
  timeRmsMove(state, [&] {
    moveBytesInPlaceKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, gStream>>>(
        reinterpret_cast<const uint4*>(gBuf.x), reinterpret_cast<uint4*>(gBuf.r), reinterpret_cast<uint2*>(gBuf.q), n);
  });
}

/// moveRowsKernel on kBlocksPerSm x SMs blocks of 256 threads (K = 7168).
template <int kBlocksPerSm, bool kInPlace>
void BM_MoveRows(benchmark::State& state) {
  const index_t M = state.range(0);
  const int sms = gSms;
  timeRmsMove(state, [&] {
    moveRowsKernel<4><<<static_cast<unsigned>(std::min<index_t>(M, index_t{sms} * kBlocksPerSm)), 256, 0, gStream>>>(
        reinterpret_cast<const uint4*>(gBuf.x), reinterpret_cast<const uint4*>(gBuf.r),
        kInPlace ? reinterpret_cast<uint4*>(gBuf.r) : static_cast<uint4*>(gBuf.copyDst),
        reinterpret_cast<uint2*>(gBuf.q), M, kHidden / 8);
  });
}

/// moveRowBlockKernel over M rows of K = 7168 (RMSNorm quant's small-M shape).
template <bool kBarrier>
void BM_MoveRowBlock(benchmark::State& state) {
  timeRmsMove(state, [&] {
    moveRowBlockKernel<kBarrier><<<static_cast<unsigned>(state.range(0)), 1024, 0, gStream>>>(
        reinterpret_cast<const uint4*>(gBuf.x), reinterpret_cast<uint4*>(gBuf.r),
        reinterpret_cast<const uint4*>(gBuf.w), reinterpret_cast<uint2*>(gBuf.q), kHidden / 8);
  });
}

#if defined(FP8SCALE_PLATFORM_CUDA)
/// moveRowClusterKernel over M rows of K = 7168, one cluster of kCluster
/// blocks a row.
template <int kCluster>
void BM_MoveRowCluster(benchmark::State& state) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kCluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(state.range(0) * kCluster));
  config.blockDim = dim3(1024 / kCluster);
  config.stream = gStream;
  config.attrs = attr;
  config.numAttrs = 1;
  timeRmsMove(state, [&] {
    BENCH_CHECK(cudaLaunchKernelEx(&config, moveRowClusterKernel<kCluster>, reinterpret_cast<const uint4*>(gBuf.x),
                                   reinterpret_cast<uint4*>(gBuf.r), reinterpret_cast<const uint4*>(gBuf.w),
                                   reinterpret_cast<uint2*>(gBuf.q), kHidden / 8));
  });
}

#endif  // FP8SCALE_PLATFORM_CUDA

template <class Layout>
ScaleView<float, Layout> scaleView(index_t M, index_t G);
template <>
ScaleView<float, RowMajor> scaleView<RowMajor>(index_t M, index_t G) {
  return rowMajorView(gBuf.s, M, G).value();
}
template <>
ScaleView<float, ColMajor> scaleView<ColMajor>(index_t M, index_t G) {
  return colMajorView(gBuf.s, M, G, M).value();
}
/// The scale view of a producer entry: ld = M (kLdAlign 1), or column-major
/// with ld = align(M, kLdAlign) (DeepGEMM's TMA-aligned ld for fp32 scales:
/// kLdAlign 4; padding slots for M % 4 != 0).
template <class Layout, int kLdAlign>
ScaleView<float, Layout> entryScaleView(index_t M, index_t G) {
  static_assert(kLdAlign == 1 || Layout::kColumnMajor, "only column-major views take a padded ld");
  if constexpr (kLdAlign == 1)
    return scaleView<Layout>(M, G);
  else
    return colMajorView(gBuf.s, M, G, alignUp(M, kLdAlign)).value();
}

/// 64 MiB copied by copyKernel (between the copy buffers, apart from every
/// producer buffer): more than the H200's 50 MB L2, so the producer's
/// normal-priority dirty lines are written back inside the timed call when
/// it follows the producer (kThenFlush entries). Lines stored with
/// evict_last most likely survive it: the copy's own lines go first.
void flushL2() {
  const std::size_t bytes = std::size_t{64} << 20;
  copyKernel<<<gSms * 8, 256, 0, gStream>>>(static_cast<const uint4*>(gBuf.copySrc), static_cast<uint4*>(gBuf.copyDst),
                                          bytes / 16);
}

void BM_FlushL2(benchmark::State& state) {
  const double t = timeCalls(state, flushL2);
  state.counters["us_per_call"] = t * 1e6;
}

/// What a producer entry followed by flushL2() in each timed call reports:
/// the pair's us_per_call and M (bandwidth counters would mislead).
void reportThenFlush(benchmark::State& state, double seconds) {
  state.counters["us_per_call"] = seconds * 1e6;
  state.counters["M"] = static_cast<double>(state.range(0));
}

/// The options of a producer entry: PDL or not, and the scale-store policy.
template <bool kPdl, ScaleStorePolicy kStore>
QuantOptions producerOptions() {
  QuantOptions opt;
  opt.programmaticLaunch = kPdl;
  opt.scaleStore = kStore;
  return opt;
}

/// Times a producer entry: `call` enqueues one producer call on gStream.
/// kThenFlush: each timed call is followed by flushL2() and reported by
/// reportThenFlush; otherwise reported as `bytes` moved and `inputBytes`
/// read (report).
template <bool kThenFlush, class Call>
void timeProducer(benchmark::State& state, const Call& call, double bytes, std::size_t inputBytes) {
  const double t = timeCalls(state, [&] {
    call();
    if constexpr (kThenFlush) flushL2();
  });
  if constexpr (kThenFlush)
    reportThenFlush(state, t);
  else
    report(state, t, bytes, inputBytes);
}

template <class Layout, bool kPdl = false, ScaleStorePolicy kStore = ScaleStorePolicy::kEvictNormal,
          bool kThenFlush = false, int kLdAlign = 1>
void BM_GroupQuant(benchmark::State& state) {
  const index_t M = state.range(0), K = kHidden, G = K / 128;
  const QuantOptions opt = producerOptions<kPdl, kStore>();
  const auto in = GroupQuantInput<BFloat16>::matrix(gBuf.x, M, K, K);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, K, K};
  const auto sv = entryScaleView<Layout, kLdAlign>(M, G);
  timeProducer<kThenFlush>(
      state, [&] { expectOk(groupQuant<E4M3FN>(in, q, sv, opt, gStream).status()); },
      static_cast<double>(M) * K * 3 + M * G * 4.0, static_cast<std::size_t>(M * K * 2));
}

/// RMSNorm quant of the first M rows of x, K columns (row stride K; 7168 by
/// default), with the residual (updated in place) and the weight.
RmsNormQuantInput<BFloat16> rmsInput(index_t M, index_t K = kHidden) {
  return RmsNormQuantInput<BFloat16>::matrix(gBuf.x, M, K, K, gBuf.w).withResidual(gBuf.r, K);
}

/// An RMSNorm entry's bytes: x and the residual read, the residual written in
/// place, fp8 and fp32 scales (groups of 128) written (the weight, read from
/// the L2, left out) ...
double rmsBytes(index_t M, index_t K) { return static_cast<double>(M) * K * (2 + 2 + 2 + 1) + M * (K / 128) * 4.0; }
/// ... and its input bytes (x and the residual).
std::size_t rmsInputBytes(index_t M, index_t K) { return static_cast<std::size_t>(M * K * 4); }

/// One RMSNorm launch of a fixed block shape (kThreads x kVecs vectors):
/// kWaves > 0: the row-looping kernel on kWaves x resident blocks
/// (__launch_bounds__ min blocks kMinBlocks); kWaves == 0: a block per row;
/// kWaves == -1: a block per row with h in shared memory
/// (rmsNormQuantStagedKernel, min blocks kMinBlocks).
template <int kThreads, int kVecs, int kMinBlocks, int kWaves, class Layout>
void launchRmsNormShape(const RmsNormQuantInput<BFloat16>& in, const Fp8Matrix<E4M3FN>& q,
                        const ScaleView<float, Layout>& sv) {
  static_assert(kWaves >= -1 && (kWaves != -1 || kMinBlocks > 0), "staged entries need their min blocks");
  const QuantOptions opt;
  if constexpr (kWaves == 0)
    expectOk(detail::launchRmsNormQuantBlocks<E4M3FN, kThreads, kVecs>(in, q, sv, opt, E4M3FN::kMax, gStream));
  else if constexpr (kWaves == -1)
    expectOk(
        detail::launchRmsNormQuantStaged<E4M3FN, kThreads, kVecs, kMinBlocks>(in, q, sv, opt, E4M3FN::kMax, gStream));
  else
    expectOk(detail::launchRmsNormQuantRows<E4M3FN, kThreads, kVecs, kMinBlocks>(in, q, sv, opt, E4M3FN::kMax,
                                                                               gStream, kWaves));
}

template <class Layout, bool kPdl = false, ScaleStorePolicy kStore = ScaleStorePolicy::kEvictNormal,
          bool kThenFlush = false, int kLdAlign = 1>
void BM_RmsNormQuant(benchmark::State& state) {
  const index_t M = state.range(0), K = kHidden, G = K / 128;
  const QuantOptions opt = producerOptions<kPdl, kStore>();
  const RmsNormQuantInput<BFloat16> in = rmsInput(M);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, K, K};
  const auto sv = entryScaleView<Layout, kLdAlign>(M, G);
  // x and residual read, residual written, fp8 and scales written (weight: L2).
  // The residual accumulates x over the replays: magnitudes grow slowly and
  // stay finite, which keeps the data realistic for timing.
  timeProducer<kThenFlush>(
      state, [&] { expectOk(rmsNormQuant<E4M3FN>(in, q, sv, opt, gStream).status()); },
      rmsBytes(M, K), rmsInputBytes(M, K));
}

/// RMSNorm quant (+ residual) at other hidden sizes: rows of K = state.range(1)
/// columns (row stride K). kThreads = 0: the launcher (rmsNormQuant);
/// otherwise a block-per-row launch of kThreads x kVecs (kMinBlocks > 0: the
/// staged kernel with that many min blocks).
template <class Layout, int kThreads = 0, int kVecs = 1, int kMinBlocks = 0>
void BM_RmsNormHidden(benchmark::State& state) {
  const index_t M = state.range(0), K = state.range(1), G = K / 128;
  const RmsNormQuantInput<BFloat16> in = rmsInput(M, K);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, K, K};
  const auto sv = scaleView<Layout>(M, G);
  timeProducer<false>(
      state,
      [&] {
        if constexpr (kThreads == 0)
          expectOk(rmsNormQuant<E4M3FN>(in, q, sv, QuantOptions{}, gStream).status());
        else
          launchRmsNormShape<kThreads, kVecs, kMinBlocks, (kMinBlocks > 0 ? -1 : 0)>(in, q, sv);
      },
      rmsBytes(M, K), rmsInputBytes(M, K));
}

template <class Layout, bool kPdl = false, ScaleStorePolicy kStore = ScaleStorePolicy::kEvictNormal,
          int kLdAlign = 1>
void BM_SiluClampQuant(benchmark::State& state) {
  const index_t M = state.range(0), I = state.range(1), G = I / 128;
  const QuantOptions opt = producerOptions<kPdl, kStore>();
  const SiluClampInput<BFloat16> in{gBuf.x, M, I, 2 * I, 7.0f};
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, I, I};
  const auto sv = entryScaleView<Layout, kLdAlign>(M, G);
  timeProducer<false>(
      state, [&] { expectOk(siluClampQuant<E4M3FN>(in, q, sv, opt, gStream).status()); },
      static_cast<double>(M) * I * 5 + M * G * 4.0, static_cast<std::size_t>(M * I * 4));
  state.counters["I"] = static_cast<double>(I);
}

#if defined(FP8SCALE_PLATFORM_CUDA)
/// naiveGroupQuantKernel (calibration): args (M) for group quant (K = 7168),
/// (M, I) for SiLU-clamp; reported with the producer entries' byte counts.
template <bool kSilu, bool kColMajor>
void BM_Naive(benchmark::State& state) {
  const index_t M = state.range(0), N = kSilu ? state.range(1) : kHidden, G = N / 128;
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(gBuf.x);
  const auto blocks = static_cast<unsigned>((M * G + 15) / 16);
  const double t = timeCalls(state, [&] {
    naiveGroupQuantKernel<kSilu, kColMajor><<<blocks, 256, 0, gStream>>>(x, M, N, gBuf.q, gBuf.s);
    BENCH_CHECK(deviceLastError());
  });
  const double bytesPerValue = kSilu ? 5.0 : 3.0;
  const index_t inputBytesPerValue = kSilu ? 4 : 2;
  report(state, t, static_cast<double>(M) * N * bytesPerValue + M * G * 4.0,
         static_cast<std::size_t>(M * N * inputBytesPerValue));
  if constexpr (kSilu) state.counters["I"] = static_cast<double>(N);
}

static_assert(kHidden == 7168, "naiveRmsNormQuantKernel is written for rows of 7168");

/// naiveRmsNormQuantKernel (calibration) over M rows of K = 7168, the residual
/// updated in place; reported with BM_RmsNormQuant's byte counts.
template <bool kColMajor>
void BM_NaiveRmsNorm(benchmark::State& state) {
  const index_t M = state.range(0), K = kHidden;
  const double t = timeCalls(state, [&] {
    naiveRmsNormQuantKernel<kColMajor><<<static_cast<unsigned>(M), 256, 0, gStream>>>(
        reinterpret_cast<const __nv_bfloat16*>(gBuf.x), reinterpret_cast<__nv_bfloat16*>(gBuf.r),
        reinterpret_cast<const __nv_bfloat16*>(gBuf.w), M, gBuf.q, gBuf.s);
    BENCH_CHECK(deviceLastError());
  });
  report(state, t, rmsBytes(M, K), rmsInputBytes(M, K));
}
#endif  // FP8SCALE_PLATFORM_CUDA

/// The old way and the new way of feeding a column-major consumer: row-major
/// emit + materialize (two launches) vs transposed emit (one), group quant.
void BM_EmitThenMaterialize(benchmark::State& state) {
  const index_t M = state.range(0), K = kHidden, G = K / 128;
  QuantOptions opt;
  const auto in = GroupQuantInput<BFloat16>::matrix(gBuf.x, M, K, K);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, K, K};
  const auto rowView = rowMajorView(gBuf.sRow, M, G).value();
  const double t = timeCalls(state, [&] {
    expectOk(groupQuant<E4M3FN>(in, q, rowView, opt, gStream).status());
    expectOk(materialize(rowView, gBuf.s, M, gStream).status());
  });
  report(state, t, static_cast<double>(M) * K * 3 + M * G * 4.0, static_cast<std::size_t>(M * K * 2));
}

/// Tuning: RMSNorm quant, K = 7168, with a fixed block shape
/// (launchRmsNormShape).
template <int kThreads, int kVecs, int kMinBlocks, int kWaves, class Layout = RowMajor>
void BM_TuneRmsNormBlock(benchmark::State& state) {
  const index_t M = state.range(0), K = kHidden, G = K / 128;
  const RmsNormQuantInput<BFloat16> in = rmsInput(M);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, K, K};
  const auto sv = scaleView<Layout>(M, G);
  const double t = timeCalls(state, [&] { launchRmsNormShape<kThreads, kVecs, kMinBlocks, kWaves>(in, q, sv); });
  report(state, t, rmsBytes(M, K), rmsInputBytes(M, K));
}

/// Tuning kernel of the group-tile producers: kElems values a thread, a ring
/// of kDepth row tiles in flight; Load picks group quant or SiLU.
template <class Load, int kElems, int kDepth, bool T>
__global__ void __launch_bounds__(256)
    tuneGroupTileKernel(Load load, index_t rows, index_t groups, Fp8Matrix<E4M3FN> q,
                        ScaleView<float, ScaleLayoutFor<T>> scale, float fmax, float eps, int tileRows, int tileGroups) {
  static_assert(kDepth == 0 || kDepth == 1, "d0: a block per row tile; d1: blocks looping over row tiles");
  // The launcher's kernels: a column-major looping kernel carries the padding code.
  detail::groupTile<E4M3FN, ScaleFp32, 128, kElems, /*kLoop*/ kDepth == 1, /*kPadding*/ T && kDepth == 1>(
      load, rows, groups, q, scale, fmax, eps, tileRows, tileGroups, /*scalesEvictLast=*/false);
}

/// Launches tuneGroupTileKernel on groupTileGrid's grid for blocks of
/// kThreads threads of kElems values and a cap of kWaves x resident blocks
/// (0: none), plain scale stores (the producers' default).
template <class Load, int kElems, int kDepth, int kWaves, class Layout, int kThreads = 256>
void launchTuneGroupTile(const Load& load, index_t M, index_t G, const Fp8Matrix<E4M3FN>& q,
                         const ScaleView<float, Layout>& sv) {
  constexpr bool T = Layout::kColumnMajor;
  if (sv.hasPadding()) {  // the tune grids have no padding tile
    std::fprintf(stderr, "tune entries take scale views without padding slots (ld = M)\n");
    std::exit(1);
  }
  const auto kernel = tuneGroupTileKernel<Load, kElems, kDepth, T>;
  int resident = 0;
  if (kWaves > 0) BENCH_CHECK(detail::residentBlocks(&resident, kernel, kThreads));
  const detail::GroupTileGrid grid =
      detail::groupTileGrid("tune", T, M, G, 128, kThreads, kElems, static_cast<index_t>(resident) * kWaves, 0,
                            GroupTilePolicy<BFloat16>::kSectorScales);
  expectOk(grid.status);
  kernel<<<dim3(static_cast<unsigned>(grid.gridX), static_cast<unsigned>(grid.gridY)), kThreads, 0, gStream>>>(
      load, M, G, q, sv, E4M3FN::kMax, kDefaultAmaxEps, grid.tileRows, grid.tileGroups);
  BENCH_CHECK(deviceLastError());
}

/// What a group-tile tuning entry quantizes: its load, its output columns
/// (K = kHidden for group quant; I, the entry's second argument, for
/// SiLU-clamp), and the bytes per output value read + written and read from
/// the input (for the bandwidth and input-copy ratios).
template <class Load>
struct TuneCase;
template <>
struct TuneCase<detail::PlainLoad<BFloat16>> {
  static constexpr int kBytesPerValue = 3, kInputBytesPerValue = 2;  // bf16 in, fp8 out
  static index_t cols(const benchmark::State&) { return kHidden; }
  static detail::PlainLoad<BFloat16> load(index_t M, index_t K) {
    detail::PlainLoad<BFloat16> l;
    l.in = GroupQuantInput<BFloat16>::matrix(gBuf.x, M, K, K);
    return l;
  }
};
template <>
struct TuneCase<detail::SiluClampLoad<BFloat16>> {
  static constexpr int kBytesPerValue = 5, kInputBytesPerValue = 4;  // gate and up in, fp8 out
  static index_t cols(const benchmark::State& state) { return state.range(1); }
  static detail::SiluClampLoad<BFloat16> load(index_t M, index_t I) {
    detail::SiluClampLoad<BFloat16> l;
    l.in = SiluClampInput<BFloat16>{gBuf.x, M, I, 2 * I, 7.0f};
    return l;
  }
};

/// Group-tile tuning entry (args M, and I for SiLU-clamp).
template <class Load, int kElems, int kDepth, int kWaves, class Layout, int kThreads = 256>
void BM_TuneGroupTile(benchmark::State& state) {
  using Case = TuneCase<Load>;
  const index_t M = state.range(0), N = Case::cols(state), G = N / 128;
  const Load load = Case::load(M, N);
  const Fp8Matrix<E4M3FN> q{gBuf.q, M, N, N};
  const auto sv = scaleView<Layout>(M, G);
  const double t =
      timeCalls(state, [&] { launchTuneGroupTile<Load, kElems, kDepth, kWaves, Layout, kThreads>(load, M, G, q, sv); });
  report(state, t, static_cast<double>(M) * N * Case::kBytesPerValue + M * G * 4.0,
         static_cast<std::size_t>(M * N * Case::kInputBytesPerValue));
}

void registerTuning() {
  auto reg = [&](const char* name, auto fn) {
    for (index_t M : {1, 8, 64, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536})
      benchmark::RegisterBenchmark(name, fn)->Arg(M)->UseManualTime()->Iterations(3);
  };
  // RMSNorm: threads x vectors, then block_per_row or rows/(min blocks per SM)/(waves)
  reg("tune/rmsnorm_quant/row_major/1024x1/block_per_row", BM_TuneRmsNormBlock<1024, 1, 1, 0>);
  reg("tune/rmsnorm_quant/row_major/1024x1/rows/b1/w1", BM_TuneRmsNormBlock<1024, 1, 1, 1>);
  reg("tune/rmsnorm_quant/row_major/512x2/rows/b1/w1", BM_TuneRmsNormBlock<512, 2, 1, 1>);
  reg("tune/rmsnorm_quant/row_major/256x4/rows/b2/w1", BM_TuneRmsNormBlock<256, 4, 2, 1>);
  reg("tune/rmsnorm_quant/row_major/128x8/rows/b2/w1", BM_TuneRmsNormBlock<128, 8, 2, 1>);
  reg("tune/rmsnorm_quant/col_major/256x4/rows/b2/w1", BM_TuneRmsNormBlock<256, 4, 2, 1, ColMajor>);
  // ... a block per row with h in shared memory (b: min blocks per SM; the
  // shapes that spill at their register bound, 256 x 4 at b5 / b6 and
  // 128 x 8 at b8, ran at 0.4-0.7x the copy on an H200)
  reg("tune/rmsnorm_quant/row_major/256x4/staged/b4", BM_TuneRmsNormBlock<256, 4, 4, -1>);
  reg("tune/rmsnorm_quant/row_major/512x2/staged/b3", BM_TuneRmsNormBlock<512, 2, 3, -1>);
  reg("tune/rmsnorm_quant/col_major/512x2/staged/b3", BM_TuneRmsNormBlock<512, 2, 3, -1, ColMajor>);
  // Group quant: values a thread / row tiles in flight (d) / waves (w; 0: a
  // block per tile)
  using Plain = detail::PlainLoad<BFloat16>;
  reg("tune/group_quant/row_major/e16/d0", BM_TuneGroupTile<Plain, 16, 0, 0, RowMajor>);
  reg("tune/group_quant/row_major/e16/d1/w1", BM_TuneGroupTile<Plain, 16, 1, 1, RowMajor>);
  reg("tune/group_quant/row_major/e16/d1/w2", BM_TuneGroupTile<Plain, 16, 1, 2, RowMajor>);
  reg("tune/group_quant/col_major/e16/d0", BM_TuneGroupTile<Plain, 16, 0, 0, ColMajor>);
  reg("tune/group_quant/col_major/e16/d1/w1", BM_TuneGroupTile<Plain, 16, 1, 1, ColMajor>);
  // ... a block per tile of fewer threads (t64: 8 groups a block): more SMs at small M;
  // e8: 8 values a thread (t128 e8: the small-grid kernel, 8 groups a block)
  reg("tune/group_quant/row_major/e16/d0/t128", BM_TuneGroupTile<Plain, 16, 0, 0, RowMajor, 128>);
  reg("tune/group_quant/row_major/e16/d0/t64", BM_TuneGroupTile<Plain, 16, 0, 0, RowMajor, 64>);
  reg("tune/group_quant/col_major/e16/d0/t64", BM_TuneGroupTile<Plain, 16, 0, 0, ColMajor, 64>);
  reg("tune/group_quant/row_major/e8/d0/t128", BM_TuneGroupTile<Plain, 8, 0, 0, RowMajor, 128>);
  reg("tune/group_quant/row_major/e8/d0/t64", BM_TuneGroupTile<Plain, 8, 0, 0, RowMajor, 64>);
  reg("tune/group_quant/col_major/e8/d0/t128", BM_TuneGroupTile<Plain, 8, 0, 0, ColMajor, 128>);
  // ... e4: half a vector (8 bytes) a thread, a group of 128 over a whole warp
  reg("tune/group_quant/row_major/e4/d0/t128", BM_TuneGroupTile<Plain, 4, 0, 0, RowMajor, 128>);
  reg("tune/group_quant/row_major/e4/d0/t64", BM_TuneGroupTile<Plain, 4, 0, 0, RowMajor, 64>);
  // SiLU-clamp, I = 2048 and 3072
  using Silu = detail::SiluClampLoad<BFloat16>;
  auto regSilu = [&](const char* name, auto fn) {
    for (index_t I : {2048, 3072})
      for (index_t M : {1, 8, 64, 512, 2048, 8192, 65536})
        benchmark::RegisterBenchmark(name, fn)->Args({M, I})->UseManualTime()->Iterations(3);
  };
  regSilu("tune/silu_clamp_quant/row_major/e16/d0", BM_TuneGroupTile<Silu, 16, 0, 0, RowMajor>);
  regSilu("tune/silu_clamp_quant/row_major/e16/d1/w1", BM_TuneGroupTile<Silu, 16, 1, 1, RowMajor>);
  regSilu("tune/silu_clamp_quant/col_major/e16/d0", BM_TuneGroupTile<Silu, 16, 0, 0, ColMajor>);
  regSilu("tune/silu_clamp_quant/col_major/e16/d1/w1", BM_TuneGroupTile<Silu, 16, 1, 1, ColMajor>);
  regSilu("tune/silu_clamp_quant/row_major/e16/d0/t128", BM_TuneGroupTile<Silu, 16, 0, 0, RowMajor, 128>);
  regSilu("tune/silu_clamp_quant/row_major/e16/d0/t64", BM_TuneGroupTile<Silu, 16, 0, 0, RowMajor, 64>);
  regSilu("tune/silu_clamp_quant/row_major/e16/d0/t32", BM_TuneGroupTile<Silu, 16, 0, 0, RowMajor, 32>);
  regSilu("tune/silu_clamp_quant/col_major/e16/d0/t64", BM_TuneGroupTile<Silu, 16, 0, 0, ColMajor, 64>);
  regSilu("tune/silu_clamp_quant/row_major/e8/d0/t128", BM_TuneGroupTile<Silu, 8, 0, 0, RowMajor, 128>);
  regSilu("tune/silu_clamp_quant/row_major/e8/d0/t64", BM_TuneGroupTile<Silu, 8, 0, 0, RowMajor, 64>);
  regSilu("tune/silu_clamp_quant/col_major/e8/d0/t128", BM_TuneGroupTile<Silu, 8, 0, 0, ColMajor, 128>);
  regSilu("tune/silu_clamp_quant/row_major/e4/d0/t128", BM_TuneGroupTile<Silu, 4, 0, 0, RowMajor, 128>);
  regSilu("tune/silu_clamp_quant/row_major/e4/d0/t64", BM_TuneGroupTile<Silu, 4, 0, 0, RowMajor, 64>);
  regSilu("tune/silu_clamp_quant/col_major/e4/d0/t128", BM_TuneGroupTile<Silu, 4, 0, 0, ColMajor, 128>);
  // ... and over the rest of SiLU-clamp's small grids (GroupTilePolicy::kSiluSmallGridElems)
  for (index_t I : {2048, 3072})
    for (index_t M : {16, 32, 96, 128, 168, 256}) {
      auto small = [&](const char* name, auto fn) {
        benchmark::RegisterBenchmark(name, fn)->Args({M, I})->UseManualTime()->Iterations(3);
      };
      small("tune/silu_clamp_quant/row_major/e8/d0/t128", BM_TuneGroupTile<Silu, 8, 0, 0, RowMajor, 128>);
      small("tune/silu_clamp_quant/row_major/e4/d0/t128", BM_TuneGroupTile<Silu, 4, 0, 0, RowMajor, 128>);
      small("tune/silu_clamp_quant/col_major/e8/d0/t128", BM_TuneGroupTile<Silu, 8, 0, 0, ColMajor, 128>);
      small("tune/silu_clamp_quant/col_major/e4/d0/t128", BM_TuneGroupTile<Silu, 4, 0, 0, ColMajor, 128>);
    }
}

/// scale_store/...: the L2 policy of the scale stores (QuantOptions::
/// scaleStore) forced each way in the same run, at the M where it matters;
/// then_flush: each call followed by flushL2() (64 MiB of normal-priority
/// traffic; see there for what it does not flush).
void registerScaleStore() {
  // "plain": ScaleStorePolicy::kEvictNormal, the stores without a cache hint (the default).
  constexpr auto kEvictLast = ScaleStorePolicy::kEvictLast, kPlain = ScaleStorePolicy::kEvictNormal;
  auto reg = [&](const char* name, auto fn) {
    for (index_t M : {64, 8192, 16384, 65536})
      benchmark::RegisterBenchmark(name, fn)->Arg(M)->UseManualTime()->Iterations(3);
  };
  reg("scale_store/evict_last/group_quant/row_major", BM_GroupQuant<RowMajor, false, kEvictLast>);
  reg("scale_store/plain/group_quant/row_major", BM_GroupQuant<RowMajor, false, kPlain>);
  reg("scale_store/evict_last/group_quant/col_major", BM_GroupQuant<ColMajor, false, kEvictLast>);
  reg("scale_store/plain/group_quant/col_major", BM_GroupQuant<ColMajor, false, kPlain>);
  reg("scale_store/evict_last/rmsnorm_quant/row_major", BM_RmsNormQuant<RowMajor, false, kEvictLast>);
  reg("scale_store/plain/rmsnorm_quant/row_major", BM_RmsNormQuant<RowMajor, false, kPlain>);
  reg("scale_store/evict_last/rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor, false, kEvictLast>);
  reg("scale_store/plain/rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor, false, kPlain>);
  for (index_t I : {2048, 3072})
    for (index_t M : {64, 8192, 16384, 65536}) {
      benchmark::RegisterBenchmark("scale_store/evict_last/silu_clamp_quant/col_major",
                                   BM_SiluClampQuant<ColMajor, false, kEvictLast>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("scale_store/plain/silu_clamp_quant/col_major",
                                   BM_SiluClampQuant<ColMajor, false, kPlain>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
    }
  benchmark::RegisterBenchmark("scale_store/flush_l2_64MiB", BM_FlushL2)->UseManualTime()->Iterations(3);
  for (index_t M : {8192, 65536}) {
    auto one = [&](const char* name, auto fn) {
      benchmark::RegisterBenchmark(name, fn)->Arg(M)->UseManualTime()->Iterations(3);
    };
    one("scale_store/then_flush/evict_last/group_quant/col_major", BM_GroupQuant<ColMajor, false, kEvictLast, true>);
    one("scale_store/then_flush/plain/group_quant/col_major", BM_GroupQuant<ColMajor, false, kPlain, true>);
    one("scale_store/then_flush/evict_last/rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor, false, kEvictLast, true>);
    one("scale_store/then_flush/plain/rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor, false, kPlain, true>);
  }
}

void registerAll(bool quick) {
  const std::vector<index_t> rows = quick ? std::vector<index_t>{1, 64, 8192} : kRows;
  benchmark::RegisterBenchmark("copy_256MiB/memcpy", BM_CopyLarge)->Arg(0)->UseManualTime()->Iterations(3);
  benchmark::RegisterBenchmark("copy_256MiB/kernel", BM_CopyLarge)->Arg(1)->UseManualTime()->Iterations(3);
  benchmark::RegisterBenchmark("empty_kernel", BM_EmptyKernel)->UseManualTime()->Iterations(3);
  for (index_t M : rows) benchmark::RegisterBenchmark("copy_input_7168", BM_CopyInput)->Arg(M)->UseManualTime()->Iterations(3);
  auto reg = [&](const char* name, auto fn) {
    for (index_t M : rows) benchmark::RegisterBenchmark(name, fn)->Arg(M)->UseManualTime()->Iterations(3);
  };
  // The producers' bytes without their arithmetic (the ceiling of each mix).
  for (index_t M : {8192, 16384, 65536}) {
    if (quick && M != 8192) continue;
    benchmark::RegisterBenchmark("move_bytes/group_quant", BM_MoveBytes<MoveKind::kGroup>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant", BM_MoveBytes<MoveKind::kRms>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/in_place", BM_MoveBytesInPlace)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/rows_b2", BM_MoveRows<2, false>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/in_place/rows_b2", BM_MoveRows<2, true>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/in_place/rows_b8", BM_MoveRows<8, true>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    for (index_t I : {2048, 3072})
      benchmark::RegisterBenchmark("move_bytes/silu_clamp_quant", BM_MoveBytes<MoveKind::kSilu>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
  }
  // RMSNorm's small-M shape without its arithmetic, and what a cluster per
  // row costs by itself
  for (index_t M : {1, 8, 64}) {
    if (quick) break;
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/block_per_row", BM_MoveRowBlock<false>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/block_per_row/barrier", BM_MoveRowBlock<true>)
        ->Arg(M)->UseManualTime()->Iterations(3);
#if defined(FP8SCALE_PLATFORM_CUDA)
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/cluster_2", BM_MoveRowCluster<2>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/cluster_4", BM_MoveRowCluster<4>)
        ->Arg(M)->UseManualTime()->Iterations(3);
    benchmark::RegisterBenchmark("move_bytes/rmsnorm_quant/cluster_8", BM_MoveRowCluster<8>)
        ->Arg(M)->UseManualTime()->Iterations(3);
#endif
  }
  reg("group_quant/row_major", BM_GroupQuant<RowMajor>);
  reg("group_quant/col_major", BM_GroupQuant<ColMajor>);
  reg("group_quant/row_major+materialize", BM_EmitThenMaterialize);
  reg("rmsnorm_quant/row_major", BM_RmsNormQuant<RowMajor>);
  reg("rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor>);
  // Programmatic dependent launch: back-to-back calls overlap launch latency.
  reg("group_quant/row_major/pdl", BM_GroupQuant<RowMajor, true>);
  reg("group_quant/col_major/pdl", BM_GroupQuant<ColMajor, true>);
  reg("rmsnorm_quant/row_major/pdl", BM_RmsNormQuant<RowMajor, true>);
  reg("rmsnorm_quant/col_major/pdl", BM_RmsNormQuant<ColMajor, true>);
  // Column-major with ld = align(M, 4): padding slots at M % 4 != 0 (the launch's padding tile).
  constexpr auto kPlainStores = ScaleStorePolicy::kEvictNormal;
  reg("group_quant/col_major/ld_align4", BM_GroupQuant<ColMajor, false, kPlainStores, false, 4>);
  reg("rmsnorm_quant/col_major/ld_align4", BM_RmsNormQuant<ColMajor, false, kPlainStores, false, 4>);
  for (index_t I : {2048, 3072})
    for (index_t M : rows) {
      benchmark::RegisterBenchmark("silu_clamp_quant/row_major", BM_SiluClampQuant<RowMajor>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("silu_clamp_quant/col_major", BM_SiluClampQuant<ColMajor>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("silu_clamp_quant/row_major/pdl", BM_SiluClampQuant<RowMajor, true>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("silu_clamp_quant/col_major/pdl", BM_SiluClampQuant<ColMajor, true>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("silu_clamp_quant/col_major/ld_align4",
                                   BM_SiluClampQuant<ColMajor, false, kPlainStores, 4>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
    }
#if defined(FP8SCALE_PLATFORM_CUDA)
  // Calibration: the plain kernels the bandwidth targets are stated against.
  reg("naive/group_quant/row_major", BM_Naive<false, false>);
  reg("naive/group_quant/col_major", BM_Naive<false, true>);
  reg("naive/rmsnorm_quant/row_major", BM_NaiveRmsNorm<false>);
  reg("naive/rmsnorm_quant/col_major", BM_NaiveRmsNorm<true>);
  for (index_t I : {2048, 3072})
    for (index_t M : rows) {
      benchmark::RegisterBenchmark("naive/silu_clamp_quant/row_major", BM_Naive<true, false>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
      benchmark::RegisterBenchmark("naive/silu_clamp_quant/col_major", BM_Naive<true, true>)
          ->Args({M, I})->UseManualTime()->Iterations(3);
    }
#endif
  // M % 4 == 3: column-major with ld = M (no padding slots) and with
  // ld = align(M, 4) (one padding slot a column, written by the launch's
  // padding tile), against row-major at the same M.
  for (index_t M : kOddRows) {
    if (quick && M != 8191) continue;
    auto odd = [&](const char* name, auto fn) {
      benchmark::RegisterBenchmark(name, fn)->Arg(M)->UseManualTime()->Iterations(3);
    };
    odd("odd_m/group_quant/row_major", BM_GroupQuant<RowMajor>);
    odd("odd_m/group_quant/col_major", BM_GroupQuant<ColMajor>);
    odd("odd_m/group_quant/col_major/ld_align4", BM_GroupQuant<ColMajor, false, kPlainStores, false, 4>);
    odd("odd_m/rmsnorm_quant/row_major", BM_RmsNormQuant<RowMajor>);
    odd("odd_m/rmsnorm_quant/col_major", BM_RmsNormQuant<ColMajor>);
    odd("odd_m/rmsnorm_quant/col_major/ld_align4", BM_RmsNormQuant<ColMajor, false, kPlainStores, false, 4>);
    auto oddSilu = [&](const char* name, auto fn) {
      benchmark::RegisterBenchmark(name, fn)->Args({M, 2048})->UseManualTime()->Iterations(3);
    };
    oddSilu("odd_m/silu_clamp_quant/row_major", BM_SiluClampQuant<RowMajor>);
    oddSilu("odd_m/silu_clamp_quant/col_major", BM_SiluClampQuant<ColMajor>);
    oddSilu("odd_m/silu_clamp_quant/col_major/ld_align4", BM_SiluClampQuant<ColMajor, false, kPlainStores, 4>);
  }
  // RMSNorm at other hidden sizes, against fixed block shapes: 1024 x 1 (the
  // block per row before blocks were sized to the row), 512 x 2 staged (the
  // large-M kernel), and blocks of 256 / 512 / 640 / 768 threads built for them.
  for (index_t K : {2048, 4096, 5120, 6144, 7168})
    for (index_t M : {1, 64, 512, 2048, 8192, 65536}) {
      if (quick && M != 8192) continue;
      if (K == 7168 && M > 512) continue;  // the main entries
      auto hid = [&](const char* name, auto fn) {
        benchmark::RegisterBenchmark(name, fn)->Args({M, K})->UseManualTime()->Iterations(3);
      };
      hid("hidden/rmsnorm_quant/row_major", BM_RmsNormHidden<RowMajor>);
      hid("hidden/rmsnorm_quant/col_major", BM_RmsNormHidden<ColMajor>);
      if (quick) continue;
      hid("hidden/rmsnorm_quant/row_major/1024x1", BM_RmsNormHidden<RowMajor, 1024, 1>);
      if (M >= 2048) hid("hidden/rmsnorm_quant/row_major/512x2/staged/b3", BM_RmsNormHidden<RowMajor, 512, 2, 3>);
      if (K == 2048) hid("hidden/rmsnorm_quant/row_major/256x1", BM_RmsNormHidden<RowMajor, 256, 1>);
      if (K == 4096) hid("hidden/rmsnorm_quant/row_major/512x1", BM_RmsNormHidden<RowMajor, 512, 1>);
      if (K == 5120) hid("hidden/rmsnorm_quant/row_major/640x1", BM_RmsNormHidden<RowMajor, 640, 1>);
      if (K == 6144) hid("hidden/rmsnorm_quant/row_major/768x1", BM_RmsNormHidden<RowMajor, 768, 1>);
    }
  if (!quick) {
    registerScaleStore();
    registerTuning();
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  int count = 0;
#if defined(FP8SCALE_HIP_NO_DEVICE_LIBS)
  // Registered (so that every entry and its kernels are in the binary, where
  // the code-object checks read them), never run.
  registerAll(quick);
  std::printf("bench_producers: built without ROCm's device libraries (FP8SCALE_HIP_NOGPULIB); nothing to measure\n");
  return 0;
#endif
  if (runtime::getDeviceCount(&count) != kDeviceSuccess || count == 0) {
    std::printf("bench_producers: no GPU; nothing to measure\n");
    return 0;
  }
  DeviceInfo info;
  BENCH_CHECK(queryDevice(0, info));
  gSms = info.multiProcessorCount;
  BENCH_CHECK(runtime::streamCreate(&gStream, true));
  allocate();
  const double bytes = 2.0 * static_cast<double>(std::size_t{256} << 20);
  gCopyBandwidth = bytes / std::min(timeLargeCopy(0), timeLargeCopy(1));
  benchmark::AddCustomContext("copy_baseline_GBps", std::to_string(gCopyBandwidth * 1e-9));
  registerAll(quick);
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
