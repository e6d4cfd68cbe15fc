// bits_sweep: a bit-for-bit fingerprint of every fp8scale producer on the GPU.
//
// What it is for: proving that a change to the library headers that is meant
// to keep every output bit (a restructure, a refactor) really does. It runs a
// fixed, deterministic sweep of every public producer launcher (groupQuant on
// matrix and head-major input, siluClampQuant, rmsNormQuant with and without
// residual / normOut, gatheredRmsNormQuant, allreduceRmsNormQuant one-stage
// and two-stage and allreduceSum on simulated ranks of one GPU,
// weightBlockQuant, materialize) over input types, fp8 formats, scale rules,
// scale layouts (row-major; column-major ld = M, ld = align(M, 4), ld = M + 7),
// shapes, group sizes, strides and options (PDL, fmax, eps, the L2 scale
// store policy), and prints one line per configuration:
//
//   <config name> <16 hex digits>
//
// The hash covers every output byte: the whole fp8 buffer (row gaps of
// ldq > K and a guard tail included), the whole scale buffer (padding slots of
// column-major views with ld > M, and a guard tail), the updated residual and
// normOut (row gaps and guard included), the input (which must stay
// unchanged), and the returned view's fields. Every output buffer is filled
// with 0xA5 before each call (inputs' row gaps with 0x7E), so an unwritten
// byte or a stray write shows. A refused call prints
//   FAIL <config name> <Status::message()>
// instead (deliberate refusal probes are part of the sweep too); the last line
// is "configs N". Input data comes from a fixed-seed counter-based generator
// (activation-like: mostly N(0, 1)-like values, outlier channels 100-1000x,
// zero groups, zero rows, NaN / inf, subnormals), generated on the device by
// code in this file only. The hash is this file's own: FNV-1a over 64-bit
// words per 16 KiB chunk on the device (lane-strided, lanes folded in order),
// then 64-bit FNV-1a over the chunk hashes, part labels and sizes on the host.
//
// The A/B (tools/h200_bits_ab.sh does all of this):
//   mkdir -p build/old && git archive <old commit> include | tar -x -C build/old
//   nvcc -std=c++17 -O2 -arch=sm_90a -Ibuild/old/include tools/bits_sweep.cu -o build/bits/old
//   nvcc -std=c++17 -O2 -arch=sm_90a -Iinclude           tools/bits_sweep.cu -o build/bits/new
//   build/bits/old > build/bits/old.txt; build/bits/new > build/bits/new.txt
//   diff build/bits/old.txt build/bits/new.txt     # no output: every bit kept
// (the script compiles with -gencode arch=compute_90a,code=sm_90a: the same
// sm_90a code without the extra compute_90 PTX pass, ~8 instead of ~15
// CPU-minutes a build; BITS_STEP=build / run splits it into two calls).
// 14415 configurations (--list counts them without a GPU).
//
// Options: --parts     append each part's own hash to every line (to see which
//                      output differs; give it to both runs or neither);
//          --filter S  run only the configurations whose name contains S;
//          --list      print the configuration names and count, run nothing
//                      (needs no GPU).
// Uses only the public launcher API; the simulated allreduce ranks need
// CUDA_DEVICE_MAX_CONNECTIONS >= 8 and eager module loading, which main()
// sets before the runtime starts (as tests/device/test_allreduce_device.cu).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fp8scale/fp8scale.hpp"
#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"
#include "fp8scale/consumers/weight_block_quant.hpp"

namespace bits {

using namespace fp8scale;
using i64 = long long;
using u64 = unsigned long long;

// ---------------------------------------------------------------------------
// Fatal runtime errors (a dead context makes every later line meaningless).
// ---------------------------------------------------------------------------

#define BITS_CK(call)                                                                                   \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      std::printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));           \
      std::fflush(stdout);                                                                              \
      std::exit(3);                                                                                     \
    }                                                                                                   \
  } while (0)

template <class T>
struct Tag {
  using type = T;
};

template <class In>
const char* inName() {
  if constexpr (std::is_same<In, float>::value) return "fp32";
  else if constexpr (std::is_same<In, BFloat16>::value) return "bf16";
  else return "fp16";
}
template <class Format>
const char* fmtName() {
  return std::is_same<Format, E4M3FN>::value ? "e4m3fn" : "e4m3fnuz";
}
inline const char* ruleName(ScaleRule r) { return r == ScaleRule::kUE8M0 ? "ue8m0" : "fp32"; }

// ---------------------------------------------------------------------------
// Host FNV-1a 64.
// ---------------------------------------------------------------------------

constexpr u64 kFnvOffset = 0xcbf29ce484222325ull;
constexpr u64 kFnvPrime = 0x100000001b3ull;

struct Fnv {
  u64 h = kFnvOffset;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= kFnvPrime;
    }
  }
  void u(u64 v) { bytes(&v, sizeof(v)); }
  void str(const std::string& s) {
    u(s.size());
    bytes(s.data(), s.size());
  }
};

// ---------------------------------------------------------------------------
// Device: chunk hashes, deterministic input generation.
// ---------------------------------------------------------------------------

constexpr int kChunkWordsPerLane = 64;
constexpr std::size_t kChunkBytes = 32 * kChunkWordsPerLane * 8;  // 16 KiB per warp

__device__ __forceinline__ u64 loadWord(const unsigned char* p, std::size_t n, std::size_t w) {
  const std::size_t off = w * 8;
  if (off + 8 <= n) return *reinterpret_cast<const u64*>(p + off);
  u64 v = 0;
  for (std::size_t i = off; i < n && i < off + 8; ++i) v |= static_cast<u64>(p[i]) << (8 * (i - off));
  return v;
}

/// out[c] = hash of bytes [c * kChunkBytes, (c + 1) * kChunkBytes) of p[0, n):
/// lane l runs FNV-1a over 64-bit words l, l + 32, ... of the chunk (bytes past
/// n read as 0), and the 32 lane hashes are folded in lane order. p must be
/// 8-byte aligned.
__global__ void hashChunksKernel(const unsigned char* p, std::size_t n, std::size_t chunks, u64* out) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::size_t warp = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  for (std::size_t c = warp; c < chunks; c += warps) {
    u64 h = kFnvOffset ^ static_cast<u64>(lane);
    const std::size_t w0 = c * (kChunkBytes / 8);
#pragma unroll 8
    for (int j = 0; j < kChunkWordsPerLane; ++j) {
      h ^= loadWord(p, n, w0 + static_cast<std::size_t>(j) * 32 + lane);
      h *= kFnvPrime;
    }
    u64 acc = kFnvOffset;
    for (int l = 0; l < 32; ++l) {
      const u64 v = __shfl_sync(0xffffffffu, h, l);
      acc = (acc ^ v) * kFnvPrime;
    }
    if (lane == 0) out[c] = acc ^ static_cast<u64>(c);
  }
}

__host__ __device__ __forceinline__ u64 mix64(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

enum GenKind : int { kActivation = 0, kResidual = 1, kWeight = 2, kScales = 3 };

/// Element (m, k) of a generated tensor of `kind`, from `seed` alone.
/// Activations: Irwin-Hall(4) ~ N(0, 1) values; channels k % 97 == 13 are
/// outliers 100-1000x; rows m % 29 == 2 are zero; group [0, 128) of rows
/// m % 13 == 1 is zero; rows m % 37 == 3 hold a NaN (k = 5) and +inf
/// (k = 130); rows m % 53 == 9 a NaN group [256, 384); rows m % 41 == 7 hold
/// fp32 subnormals in [0, 64). Residual: uniform (-2, 2). Weight: uniform
/// [0.5, 1.5). Scales (materialize sources): positive values, a few NaN.
__device__ float genValue(u64 seed, int kind, i64 m, i64 k) {
  const u64 h = mix64(seed ^ mix64((static_cast<u64>(m) << 24) ^ static_cast<u64>(k)));
  const float u0 = static_cast<float>(h & 0xFFFFu) * (1.0f / 65536.0f);
  const float u1 = static_cast<float>((h >> 16) & 0xFFFFu) * (1.0f / 65536.0f);
  const float u2 = static_cast<float>((h >> 32) & 0xFFFFu) * (1.0f / 65536.0f);
  const float u3 = static_cast<float>((h >> 48) & 0xFFFFu) * (1.0f / 65536.0f);
  if (kind == kResidual) return (u0 - 0.5f) * 4.0f;
  if (kind == kWeight) return 0.5f + u0;
  if (kind == kScales) {
    if ((h >> 40) % 61 == 0) return __uint_as_float(0x7fc00000u);
    return __uint_as_float(0x30000000u + static_cast<unsigned>(h & 0x1FFFFFFFu));
  }
  if (m % 29 == 2) return 0.0f;
  if (m % 13 == 1 && k < 128) return 0.0f;
  if (m % 37 == 3 && k == 5) return __uint_as_float(0x7fc00000u);
  if (m % 37 == 3 && k == 130) return __uint_as_float(0x7f800000u);
  if (m % 53 == 9 && k >= 256 && k < 384) return __uint_as_float(0x7fc00000u);
  if (m % 41 == 7 && k < 64) return __uint_as_float((1u << (19 + static_cast<unsigned>(k % 8))) | ((k & 1) ? 0x80000000u : 0u));
  float n = (u0 + u1 + u2 + u3 - 2.0f) * 1.7320508f;
  if (k % 97 == 13) n *= 100.0f + 900.0f * static_cast<float>(m % 7) / 6.0f;
  return n;
}

/// fp32 -> bf16 bits, round to nearest even, NaN quieted (this file's own).
__device__ __forceinline__ unsigned short toBf16Bits(float v) {
  const unsigned b = __float_as_uint(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<unsigned short>((b >> 16) | 0x40u);
  return static_cast<unsigned short>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

/// p[m * ts + (k / hd) * hs + k % hd] = value(m, k), m < rows, k < cols.
/// kType: 0 fp32, 1 bf16, 2 fp16.
template <int kType>
__global__ void genKernel(void* p, u64 seed, int kind, i64 rows, i64 cols, i64 ts, i64 hs, i64 hd) {
  const i64 n = rows * cols;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 m = i / cols, k = i % cols;
    const i64 addr = m * ts + (k / hd) * hs + (k % hd);
    const float v = genValue(seed, kind, m, k);
    if constexpr (kType == 0) static_cast<float*>(p)[addr] = v;
    else if constexpr (kType == 1) static_cast<unsigned short*>(p)[addr] = toBf16Bits(v);
    else static_cast<unsigned short*>(p)[addr] = __half_as_ushort(__float2half_rn(v));
  }
}

template <class In>
constexpr int typeId() {
  return std::is_same<In, float>::value ? 0 : std::is_same<In, BFloat16>::value ? 1 : 2;
}

// ---------------------------------------------------------------------------
// Buffers and the run context.
// ---------------------------------------------------------------------------

struct DevBuf {
  void* p = nullptr;
  std::size_t cap = 0;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p != nullptr) (void)cudaFree(p);
  }
  /// At least `bytes` (grow-only, powers of two from 1 MiB).
  void* ensure(std::size_t bytes) {
    if (bytes > cap) {
      std::size_t c = std::size_t{1} << 20;
      while (c < bytes) c <<= 1;
      if (p != nullptr) BITS_CK(cudaFree(p));
      p = nullptr;
      BITS_CK(cudaMalloc(&p, c));
      cap = c;
    }
    return p;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

struct Part {
  const char* label;
  const void* p;
  std::size_t n;  // bytes
};

struct Ctx {
  cudaStream_t st = nullptr;
  DevBuf x, q, s, r, y, w, stage, mat, chunks;
  u64* hostChunks = nullptr;
  std::size_t hostChunksCap = 0;
  bool parts = false;
  bool list = false;  // --list: print the names only, touch no device
  std::string filter;
  long configs = 0;
  long fails = 0;

  /// Whether to run `name` (the filter); in list mode prints and counts it instead.
  bool wants(const std::string& name) {
    const bool match = filter.empty() || name.find(filter) != std::string::npos;
    if (list && match) {
      ++configs;
      std::printf("%s\n", name.c_str());
      return false;
    }
    return match;
  }

  void fillAsync(void* p, int byte, std::size_t n) {
    if (n > 0) BITS_CK(cudaMemsetAsync(p, byte, n, st));
  }

  template <class In>
  void gen(void* p, u64 seed, int kind, i64 rows, i64 cols, i64 ts, i64 hs, i64 hd, cudaStream_t s = nullptr) {
    const i64 n = rows * cols;
    if (n <= 0) return;
    const i64 blocks = std::min<i64>((n + 255) / 256, 132 * 16);
    genKernel<typeId<In>()><<<static_cast<unsigned>(blocks), 256, 0, s != nullptr ? s : st>>>(p, seed, kind, rows, cols,
                                                                                           ts, hs, hd);
    BITS_CK(cudaGetLastError());
  }
  /// A plain [rows, cols] tensor with row stride ld.
  template <class In>
  void genMatrix(void* p, u64 seed, int kind, i64 rows, i64 cols, i64 ld) {
    gen<In>(p, seed, kind, rows, cols, ld, 0, cols > 0 ? cols : 1);
  }

  /// The hash of `parts` and `meta` (synchronizes the stream). partHashes
  /// receives each part's own hash.
  u64 hash(const std::vector<Part>& ps, const std::vector<i64>& meta, std::vector<u64>& partHashes) {
    std::vector<std::size_t> first(ps.size() + 1, 0);
    for (std::size_t i = 0; i < ps.size(); ++i) first[i + 1] = first[i] + (ps[i].n + kChunkBytes - 1) / kChunkBytes;
    const std::size_t total = first.back();
    chunks.ensure(std::max<std::size_t>(total, 1) * sizeof(u64));
    if (total > hostChunksCap) {
      if (hostChunks != nullptr) BITS_CK(cudaFreeHost(hostChunks));
      hostChunksCap = std::max<std::size_t>(total, 1 << 16);
      BITS_CK(cudaMallocHost(&hostChunks, hostChunksCap * sizeof(u64)));
    }
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::size_t c = first[i + 1] - first[i];
      if (c == 0) continue;
      const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((c + 7) / 8, 4096));
      hashChunksKernel<<<blocks, 256, 0, st>>>(static_cast<const unsigned char*>(ps[i].p), ps[i].n, c,
                                               chunks.as<u64>() + first[i]);
      BITS_CK(cudaGetLastError());
    }
    if (total > 0)
      BITS_CK(cudaMemcpyAsync(hostChunks, chunks.p, total * sizeof(u64), cudaMemcpyDeviceToHost, st));
    BITS_CK(cudaStreamSynchronize(st));
    Fnv all;
    all.u(meta.size());
    for (i64 v : meta) all.u(static_cast<u64>(v));
    partHashes.clear();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      Fnv f;
      f.str(ps[i].label);
      f.u(ps[i].n);
      f.bytes(hostChunks + first[i], (first[i + 1] - first[i]) * sizeof(u64));
      partHashes.push_back(f.h);
      all.u(f.h);
    }
    return all.h;
  }

  void emit(const std::string& name, const std::vector<Part>& ps, const std::vector<i64>& meta) {
    std::vector<u64> ph;
    const u64 h = hash(ps, meta, ph);
    ++configs;
    std::printf("%s %016llx", name.c_str(), h);
    if (parts)
      for (std::size_t i = 0; i < ps.size(); ++i) std::printf(" %s=%016llx", ps[i].label, ph[i]);
    std::printf("\n");
  }

  void fail(const std::string& name, const std::string& message) {
    ++configs;
    ++fails;
    std::printf("FAIL %s %s\n", name.c_str(), message.c_str());
    // A launch that was refused leaves nothing queued; drain anyway so the next
    // configuration starts from an idle stream, and catch faults here.
    BITS_CK(cudaStreamSynchronize(st));
  }
};

// ---------------------------------------------------------------------------
// Scale layouts.
// ---------------------------------------------------------------------------

enum class Lay { kRow, kRowPad, kColM, kColA4, kColM7 };
const Lay kMainLays[] = {Lay::kRow, Lay::kColM, Lay::kColA4, Lay::kColM7};

inline const char* layName(Lay l) {
  switch (l) {
    case Lay::kRow: return "row";
    case Lay::kRowPad: return "row.ldG+3";
    case Lay::kColM: return "col.ldM";
    case Lay::kColA4: return "col.ldA4";
    case Lay::kColM7: return "col.ldM+7";
  }
  return "?";
}
inline bool layCol(Lay l) { return l == Lay::kColM || l == Lay::kColA4 || l == Lay::kColM7; }
inline i64 layLd(Lay l, i64 M, i64 G) {
  switch (l) {
    case Lay::kRow: return G;
    case Lay::kRowPad: return G + 3;
    case Lay::kColM: return M;
    case Lay::kColA4: return alignUp(M, 4);
    case Lay::kColM7: return M + 7;
  }
  return 0;
}
/// Floats the layout addresses (without the guard).
inline i64 layElems(Lay l, i64 M, i64 G) { return layCol(l) ? G * layLd(l, M, G) : M * layLd(l, M, G); }

constexpr i64 kScaleGuard = 64;  // floats past the view, must stay 0xA5
constexpr i64 kQGuard = 64;      // bytes past the fp8 rows
constexpr i64 kRowGuard = 64;    // bytes past residual / normOut

template <class L>
Result<ScaleView<float, L>> makeView(float* p, i64 M, i64 G, i64 ld) {
  if constexpr (L::kColumnMajor) return colMajorView(p, M, G, ld);
  else return rowMajorView(p, M, G, ld);
}

/// What a launcher call left: its status and the returned value's fields.
struct Outcome {
  Status status;
  std::vector<i64> meta;
};

template <class Format, class L>
void appendMeta(std::vector<i64>& meta, const QuantizedTensor<Format, L>& t, const void* q, const void* s) {
  meta.push_back(t.data.data == q ? 1 : 0);
  meta.push_back(t.data.rows);
  meta.push_back(t.data.cols);
  meta.push_back(t.data.ld);
  meta.push_back(t.scale.data() == s ? 1 : 0);
  meta.push_back(t.scale.rows());
  meta.push_back(t.scale.cols());
  meta.push_back(t.scale.ld());
  meta.push_back(t.scale.stride(0));
  meta.push_back(t.scale.stride(1));
  meta.push_back(L::kColumnMajor ? 1 : 0);
  meta.push_back(t.groupSize);
}

/// One producer call into ctx.q / ctx.s: fills both (whole buffers, guards
/// included) with 0xA5, builds the view of `lay`, calls launch(q, view)
/// (which returns the launcher's Result), then prints the hash of q, s,
/// `extra` (prepared by the caller) or the FAIL line.
template <class Format, class Launch>
void runQuant(Ctx& c, const std::string& name, i64 M, i64 K, int group, Lay lay, i64 ldq, std::vector<Part> extra,
              Launch&& launch) {
  const i64 G = group > 0 ? K / group : 0;
  const i64 ld = layLd(lay, M, G);
  const std::size_t qBytes = static_cast<std::size_t>(M * ldq + kQGuard);
  const std::size_t sBytes = static_cast<std::size_t>(std::max<i64>(layElems(lay, M, G), 0) + kScaleGuard) * 4;
  auto* q = static_cast<std::uint8_t*>(c.q.ensure(qBytes));
  auto* s = static_cast<float*>(c.s.ensure(sBytes));
  c.fillAsync(q, 0xA5, qBytes);
  c.fillAsync(s, 0xA5, sBytes);
  const Fp8Matrix<Format> qm{q, M, K, ldq};
  auto call = [&](auto layTag) -> Outcome {
    using L = typename decltype(layTag)::type;
    Outcome o;
    auto v = makeView<L>(s, M, G, ld);
    if (!v) {
      o.status = v.status();
      return o;
    }
    auto r = launch(qm, v.value());
    if (!r) {
      o.status = r.status();
      return o;
    }
    appendMeta(o.meta, r.value(), q, s);
    return o;
  };
  const Outcome o = layCol(lay) ? call(Tag<ColMajor>{}) : call(Tag<RowMajor>{});
  if (!o.status) return c.fail(name, o.status.message());
  std::vector<Part> ps{{"q", q, qBytes}, {"s", s, sBytes}};
  for (const Part& p : extra) ps.push_back(p);
  c.emit(name, ps, o.meta);
}

inline u64 seedOf(const std::string& key) {
  Fnv f;
  f.str(key);
  return mix64(f.h);
}

inline std::string baseName(const char* tag, const char* in, const char* fmt, ScaleRule rule, int group, Lay lay,
                            i64 M, i64 K) {
  std::string n = tag;
  n += '/';
  n += in;
  n += '/';
  n += fmt;
  n += '/';
  n += ruleName(rule);
  n += "/g" + std::to_string(group) + '/' + layName(lay) + "/M" + std::to_string(M) + "/K" + std::to_string(K);
  return n;
}

inline std::string optSuffix(const QuantOptions& o) {
  std::string s;
  if (o.programmaticLaunch) s += "/pdl";
  if (o.fmax != 0.0f) s += "/fmax" + std::to_string(static_cast<int>(o.fmax));
  if (o.eps != kDefaultAmaxEps) {
    char b[32];
    std::snprintf(b, sizeof(b), "/eps%g", static_cast<double>(o.eps));
    s += b;
  }
  if (o.scaleStore == ScaleStorePolicy::kEvictLast) s += "/evictLast";
  return s;
}

inline QuantOptions makeOpt(ScaleRule rule, int group) {
  QuantOptions o;
  o.rule = rule;
  o.groupSize = group;
  return o;
}

// ---------------------------------------------------------------------------
// Group quant.
// ---------------------------------------------------------------------------

struct GqCase {
  const char* tag = "gq";
  ScaleRule rule = ScaleRule::kFp32;
  int group = 128;
  Lay lay = Lay::kRow;
  i64 M = 0, K = 0;
  i64 ldxPad = 0, ldqPad = 0;
  int headMode = 0;  // 0: matrix; 1: [M, H, D]; 2: [H, M, D]
  i64 H = 1, D = 0;
  i64 tokenPad = 0;  // headMode 1: tokenStride = H * D + tokenPad
  QuantOptions opt;
  std::string extraName;
};

template <class In, class Format>
void runGq(Ctx& c, const GqCase& k) {
  const i64 M = k.M;
  const i64 K = k.headMode == 0 ? k.K : k.H * k.D;
  std::string name = baseName(k.tag, inName<In>(), fmtName<Format>(), k.rule, k.group, k.lay, M, K);
  i64 ts = 0, hs = 0, hd = K, xElems = 0, ldx = K + k.ldxPad;
  if (k.headMode == 0) {
    ts = ldx;
    hs = 0;
    hd = K > 0 ? K : 1;
    xElems = M * ldx;
    if (k.ldxPad) name += "/ldx=K+" + std::to_string(k.ldxPad);
  } else if (k.headMode == 1) {
    ts = k.H * k.D + k.tokenPad;
    hs = k.D;
    hd = k.D;
    xElems = M * ts;
    name += "/MHD.H" + std::to_string(k.H) + ".D" + std::to_string(k.D);
    if (k.tokenPad) name += ".ts+" + std::to_string(k.tokenPad);
  } else {
    ts = k.D;
    hs = M * k.D;
    hd = k.D;
    xElems = k.H * M * k.D;
    name += "/HMD.H" + std::to_string(k.H) + ".D" + std::to_string(k.D);
  }
  const i64 ldq = K + k.ldqPad;
  if (k.ldqPad) name += "/ldq=K+" + std::to_string(k.ldqPad);
  name += optSuffix(k.opt) + k.extraName;
  if (!c.wants(name)) return;
  const std::size_t xBytes = static_cast<std::size_t>(xElems) * sizeof(In) + 64;
  void* x = c.x.ensure(xBytes);
  c.fillAsync(x, 0x7E, xBytes);
  c.gen<In>(x, seedOf(std::string("gq/") + inName<In>() + "/" + std::to_string(M) + "/" + std::to_string(K)),
            kActivation, M, K, ts, hs, hd);
  GroupQuantInput<In> in = k.headMode == 0
                               ? GroupQuantInput<In>::matrix(static_cast<const In*>(x), M, K, ldx)
                               : GroupQuantInput<In>::headMajor(static_cast<const In*>(x), M, k.H, k.D, ts, hs);
  QuantOptions opt = k.opt;
  opt.rule = k.rule;
  opt.groupSize = k.group;
  runQuant<Format>(c, name, M, K, k.group, k.lay, ldq, {{"x", x, xBytes}}, [&](Fp8Matrix<Format> q, auto view) {
    return groupQuant<Format>(in, q, view, opt, c.st);
  });
}

// ---------------------------------------------------------------------------
// SiLU-clamp quant.
// ---------------------------------------------------------------------------

struct SiluCase {
  const char* tag = "silu";
  ScaleRule rule = ScaleRule::kFp32;
  int group = 128;
  Lay lay = Lay::kRow;
  i64 M = 0, I = 0;
  i64 ldxPad = 0, ldqPad = 0;
  float limit = 7.0f;
  QuantOptions opt;
};

template <class In, class Format>
void runSilu(Ctx& c, const SiluCase& k) {
  const i64 M = k.M, I = k.I;
  std::string name = baseName(k.tag, inName<In>(), fmtName<Format>(), k.rule, k.group, k.lay, M, I);
  const i64 ldx = 2 * I + k.ldxPad, ldq = I + k.ldqPad;
  if (k.ldxPad) name += "/ldx=2I+" + std::to_string(k.ldxPad);
  if (k.ldqPad) name += "/ldq=I+" + std::to_string(k.ldqPad);
  if (k.limit > 0.0f) name += "/limit" + std::to_string(static_cast<int>(k.limit));
  else if (k.limit == 0.0f) name += "/nolimit";
  else if (k.limit != k.limit) name += "/limitNaN";
  else name += "/limitNeg";
  name += optSuffix(k.opt);
  if (!c.wants(name)) return;
  const std::size_t xBytes = static_cast<std::size_t>(M * ldx) * sizeof(In) + 64;
  void* x = c.x.ensure(xBytes);
  c.fillAsync(x, 0x7E, xBytes);
  c.genMatrix<In>(x, seedOf(std::string("silu/") + inName<In>() + "/" + std::to_string(M) + "/" + std::to_string(I)),
                  kActivation, M, 2 * I, ldx);
  SiluClampInput<In> in;
  in.x = static_cast<const In*>(x);
  in.rows = M;
  in.intermediate = I;
  in.ldx = ldx;
  in.limit = k.limit;
  QuantOptions opt = k.opt;
  opt.rule = k.rule;
  opt.groupSize = k.group;
  runQuant<Format>(c, name, M, I, k.group, k.lay, ldq, {{"x", x, xBytes}}, [&](Fp8Matrix<Format> q, auto view) {
    return siluClampQuant<Format>(in, q, view, opt, c.st);
  });
}

// ---------------------------------------------------------------------------
// RMSNorm quant.
// ---------------------------------------------------------------------------

struct RmsCase {
  const char* tag = "rms";
  ScaleRule rule = ScaleRule::kFp32;
  int group = 128;
  Lay lay = Lay::kRow;
  i64 M = 0, K = 0;
  bool residual = true, normOut = true;
  i64 ldxPad = 0, ldqPad = 0, ldrPad = 0, ldyPad = 0;
  bool setNormEps = false;  // false: the input's default
  float normEps = 0.0f;
  bool nullWeight = false;
  QuantOptions opt;
};

template <class In, class Format>
void runRms(Ctx& c, const RmsCase& k) {
  const i64 M = k.M, K = k.K;
  std::string name = baseName(k.tag, inName<In>(), fmtName<Format>(), k.rule, k.group, k.lay, M, K);
  name += k.residual ? "/res" : "/nores";
  name += k.normOut ? "/nout" : "/nonout";
  const i64 ldx = K + k.ldxPad, ldq = K + k.ldqPad, ldr = K + k.ldrPad, ldy = K + k.ldyPad;
  if (k.ldxPad) name += "/ldx=K+" + std::to_string(k.ldxPad);
  if (k.ldqPad) name += "/ldq=K+" + std::to_string(k.ldqPad);
  if (k.residual && k.ldrPad) name += "/ldr=K+" + std::to_string(k.ldrPad);
  if (k.normOut && k.ldyPad) name += "/ldy=K+" + std::to_string(k.ldyPad);
  if (k.setNormEps) {
    char b[32];
    std::snprintf(b, sizeof(b), "/normEps%g", static_cast<double>(k.normEps));
    name += b;
  }
  if (k.nullWeight) name += "/nullWeight";
  name += optSuffix(k.opt);
  if (!c.wants(name)) return;
  const std::string key = std::string("rms/") + inName<In>() + "/" + std::to_string(M) + "/" + std::to_string(K);
  const std::size_t xBytes = static_cast<std::size_t>(M * ldx) * sizeof(In) + 64;
  const std::size_t rBytes = static_cast<std::size_t>(M * ldr) * sizeof(In) + kRowGuard;
  const std::size_t yBytes = static_cast<std::size_t>(M * ldy) * sizeof(In) + kRowGuard;
  const std::size_t wBytes = static_cast<std::size_t>(K) * sizeof(In) + 64;
  void* x = c.x.ensure(xBytes);
  void* r = c.r.ensure(rBytes);
  void* y = c.y.ensure(yBytes);
  void* w = c.w.ensure(wBytes);
  c.fillAsync(x, 0x7E, xBytes);
  c.fillAsync(r, 0x7E, rBytes);
  c.fillAsync(y, 0xA5, yBytes);
  c.fillAsync(w, 0x7E, wBytes);
  c.genMatrix<In>(x, seedOf(key + "/x"), kActivation, M, K, ldx);
  c.genMatrix<In>(r, seedOf(key + "/r"), kResidual, M, K, ldr);
  c.genMatrix<In>(w, seedOf(std::string("rms/w/") + inName<In>() + "/" + std::to_string(K)), kWeight, 1, K, K);
  RmsNormQuantInput<In> in =
      RmsNormQuantInput<In>::matrix(static_cast<const In*>(x), M, K, ldx,
                                    k.nullWeight ? static_cast<const In*>(nullptr) : static_cast<const In*>(w));
  if (k.residual) in = in.withResidual(static_cast<In*>(r), ldr);
  if (k.normOut) in = in.withNormOut(static_cast<In*>(y), ldy);
  if (k.setNormEps) in.normEps = k.normEps;
  QuantOptions opt = k.opt;
  opt.rule = k.rule;
  opt.groupSize = k.group;
  std::vector<Part> extra{{"x", x, xBytes}, {"r", r, rBytes}, {"y", y, yBytes}, {"w", w, wBytes}};
  runQuant<Format>(c, name, M, K, k.group, k.lay, ldq, extra, [&](Fp8Matrix<Format> q, auto view) {
    return rmsNormQuant<Format>(in, q, view, opt, c.st);
  });
}

// ---------------------------------------------------------------------------
// Gathered (fallback local step) and custom allreduce + RMSNorm quant on
// simulated ranks of this GPU.
// ---------------------------------------------------------------------------

enum class ArPath { kOneStage, kTwoStage, kAuto, kGathered };
inline const char* arPathName(ArPath p) {
  switch (p) {
    case ArPath::kOneStage: return "oneStage";
    case ArPath::kTwoStage: return "twoStage";
    case ArPath::kAuto: return "auto";
    case ArPath::kGathered: return "gathered";
  }
  return "?";
}

constexpr std::size_t kArBufferBytes = std::size_t{32} << 20;

struct ArState {
  int W = 0;
  std::unique_ptr<SimulatedAllreduceGroup> group;
  cudaStream_t rs[kAllreduceMaxRanks] = {};
  DevBuf q[kAllreduceMaxRanks], s[kAllreduceMaxRanks], r[kAllreduceMaxRanks], y[kAllreduceMaxRanks],
      stage[kAllreduceMaxRanks];
  int faults = 0;
  Status createStatus;

  ArState() = default;
  ArState(const ArState&) = delete;
  ArState& operator=(const ArState&) = delete;
  ~ArState() {
    group.reset();
    for (auto& x : rs)
      if (x != nullptr) (void)cudaStreamDestroy(x);
  }
  /// The rank streams, created on first use.
  void makeStreams() {
    for (auto& x : rs)
      if (x == nullptr) BITS_CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  }
  /// The simulated group of W ranks (one group alive at a time).
  SimulatedAllreduceGroup* groupOf(int world) {
    if (W == world && group) return group.get();
    group.reset();
    BITS_CK(cudaDeviceSynchronize());
    W = world;
    AllreduceOptions o;
    o.bufferBytes = kArBufferBytes;
    o.spinTimeoutNs = 3000000000ull;  // a rank that never arrives is a recorded fault, not a hang
    auto g = SimulatedAllreduceGroup::create(world, o);
    createStatus = g.status();
    if (!g) return nullptr;
    group = std::make_unique<SimulatedAllreduceGroup>(std::move(g.value()));
    return group.get();
  }
  void syncAll(int world) {
    for (int p = 0; p < world; ++p) BITS_CK(cudaStreamSynchronize(rs[p]));
  }
};

struct ArCase {
  const char* tag = "ar";
  ArPath path = ArPath::kOneStage;
  int W = 2;
  ScaleRule rule = ScaleRule::kFp32;
  int group = 128;
  Lay lay = Lay::kRow;
  i64 M = 0, K = 0;
  bool residual = true, normOut = true;
  int worldArg = 0;  // gathered: the world passed (0: W)
};

template <class In, class Format>
void runAr(Ctx& c, ArState& a, const ArCase& k) {
  const i64 M = k.M, K = k.K, W = k.W;
  const i64 G = k.group > 0 ? K / k.group : 0;
  std::string name = baseName(k.tag, inName<In>(), fmtName<Format>(), k.rule, k.group, k.lay, M, K);
  name += std::string("/") + arPathName(k.path) + "/W" + std::to_string(W);
  name += k.residual ? "/res" : "/nores";
  name += k.normOut ? "/nout" : "/nonout";
  if (k.worldArg != 0) name += "/worldArg" + std::to_string(k.worldArg);
  if (!c.wants(name)) return;
  a.makeStreams();
  const bool custom = k.path != ArPath::kGathered;
  if (custom && a.faults >= 3) return c.fail(name, "skipped: 3 earlier allreduce faults");
  SimulatedAllreduceGroup* grp = nullptr;
  if (custom) {
    grp = a.groupOf(static_cast<int>(W));
    if (grp == nullptr) return c.fail(name, a.createStatus.message());
  }
  const std::string key = std::string("ar/") + inName<In>() + "/" + std::to_string(M) + "/" + std::to_string(K);
  const std::size_t partBytes = static_cast<std::size_t>(M * K) * sizeof(In);
  const i64 ld = layLd(k.lay, M, G);
  const std::size_t qBytes = static_cast<std::size_t>(M * K + kQGuard);
  const std::size_t sBytes = static_cast<std::size_t>(std::max<i64>(layElems(k.lay, M, G), 0) + kScaleGuard) * 4;
  const std::size_t rowBytes = partBytes + kRowGuard;
  const std::size_t wBytes = static_cast<std::size_t>(K) * sizeof(In) + 64;
  void* w = c.w.ensure(wBytes);
  c.fillAsync(w, 0x7E, wBytes);
  c.genMatrix<In>(w, seedOf(std::string("ar/w/") + inName<In>() + "/" + std::to_string(K)), kWeight, 1, K, K);
  // Partials: rank p's [M, K] from seed p, in its staging buffer (custom) or
  // at p * M * K of the gathered buffer (fallback).
  void* gathered = nullptr;
  std::size_t gatheredBytes = 0;
  if (custom) {
    if (partBytes > kArBufferBytes) return c.fail(name, "message larger than this sweep's staging buffers");
    for (int p = 0; p < W; ++p)
      c.genMatrix<In>((*grp)[p].stagingBuffer(), seedOf(key + "/p" + std::to_string(p)), kActivation, M, K, K);
  } else {
    gatheredBytes = partBytes * static_cast<std::size_t>(W) + 64;
    gathered = c.x.ensure(gatheredBytes);
    c.fillAsync(gathered, 0x7E, gatheredBytes);
    for (int p = 0; p < W; ++p)
      c.genMatrix<In>(static_cast<char*>(gathered) + partBytes * p, seedOf(key + "/p" + std::to_string(p)),
                      kActivation, M, K, K);
  }
  for (int p = 0; p < W; ++p) {
    a.q[p].ensure(qBytes);
    a.s[p].ensure(sBytes);
    a.r[p].ensure(rowBytes);
    a.y[p].ensure(rowBytes);
    a.stage[p].ensure(rowBytes);
    c.fillAsync(a.q[p].p, 0xA5, qBytes);
    c.fillAsync(a.s[p].p, 0xA5, sBytes);
    c.fillAsync(a.r[p].p, 0x7E, rowBytes);
    c.fillAsync(a.y[p].p, 0xA5, rowBytes);
    c.fillAsync(a.stage[p].p, 0xA5, rowBytes);
    c.genMatrix<In>(a.r[p].p, seedOf(key + "/r"), kResidual, M, K, K);
  }
  BITS_CK(cudaStreamSynchronize(c.st));  // every input in place before any rank starts
  QuantOptions opt = makeOpt(k.rule, k.group);
  std::vector<i64> meta;
  Status first;
  auto launchAll = [&](auto layTag) {
    using L = typename decltype(layTag)::type;
    for (int p = 0; p < W; ++p) {
      auto v = makeView<L>(a.s[p].as<float>(), M, G, ld);
      if (!v) {
        if (first) first = v.status();
        continue;
      }
      const Fp8Matrix<Format> q{a.q[p].as<std::uint8_t>(), M, K, K};
      const In* x = custom ? static_cast<const In*>((*grp)[p].stagingBuffer()) : static_cast<const In*>(gathered);
      RmsNormQuantInput<In> in = RmsNormQuantInput<In>::matrix(x, M, K, K, static_cast<const In*>(w));
      if (k.residual) in = in.withResidual(a.r[p].as<In>(), K);
      if (k.normOut) in = in.withNormOut(a.y[p].as<In>(), K);
      Result<QuantizedTensor<Format, L>> res =
          k.path == ArPath::kGathered
              ? gatheredRmsNormQuant<Format>(in, k.worldArg != 0 ? k.worldArg : static_cast<int>(W), M * K,
                                             a.stage[p].as<In>(), q, v.value(), opt, a.rs[p])
              : allreduceRmsNormQuant<Format>((*grp)[p], in, q, v.value(), opt, a.rs[p],
                                              k.path == ArPath::kOneStage   ? AllreduceAlgorithm::kOneStage
                                              : k.path == ArPath::kTwoStage ? AllreduceAlgorithm::kTwoStage
                                                                            : AllreduceAlgorithm::kAuto);
      if (!res) {
        if (first) first = res.status();
        continue;
      }
      appendMeta(meta, res.value(), a.q[p].p, a.s[p].p);
    }
  };
  if (layCol(k.lay)) launchAll(Tag<ColMajor>{});
  else launchAll(Tag<RowMajor>{});
  a.syncAll(static_cast<int>(W));
  if (custom) {
    const Status err = grp->checkErrors(c.st);
    if (!err) {
      ++a.faults;
      const Status rs = grp->reset();
      return c.fail(name, std::string("allreduce fault: ") + err.message() + (rs ? "" : " (reset: " + rs.message() + ")"));
    }
  }
  if (!first) return c.fail(name, first.message());
  std::vector<Part> ps;
  for (int p = 0; p < W; ++p) {
    ps.push_back({"q", a.q[p].p, qBytes});
    ps.push_back({"s", a.s[p].p, sBytes});
    ps.push_back({"r", a.r[p].p, rowBytes});
    ps.push_back({"y", a.y[p].p, rowBytes});
    if (custom) ps.push_back({"x", (*grp)[p].stagingBuffer(), partBytes});
  }
  if (!custom) ps.push_back({"x", gathered, gatheredBytes});
  c.emit(name, ps, meta);
}

/// allreduceSum alone: out[M, K] (row stride K + 8) on every rank.
template <class In>
void runArSum(Ctx& c, ArState& a, int W, ArPath path, i64 M, i64 K) {
  std::string name = std::string("arsum/") + inName<In>() + "/M" + std::to_string(M) + "/K" + std::to_string(K) + "/" +
                     arPathName(path) + "/W" + std::to_string(W);
  if (!c.wants(name)) return;
  a.makeStreams();
  if (a.faults >= 3) return c.fail(name, "skipped: 3 earlier allreduce faults");
  SimulatedAllreduceGroup* grp = a.groupOf(W);
  if (grp == nullptr) return c.fail(name, a.createStatus.message());
  const i64 ldOut = K + 8;
  const std::size_t partBytes = static_cast<std::size_t>(M * K) * sizeof(In);
  const std::size_t outBytes = static_cast<std::size_t>(M * ldOut) * sizeof(In) + kRowGuard;
  const std::string key = std::string("arsum/") + inName<In>() + "/" + std::to_string(M) + "/" + std::to_string(K);
  for (int p = 0; p < W; ++p) {
    c.genMatrix<In>((*grp)[p].stagingBuffer(), seedOf(key + "/p" + std::to_string(p)), kActivation, M, K, K);
    a.y[p].ensure(outBytes);
    c.fillAsync(a.y[p].p, 0xA5, outBytes);
  }
  BITS_CK(cudaStreamSynchronize(c.st));
  Status first;
  for (int p = 0; p < W; ++p) {
    const Status st = allreduceSum((*grp)[p], static_cast<const In*>((*grp)[p].stagingBuffer()), M, K, K,
                                   a.y[p].as<In>(), ldOut, a.rs[p],
                                   path == ArPath::kOneStage   ? AllreduceAlgorithm::kOneStage
                                   : path == ArPath::kTwoStage ? AllreduceAlgorithm::kTwoStage
                                                               : AllreduceAlgorithm::kAuto);
    if (!st && first) first = st;
  }
  a.syncAll(W);
  const Status err = grp->checkErrors(c.st);
  if (!err) {
    ++a.faults;
    (void)grp->reset();
    return c.fail(name, std::string("allreduce fault: ") + err.message());
  }
  if (!first) return c.fail(name, first.message());
  std::vector<Part> ps;
  for (int p = 0; p < W; ++p) {
    ps.push_back({"out", a.y[p].p, outBytes});
    ps.push_back({"x", (*grp)[p].stagingBuffer(), partBytes});
  }
  c.emit(name, ps, {});
}

// ---------------------------------------------------------------------------
// Weight block quant (128 x 128 blocks).
// ---------------------------------------------------------------------------

template <class In, class Format>
void runWeight(Ctx& c, ScaleRule rule, i64 N, i64 K, i64 ldPad, float fmax) {
  std::string name = std::string("wq/") + inName<In>() + "/" + fmtName<Format>() + "/" + ruleName(rule) + "/N" +
                     std::to_string(N) + "/K" + std::to_string(K);
  if (ldPad) name += "/ld=K+" + std::to_string(ldPad);
  if (fmax != 0.0f) name += "/fmax" + std::to_string(static_cast<int>(fmax));
  if (!c.wants(name)) return;
  const i64 ld = K + ldPad, ldq = K + ldPad;
  const std::size_t xBytes = static_cast<std::size_t>(N * ld) * sizeof(In) + 64;
  const std::size_t qBytes = static_cast<std::size_t>(N * ldq + kQGuard);
  const std::size_t sBytes = static_cast<std::size_t>(weightScaleElems(N, K) + kScaleGuard) * 4;
  void* x = c.x.ensure(xBytes);
  auto* q = static_cast<std::uint8_t*>(c.q.ensure(qBytes));
  auto* s = static_cast<float*>(c.s.ensure(sBytes));
  c.fillAsync(x, 0x7E, xBytes);
  c.fillAsync(q, 0xA5, qBytes);
  c.fillAsync(s, 0xA5, sBytes);
  c.genMatrix<In>(x, seedOf(std::string("wq/") + inName<In>() + "/" + std::to_string(N) + "/" + std::to_string(K)),
                  kActivation, N, K, ld);
  auto view = weightScaleView(s, N, K);
  if (!view) return c.fail(name, view.status().message());
  WeightQuantInput<In> in;
  in.w = static_cast<const In*>(x);
  in.rows = N;
  in.cols = K;
  in.ld = ld;
  WeightQuantOptions opt;
  opt.rule = rule;
  opt.fmax = fmax;
  auto r = weightBlockQuant<Format>(in, Fp8Matrix<Format>{q, N, K, ldq}, view.value(), opt, c.st);
  if (!r) return c.fail(name, r.status().message());
  const std::vector<i64> meta{r.value().data.data == q, r.value().data.rows, r.value().data.cols, r.value().data.ld,
                              r.value().scale.data() == s, r.value().scale.rows(), r.value().scale.cols(),
                              r.value().scale.ld()};
  c.emit(name, {{"q", q, qBytes}, {"s", s, sBytes}, {"x", x, xBytes}}, meta);
}

// ---------------------------------------------------------------------------
// materialize (device relayout to ColMajor{ld}).
// ---------------------------------------------------------------------------

enum class MatDst { kLdM, kLdA4, kLdM7, kLdTooSmall };
inline const char* matDstName(MatDst d) {
  switch (d) {
    case MatDst::kLdM: return "ldM";
    case MatDst::kLdA4: return "ldA4";
    case MatDst::kLdM7: return "ldM+7";
    case MatDst::kLdTooSmall: return "ldM-1";
  }
  return "?";
}

void runMaterialize(Ctx& c, Lay src, MatDst dst, i64 M, i64 G) {
  const std::string name = std::string("mat/src.") + layName(src) + "/dst." + matDstName(dst) + "/M" +
                           std::to_string(M) + "/G" + std::to_string(G);
  if (!c.wants(name)) return;
  const i64 srcLd = layLd(src, M, G);
  const std::size_t srcBytes = static_cast<std::size_t>(std::max<i64>(layElems(src, M, G), 0) + kScaleGuard) * 4;
  const i64 ld = dst == MatDst::kLdM ? M : dst == MatDst::kLdA4 ? alignUp(M, 4) : dst == MatDst::kLdM7 ? M + 7 : M - 1;
  const std::size_t dstBytes = static_cast<std::size_t>(std::max<i64>(G * ld, 0) + kScaleGuard) * 4;
  auto* s = static_cast<float*>(c.s.ensure(srcBytes));
  auto* d = static_cast<float*>(c.mat.ensure(dstBytes));
  c.fillAsync(s, 0xA5, srcBytes);
  c.fillAsync(d, 0xA5, dstBytes);
  // The source's (m, g) values; slots the view does not address keep 0xA5.
  const std::string key = "mat/" + std::to_string(M) + "/" + std::to_string(G);
  if (layCol(src)) c.gen<float>(s, seedOf(key), kScales, M, G, 1, srcLd, 1);  // (m, g) at g * ld + m
  else c.gen<float>(s, seedOf(key), kScales, M, G, srcLd, 1, 1);              // (m, g) at m * ld + g
  Outcome o;
  auto call = [&](auto layTag) {
    using L = typename decltype(layTag)::type;
    auto v = makeView<L>(s, M, G, srcLd);
    if (!v) {
      o.status = v.status();
      return;
    }
    auto r = materialize(v.value(), d, ld, c.st);
    if (!r) {
      o.status = r.status();
      return;
    }
    o.meta = {r.value().data() == s ? 1 : r.value().data() == d ? 2 : 0, r.value().rows(), r.value().cols(),
              r.value().ld(), r.value().stride(0), r.value().stride(1)};
  };
  if (layCol(src)) call(Tag<ColMajor>{});
  else call(Tag<RowMajor>{});
  if (!o.status) return c.fail(name, o.status.message());
  c.emit(name, {{"src", s, srcBytes}, {"dst", d, dstBytes}}, o.meta);
}

// ---------------------------------------------------------------------------
// The sweep.
// ---------------------------------------------------------------------------

const i64 kMs[] = {0, 1, 2, 3, 5, 17, 129, 1000, 4099};
const i64 kKs[] = {128, 2304, 7168};
const ScaleRule kRules[] = {ScaleRule::kFp32, ScaleRule::kUE8M0};

/// f(Tag<In>, Tag<Format>) for the 6 input x format combinations.
template <class F>
void forCombos(F&& f) {
  f(Tag<BFloat16>{}, Tag<E4M3FN>{});
  f(Tag<BFloat16>{}, Tag<E4M3FNUZ>{});
  f(Tag<Float16>{}, Tag<E4M3FN>{});
  f(Tag<Float16>{}, Tag<E4M3FNUZ>{});
  f(Tag<float>{}, Tag<E4M3FN>{});
  f(Tag<float>{}, Tag<E4M3FNUZ>{});
}

#define BITS_TYPES(inTag, fmtTag)            \
  using In = typename decltype(inTag)::type; \
  using Format = typename decltype(fmtTag)::type

void sweepGroupQuant(Ctx& c) {
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    // Main: group 128, every layout, M, K.
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : kMs)
          for (i64 K : kKs) {
            GqCase k;
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.K = K;
            runGq<In, Format>(c, k);
          }
    // Group sizes 32 and 64.
    for (int group : {32, 64})
      for (ScaleRule rule : kRules)
        for (Lay lay : kMainLays)
          for (i64 M : {1, 5, 129, 1000})
            for (i64 K : {128, 7168}) {
              GqCase k;
              k.tag = "gq.group";
              k.rule = rule;
              k.group = group;
              k.lay = lay;
              k.M = M;
              k.K = K;
              runGq<In, Format>(c, k);
            }
    // Row strides ldx > K, ldq > K; row-major scales with ld > G.
    for (ScaleRule rule : kRules)
      for (Lay lay : {Lay::kRow, Lay::kRowPad, Lay::kColM, Lay::kColA4, Lay::kColM7})
        for (i64 M : {1, 3, 129, 4099})
          for (i64 K : {2304, 7168}) {
            GqCase k;
            k.tag = "gq.stride";
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.K = K;
            k.ldxPad = 24;
            k.ldqPad = 32;
            runGq<In, Format>(c, k);
          }
    // Head-major input: [M, H, D] (also with a padded token stride) and
    // [H, M, D] (a batched attention output).
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : {1, 5, 129, 1000}) {
          const struct {
            int mode;
            i64 H, D, tokenPad;
          } shapes[] = {{1, 16, 128, 0}, {1, 16, 512, 0}, {1, 16, 128, 64}, {2, 16, 128, 0}};
          for (const auto& sh : shapes) {
            GqCase k;
            k.tag = "gq.head";
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.headMode = sh.mode;
            k.H = sh.H;
            k.D = sh.D;
            k.tokenPad = sh.tokenPad;
            runGq<In, Format>(c, k);
          }
        }
  });
}

void sweepSilu(Ctx& c) {
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : kMs)
          for (i64 I : kKs) {
            SiluCase k;
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.I = I;
            runSilu<In, Format>(c, k);
          }
    for (int group : {32, 64})
      for (ScaleRule rule : kRules)
        for (Lay lay : kMainLays)
          for (i64 M : {1, 5, 129, 1000})
            for (i64 I : {128, 7168}) {
              SiluCase k;
              k.tag = "silu.group";
              k.rule = rule;
              k.group = group;
              k.lay = lay;
              k.M = M;
              k.I = I;
              runSilu<In, Format>(c, k);
            }
    for (ScaleRule rule : kRules)
      for (Lay lay : {Lay::kRow, Lay::kRowPad, Lay::kColM, Lay::kColA4, Lay::kColM7})
        for (i64 M : {1, 3, 129, 4099})
          for (i64 I : {2304, 7168}) {
            SiluCase k;
            k.tag = "silu.stride";
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.I = I;
            k.ldxPad = 24;
            k.ldqPad = 32;
            runSilu<In, Format>(c, k);
          }
  });
}

void sweepRms(Ctx& c) {
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    // Main: residual and normOut.
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : kMs)
          for (i64 K : kKs) {
            RmsCase k;
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.K = K;
            runRms<In, Format>(c, k);
          }
    // Without residual and / or normOut.
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : {1, 129, 4099})
          for (i64 K : {2304, 7168})
            for (int variant = 0; variant < 3; ++variant) {
              RmsCase k;
              k.tag = "rms.io";
              k.rule = rule;
              k.lay = lay;
              k.M = M;
              k.K = K;
              k.residual = variant == 1;
              k.normOut = variant == 2;
              runRms<In, Format>(c, k);
            }
    for (int group : {32, 64})
      for (ScaleRule rule : kRules)
        for (Lay lay : kMainLays)
          for (i64 M : {1, 5, 129, 1000})
            for (i64 K : {128, 7168}) {
              RmsCase k;
              k.tag = "rms.group";
              k.rule = rule;
              k.group = group;
              k.lay = lay;
              k.M = M;
              k.K = K;
              runRms<In, Format>(c, k);
            }
    for (ScaleRule rule : kRules)
      for (Lay lay : {Lay::kRow, Lay::kRowPad, Lay::kColM, Lay::kColA4, Lay::kColM7})
        for (i64 M : {1, 3, 129, 4099})
          for (i64 K : {2304, 7168}) {
            RmsCase k;
            k.tag = "rms.stride";
            k.rule = rule;
            k.lay = lay;
            k.M = M;
            k.K = K;
            k.ldxPad = 24;
            k.ldqPad = 32;
            k.ldrPad = 40;
            k.ldyPad = 56;
            runRms<In, Format>(c, k);
          }
  });
}

/// PDL on (every producer), and the other QuantOptions.
void sweepOptions(Ctx& c) {
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays)
        for (i64 M : {1, 17, 4099}) {
          QuantOptions pdl;
          pdl.programmaticLaunch = true;
          GqCase g;
          g.tag = "gq.pdl";
          g.rule = rule;
          g.lay = lay;
          g.M = M;
          g.K = 7168;
          g.opt = pdl;
          runGq<In, Format>(c, g);
          SiluCase s;
          s.tag = "silu.pdl";
          s.rule = rule;
          s.lay = lay;
          s.M = M;
          s.I = 7168;
          s.opt = pdl;
          runSilu<In, Format>(c, s);
          RmsCase r;
          r.tag = "rms.pdl";
          r.rule = rule;
          r.lay = lay;
          r.M = M;
          r.K = 7168;
          r.opt = pdl;
          runRms<In, Format>(c, r);
        }
    for (ScaleRule rule : kRules)
      for (Lay lay : {Lay::kRow, Lay::kColA4})
        for (i64 M : {5, 1000})
          for (int variant = 0; variant < 3; ++variant) {
            QuantOptions o;
            if (variant == 0) o.fmax = 224.0f;
            if (variant == 1) o.eps = 1e-3f;
            if (variant == 2) o.scaleStore = ScaleStorePolicy::kEvictLast;
            GqCase g;
            g.tag = "gq.opt";
            g.rule = rule;
            g.lay = lay;
            g.M = M;
            g.K = 2304;
            g.opt = o;
            runGq<In, Format>(c, g);
            SiluCase s;
            s.tag = "silu.opt";
            s.rule = rule;
            s.lay = lay;
            s.M = M;
            s.I = 2304;
            s.opt = o;
            runSilu<In, Format>(c, s);
            RmsCase r;
            r.tag = "rms.opt";
            r.rule = rule;
            r.lay = lay;
            r.M = M;
            r.K = 2304;
            r.opt = o;
            runRms<In, Format>(c, r);
          }
    // SiLU without the clamp; RMSNorm with another normEps.
    for (ScaleRule rule : kRules)
      for (Lay lay : {Lay::kRow, Lay::kColM7})
        for (i64 M : {5, 1000}) {
          SiluCase s;
          s.tag = "silu.opt";
          s.rule = rule;
          s.lay = lay;
          s.M = M;
          s.I = 2304;
          s.limit = 0.0f;
          runSilu<In, Format>(c, s);
          s.limit = -1.0f;
          runSilu<In, Format>(c, s);
          RmsCase r;
          r.tag = "rms.opt";
          r.rule = rule;
          r.lay = lay;
          r.M = M;
          r.K = 2304;
          r.setNormEps = true;
          r.normEps = 1e-5f;
          runRms<In, Format>(c, r);
        }
  });
}

void sweepWeight(Ctx& c) {
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    for (ScaleRule rule : kRules)
      for (i64 N : {0, 1, 129, 1000, 4099})
        for (i64 K : kKs) runWeight<In, Format>(c, rule, N, K, 0, 0.0f);
    for (ScaleRule rule : kRules) {
      runWeight<In, Format>(c, rule, 300, 2304, 32, 0.0f);
      runWeight<In, Format>(c, rule, 300, 2304, 0, 224.0f);
    }
  });
}

void sweepMaterialize(Ctx& c) {
  for (Lay src : {Lay::kRow, Lay::kRowPad, Lay::kColM, Lay::kColA4})
    for (MatDst dst : {MatDst::kLdM, MatDst::kLdA4, MatDst::kLdM7})
      for (i64 M : kMs)
        for (i64 G : {1, 18, 56}) runMaterialize(c, src, dst, M, G);
  runMaterialize(c, Lay::kRow, MatDst::kLdTooSmall, 5, 18);
}

void sweepAllreduce(Ctx& c) {
  ArState a;
  // Gathered fallback step first: no communicator.
  forCombos([&](auto it, auto ft) {
    BITS_TYPES(it, ft);
    for (int W : {1, 2, 4})
      for (ScaleRule rule : kRules)
        for (Lay lay : kMainLays)
          for (i64 M : {0, 1, 17, 1000})
            for (i64 K : {2304, 7168}) {
              ArCase k;
              k.path = ArPath::kGathered;
              k.W = W;
              k.rule = rule;
              k.lay = lay;
              k.M = M;
              k.K = K;
              runAr<In, Format>(c, a, k);
            }
    // Past RmsNormPolicy::kRowsMinRows: the staged path of long rows.
    for (ScaleRule rule : kRules)
      for (Lay lay : kMainLays) {
        ArCase k;
        k.path = ArPath::kGathered;
        k.W = 2;
        k.rule = rule;
        k.lay = lay;
        k.M = 4099;
        k.K = 7168;
        runAr<In, Format>(c, a, k);
      }
  });
  // Custom path, by world size (one simulated group alive at a time).
  for (int W : {1, 2, 4, 8}) {
    forCombos([&](auto it, auto ft) {
      BITS_TYPES(it, ft);
      const bool full = W == 2 || W == 4;
      for (ArPath path : {ArPath::kOneStage, ArPath::kTwoStage})
        for (ScaleRule rule : kRules)
          for (Lay lay : kMainLays)
            for (i64 M : {0, 1, 17, 1000})
              for (i64 K : {2304, 7168}) {
                if (!full && (lay == Lay::kColM || M == 0 || M == 17 || K == 2304)) continue;
                ArCase k;
                k.path = path;
                k.W = W;
                k.rule = rule;
                k.lay = lay;
                k.M = M;
                k.K = K;
                runAr<In, Format>(c, a, k);
              }
      if (W == 2) {
        for (ArPath path : {ArPath::kAuto, ArPath::kOneStage, ArPath::kTwoStage, ArPath::kGathered})
          for (Lay lay : {Lay::kRow, Lay::kColM7})
            for (i64 M : {17, 1000})
              for (int variant = 0; variant < 3; ++variant) {
                ArCase k;
                k.tag = "ar.io";
                k.path = path;
                k.W = W;
                k.lay = lay;
                k.M = M;
                k.K = 7168;
                k.residual = variant == 1;
                k.normOut = variant == 2;
                runAr<In, Format>(c, a, k);
              }
        for (ArPath path : {ArPath::kOneStage, ArPath::kTwoStage, ArPath::kGathered})
          for (int group : {32, 64})
            for (Lay lay : {Lay::kRow, Lay::kColA4}) {
              ArCase k;
              k.tag = "ar.group";
              k.path = path;
              k.W = W;
              k.rule = ScaleRule::kUE8M0;
              k.group = group;
              k.lay = lay;
              k.M = 17;
              k.K = 2304;
              runAr<In, Format>(c, a, k);
            }
      }
    });
    for (ArPath path : {ArPath::kOneStage, ArPath::kTwoStage, ArPath::kAuto})
      for (i64 M : {1, 17, 1000})
        for (i64 K : {2304, 7168}) {
          runArSum<BFloat16>(c, a, W, path, M, K);
          runArSum<Float16>(c, a, W, path, M, K);
          runArSum<float>(c, a, W, path, M, K);
        }
  }
}

/// Calls that must be refused; the FAIL lines (Status messages) are part of
/// the fingerprint.
void sweepRefusals(Ctx& c) {
  GqCase g;
  g.tag = "refuse.gq";
  g.M = 5;
  g.K = 2304;
  g.ldxPad = 1;  // misaligned row stride
  runGq<BFloat16, E4M3FN>(c, g);
  g.ldxPad = 0;
  g.group = 256;  // unsupported group size
  runGq<BFloat16, E4M3FN>(c, g);
  g.group = 128;
  g.K = 200;  // not a multiple of the group
  runGq<BFloat16, E4M3FN>(c, g);
  g.K = 2304;
  g.opt.fmax = 300.0f;  // above e4m3fnuz's max
  runGq<BFloat16, E4M3FNUZ>(c, g);
  g.opt.fmax = 0.0f;
  g.opt.eps = 0.0f;  // eps must be > 0
  runGq<float, E4M3FN>(c, g);
  g.opt.eps = kDefaultAmaxEps;
  g.headMode = 1;  // a group across two heads
  g.H = 4;
  g.D = 96;
  runGq<BFloat16, E4M3FN>(c, g);
  SiluCase s;
  s.tag = "refuse.silu";
  s.M = 5;
  s.I = 2304;
  s.limit = __builtin_nanf("");
  runSilu<BFloat16, E4M3FN>(c, s);
  s.limit = 7.0f;
  s.ldxPad = -8;  // ldx < 2 I
  runSilu<Float16, E4M3FN>(c, s);
  RmsCase r;
  r.tag = "refuse.rms";
  r.M = 5;
  r.K = 2304;
  r.nullWeight = true;
  runRms<BFloat16, E4M3FN>(c, r);
  r.nullWeight = false;
  r.K = 16384 + 128;  // row too long (fp32 rows end at 512 threads x 8 vectors x 4 = 16384)
  r.M = 1;
  runRms<float, E4M3FN>(c, r);
  r.K = 2304;
  r.M = 5;
  r.ldrPad = 4;  // residual row stride not 16-byte aligned
  runRms<BFloat16, E4M3FN>(c, r);
  r.ldrPad = 0;
  r.setNormEps = true;
  r.normEps = __builtin_nanf("");
  runRms<BFloat16, E4M3FN>(c, r);
  ArState a;
  ArCase k;
  k.tag = "refuse.ar";
  k.path = ArPath::kGathered;
  k.W = 2;
  k.worldArg = -1;  // world < 1
  k.M = 5;
  k.K = 2304;
  runAr<BFloat16, E4M3FN>(c, a, k);
  runWeight<BFloat16, E4M3FN>(c, ScaleRule::kFp32, 5, 200, 0, 0.0f);  // K % 128
}

}  // namespace bits

int main(int argc, char** argv) {
  // Before the CUDA runtime starts: enough hardware queues for 8 simulated
  // rank streams, and every kernel loaded up front (lazy loading may
  // synchronize while a rank spins). As tests/device/test_allreduce_device.cu.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  bits::Ctx c;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--parts") == 0) c.parts = true;
    else if (std::strcmp(argv[i], "--list") == 0) c.list = true;
    else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) c.filter = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--parts] [--list] [--filter SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  if (!c.list) {
    int devices = 0;
    BITS_CK(cudaGetDeviceCount(&devices));
    BITS_CK(cudaSetDevice(0));
    BITS_CK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
  }
  bits::sweepGroupQuant(c);
  bits::sweepSilu(c);
  bits::sweepRms(c);
  bits::sweepOptions(c);
  bits::sweepWeight(c);
  bits::sweepMaterialize(c);
  bits::sweepAllreduce(c);
  bits::sweepRefusals(c);
  if (!c.list) BITS_CK(cudaDeviceSynchronize());
  std::printf("configs %ld\n", c.configs);
  std::fflush(stdout);
  std::fprintf(stderr, "bits_sweep: %ld configurations, %ld FAIL lines\n", c.configs, c.fails);
  if (c.hostChunks != nullptr) (void)cudaFreeHost(c.hostChunks);
  if (c.st != nullptr) (void)cudaStreamDestroy(c.st);
  return 0;
}
