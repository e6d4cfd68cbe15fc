// fp8scale-allreduce-ranks, one rank (a child process): its GPU, stream,
// file exchange, IPC communicator, registered input buffer and (when built
// with NCCL and the ranks have a GPU each) its NCCL communicator and the
// gathered fallback; plus what every mode needs: device memory, copies on
// the rank's stream, the deterministic inputs and a byte hash.
//
// Inputs are functions of (rank, M) only, so that every rank can regenerate
// every rank's partial for the host reference: rank p's partial x_p[M, K] is
// seeded noise of unit variance with three outlier channels 100-1000x larger
// (activation-like), row 0's first group and all of row 1 zero on every
// rank (a zero sum: RMSNorm of the residual alone). The residual [M, K] and
// the weight [K] are the same on every rank.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "allreduce_ranks/file_exchange.hpp"
#include "allreduce_ranks/options.hpp"
#include "fp8scale/producers/allreduce_rmsnorm_quant.hpp"
#if defined(FP8SCALE_WITH_NCCL)
#include "fp8scale/producers/allreduce_rmsnorm_quant_nccl.hpp"
#endif

namespace fp8scale {
namespace ranks {

using In = BFloat16;
using Format = E4M3FN;

/// Every spin-wait of the custom path gives up after this long and records
/// which peer did not arrive (a dead or diverged rank is reported, not
/// waited on; ranks sharing a GPU wait for time slices, well below this).
constexpr std::uint64_t kSpinTimeoutNs = 10000000000ull;

inline void checkCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
inline void checkStatus(const Status& s) {
  if (!s) throw std::runtime_error(s.message());
}

/// Device memory of n elements of T, freed with the object. Move-only.
template <class T>
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t n) : n_(n) {
    if (n > 0) checkCuda(cudaMalloc(&p_, n * sizeof(T)), "cudaMalloc");
  }
  ~DeviceMemory() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// ---- Deterministic inputs ------------------------------------------------------

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `z`.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Element i of the noise stream `seed`: the sum of four 16-bit uniforms,
/// centred and scaled to unit variance (close to a normal, and cheap).
inline float noise(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t h = mix64(seed ^ mix64(i));
  float sum = 0.0f;
  for (int j = 0; j < 4; ++j) sum += static_cast<float>((h >> (16 * j)) & 0xFFFFu) * (1.0f / 65536.0f);
  return (sum - 2.0f) * 1.7320508f;  // variance 4 / 12 -> 1
}

/// Rank `rank`'s partial x[M, K] (row stride K) of the case with M rows.
inline std::vector<In> makePartial(int rank, index_t M, index_t K) {
  const std::uint64_t seed = mix64(0xA11CE000ull + static_cast<std::uint64_t>(rank) * 0x1000003ull +
                                   static_cast<std::uint64_t>(M) * 0x10000000ull);
  const index_t outliers[3] = {7 % K, (K / 3) | 1, K - 5};
  std::vector<In> x(static_cast<std::size_t>(M * K));
  for (index_t m = 0; m < M; ++m)
    for (index_t k = 0; k < K; ++k) {
      float v = noise(seed, static_cast<std::uint64_t>(m * K + k));
      for (index_t o : outliers)
        if (k == o) v *= 100.0f + 150.0f * static_cast<float>(m % 7);
      if ((m == 0 && k < kGroup) || m == 1) v = 0.0f;
      x[static_cast<std::size_t>(m * K + k)] = fromFloat<In>(v);
    }
  return x;
}

/// The residual [M, K] of the case with M rows (the same on every rank).
inline std::vector<In> makeResidual(index_t M, index_t K) {
  const std::uint64_t seed = mix64(0x5E51D000ull + static_cast<std::uint64_t>(M));
  std::vector<In> r(static_cast<std::size_t>(M * K));
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = fromFloat<In>(2.0f * noise(seed, i));
  return r;
}

/// The RMSNorm weight [K] (the same on every rank): around 1.
inline std::vector<In> makeWeight(index_t K) {
  std::vector<In> w(static_cast<std::size_t>(K));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = fromFloat<In>(1.0f + 0.25f * noise(0x3E16A7ull, i));
  return w;
}

/// 64-bit FNV-1a of `bytes` bytes.
inline std::uint64_t hashBytes(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

// ---- The rank -----------------------------------------------------------------------

/// Everything one rank holds for the whole run. Created by create(); the
/// destructor waits at a last exchange barrier (no rank frees memory a peer's
/// kernel may still read) unless the run already failed.
class RankContext {
 public:
  int world = 0;
  int rank = 0;
  int device = 0;
  int deviceCount = 0;
  bool sharedGpu = false;  ///< fewer GPUs than ranks: ranks share GPUs (time-sliced)
  std::string deviceName;
  index_t cols = 0;
  index_t maxRows = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<FileExchange> exchange;
  std::unique_ptr<AllreduceCommunicator> comm;
  /// This rank's partial [maxRows, K]: its own allocation, registered with
  /// the communicator through registerBufferIpc (every rank's copy opened).
  DeviceMemory<In> x;
  /// Why the NCCL parts do not run (empty when they do).
  std::string ncclAbsent;
#if defined(FP8SCALE_WITH_NCCL)
  ncclComm_t nccl = nullptr;
  NcclRmsNormQuantFallback fallback;
#endif
  /// Set when the collective is broken (a refused launch, a device fault, a
  /// failed exchange): the teardown then skips the last barrier, since the
  /// parent is ending the other ranks.
  bool failed = false;

  bool hasNccl() const { return ncclAbsent.empty(); }

  RankContext() = default;
  RankContext(const RankContext&) = delete;
  RankContext& operator=(const RankContext&) = delete;
  ~RankContext() {
    // Every rank's kernels have finished before any rank frees what peers
    // read (two-stage kernels read the peers' scratch after the mid barrier
    // and have no end barrier).
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    if (exchange && !failed) (void)exchange->barrier();
#if defined(FP8SCALE_WITH_NCCL)
    fallback = NcclRmsNormQuantFallback{};
    if (nccl != nullptr) (void)ncclCommDestroy(nccl);
#endif
    comm.reset();
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }

  /// Bytes of the largest message (a partial of maxRows rows).
  std::size_t maxMessageBytes() const { return static_cast<std::size_t>(maxRows * cols) * sizeof(In); }

  /// Picks the GPU, creates the stream, the communicator and (when available)
  /// NCCL. Returns 0, or the exit status with the message printed: 2 when the
  /// ranks would share a GPU without --allow-shared-gpu, 1 otherwise.
  int setUp(const Options& o) {
    world = o.world;
    rank = o.rank;
    cols = o.cols;
    for (index_t m : o.sweep()) maxRows = std::max(maxRows, m);
    const cudaError_t e = cudaGetDeviceCount(&deviceCount);
    if (e != cudaSuccess || deviceCount == 0) {
      error("no CUDA device (" + std::string(e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
      return 1;
    }
    sharedGpu = deviceCount < world;
    if (sharedGpu && !o.allowSharedGpu) {
      error("--world " + std::to_string(world) + " needs " + std::to_string(world) + " GPUs, " +
            std::to_string(deviceCount) + " visible: ranks would share a GPU (--allow-shared-gpu runs a smoke test)");
      return 2;
    }
    device = rank % deviceCount;
    checkCuda(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    deviceName = prop.name;
    if (sharedGpu)
      std::fprintf(stderr,
                   "%s: rank %d: warning: %d ranks on %d GPU%s: processes on one GPU are time-sliced, so this is "
                   "only a smoke test (no timing or concurrency claims); NCCL is skipped (it refuses two ranks on "
                   "one GPU)\n",
                   kProgram, rank, world, deviceCount, deviceCount == 1 ? "" : "s");
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    // A round gives up at 3/4 of the parent's limit, so that a missing peer is
    // named by this rank ("no file from rank N") before the parent kills it.
    exchange = std::make_unique<FileExchange>(o.dir, world, rank,
                                              std::chrono::milliseconds(750LL * std::max(1, o.timeoutS)));

    // The custom path: every rank's region through CUDA IPC.
    AllreduceOptions ao;
    ao.bufferBytes = std::max<std::size_t>(alignUp(static_cast<index_t>(maxMessageBytes()), 256), std::size_t{1} << 20);
    ao.spinTimeoutNs = kSpinTimeoutNs;
    if (sharedGpu) {
      // Ranks that share a GPU through MPS run concurrently: keep all their
      // grids resident at once (every rank passes the same bound, since the
      // grid is part of the barrier tag).
      const int ranksPerGpu = (world + deviceCount - 1) / deviceCount;
      ao.maxBlocksPerRank = std::max(1, prop.multiProcessorCount / ranksPerGpu);
    }
    auto created = AllreduceCommunicator::createIpc(world, rank, exchange->function(), ao);
    if (!created) return exchangeFailure("AllreduceCommunicator::createIpc", created.status());
    comm = std::move(created.value());
    x = DeviceMemory<In>(static_cast<std::size_t>(maxRows * cols));
    if (Status s = comm->registerBufferIpc(x.get(), x.bytes(), exchange->function()); !s)
      return exchangeFailure("registerBufferIpc", s);

#if defined(FP8SCALE_WITH_NCCL)
    if (sharedGpu) {
      ncclAbsent = "ranks share a GPU (NCCL refuses two ranks on one GPU)";
    } else if (int rc = setUpNccl(); rc != 0) {
      return rc;
    }
#else
    ncclAbsent = "built without NCCL (FP8SCALE_NCCL=OFF, or nccl.h / libnccl not found)";
#endif
    return 0;
  }

  /// Rank 0's progress on stderr (the parent prints stdout only at the end).
  void progress(const std::string& message) const {
    if (rank == 0) std::fprintf(stderr, "%s: rank 0: %s\n", kProgram, message.c_str());
  }

  /// "rank r: <message>" on stderr.
  void error(const std::string& message) const {
    std::fprintf(stderr, "%s: rank %d: error: %s\n", kProgram, rank, message.c_str());
  }

  /// Host -> device copy on the rank's stream, finished on return.
  template <class T>
  void upload(T* dst, const std::vector<T>& src) const {
    if (src.empty()) return;
    checkCuda(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync (to device)");
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (upload)");
  }
  /// Device -> host copy of n elements after the stream's earlier work.
  template <class T>
  std::vector<T> download(const T* src, std::size_t n) const {
    std::vector<T> out(n);
    if (n == 0) return out;
    checkCuda(cudaMemcpyAsync(out.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync (to host)");
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (download)");
    return out;
  }
  /// Waits for the stream, then reads this rank's device fault record.
  Status syncAndCheckFaults() const {
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return comm->checkErrors(stream);
  }

 private:
  int exchangeFailure(const char* what, const Status& s) {
    error(std::string(what) + ": " + s.message() +
          (exchange->error().empty() ? std::string() : " (" + exchange->error() + ")"));
    failed = true;
    return 1;
  }

#if defined(FP8SCALE_WITH_NCCL)
  /// Rank 0's ncclUniqueId through the exchange, then ncclCommInitRank and
  /// the gathered fallback (buffers for the largest message).
  int setUpNccl() {
    ncclUniqueId id{};
    Bytes mine;
    if (rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) error(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
      else mine.assign(reinterpret_cast<const std::uint8_t*>(&id), reinterpret_cast<const std::uint8_t*>(&id) + sizeof(id));
    }
    auto all = exchange->allGather(mine);  // rank 0 sends nothing when it failed: every rank stops
    if (!all || (*all)[0].size() != sizeof(id)) {
      error("no NCCL unique id from rank 0" + (all ? std::string() : " (" + exchange->error() + ")"));
      failed = true;
      return 1;
    }
    std::memcpy(&id, (*all)[0].data(), sizeof(id));
    const ncclResult_t r = ncclCommInitRank(&nccl, world, id, rank);
    if (r != ncclSuccess) {
      nccl = nullptr;
      error(std::string("ncclCommInitRank: ") + ncclGetErrorString(r));
      failed = true;
      return 1;
    }
    auto fb = NcclRmsNormQuantFallback::create(nccl, std::max<std::size_t>(maxMessageBytes(), 16));
    if (!fb) {
      error(fb.status().message());
      failed = true;
      return 1;
    }
    fallback = std::move(fb.value());
    return 0;
  }
#endif
};

}  // namespace ranks
}  // namespace fp8scale
