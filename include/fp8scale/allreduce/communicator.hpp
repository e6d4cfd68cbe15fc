// fp8scale: the custom allreduce's communicator for the ranks of one node.
//
// Each rank owns one device allocation of rankBytes(bufferBytes) bytes:
//
//   [ SignalPad | AllreduceRankTable | staging [bufferBytes] | scratch [bufferBytes] ]
//
// staging is the rank's registered input buffer (write the partial there, or
// register buffers of your own); scratch holds the reduced column chunks of
// the two-stage algorithm. Every rank addresses every rank's allocation:
//
//   - createIpc(): one process per GPU. Each rank allocates its own region
//     and exports it with cudaIpcGetMemHandle / hipIpcGetMemHandle; the
//     caller's exchange function (torch.distributed, MPI, a socket) returns
//     every rank's bytes; peers' regions are opened with
//     cudaIpcOpenMemHandle / hipIpcOpenMemHandle (lazy peer access). A
//     failed open (no peer access) is a Status: use the NCCL / RCCL fallback.
//   - fromDevicePointers(): every rank's region is already addressable in
//     this process (ranks that are plain buffers on one device: the tests
//     and benchmarks simulate W ranks on one GPU this way, since IPC-opening
//     one's own allocation fails).
//
// Kernels of one call must run concurrently on all ranks (they spin-wait on
// each other). With one GPU per rank that holds whenever each rank launches;
// with `ranksPerDevice` > 1 ranks on one GPU the launchers size each rank's
// grid to (co-resident blocks of the kernel) / ranksPerDevice and refuse
// (kUnsupportedDevice) when that is 0. Ranks on one device need a stream each
// (non-blocking: a legacy-stream operation issued between two ranks'
// launches waits for the first rank's kernel, which waits for the second),
// CUDA_DEVICE_MAX_CONNECTIONS >= the number of such streams, and eagerly
// loaded kernels (the launchers query each kernel's attributes before its
// first launch; CUDA_MODULE_LOADING=EAGER makes sure).
//
// Teardown: peers read each other's regions until their own call is done,
// so every rank's last call must have completed on every rank before any
// rank destroys its communicator (a host barrier after a stream sync; see
// ~AllreduceCommunicator).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "../detail/span.hpp"
#include "../platform.hpp"
#include "../status.hpp"
#include "signal.hpp"

namespace fp8scale {

/// How a call moves data between ranks.
///   kOneStage: every rank reads every rank's whole input and sums it (one
///     barrier pair; the least latency; W x the bytes read per rank).
///   kTwoStage: reduce-scatter (rank p sums column chunk p of every row into
///     its scratch), barrier, all-gather (every rank reads the W reduced
///     chunks). Each rank reads 2x its input's bytes whatever W is.
/// Both sum the ranks in the order 0, 1, ..., W-1 in fp32 and round once to
/// the input type, so they give the same bits.
enum class AllreduceAlgorithm : int { kAuto = 0, kOneStage = 1, kTwoStage = 2 };

#ifndef FP8SCALE_ALLREDUCE_SPIN_TIMEOUT_NS
#if defined(NDEBUG)
/// Release builds wait without a limit (a slow peer is not an error)...
#define FP8SCALE_ALLREDUCE_SPIN_TIMEOUT_NS 0
#else
/// ...debug builds give up after 10 s and report the missing rank.
#define FP8SCALE_ALLREDUCE_SPIN_TIMEOUT_NS 10000000000ull
#endif
#endif

/// Per-communicator settings (the same on every rank).
struct AllreduceOptions {
  /// Bytes of each rank's staging and scratch buffer: the largest message
  /// (M * K * sizeof(input)) the custom path takes. Larger: the fallback.
  std::size_t bufferBytes = std::size_t{32} << 20;
  /// kAuto uses one-stage up to this message size, two-stage above
  /// (vLLM's custom allreduce switches in the same range, 256 KiB-1 MiB).
  std::size_t oneStageMaxBytes = std::size_t{512} << 10;
  /// Upper bound on blocks per rank; 0: the co-residency bound alone
  /// (always at most kAllreduceMaxBlocks).
  int maxBlocksPerRank = 0;
  /// Bound on every spin-wait, in ns; 0 waits forever. The default is the
  /// macro FP8SCALE_ALLREDUCE_SPIN_TIMEOUT_NS: 0 with NDEBUG, 10 s without.
  std::uint64_t spinTimeoutNs = FP8SCALE_ALLREDUCE_SPIN_TIMEOUT_NS;
};

/// World sizes the custom path takes: the tensor-parallel sizes of one node.
constexpr bool isSupportedAllreduceWorld(int world) {
  return world == 1 || world == 2 || world == 4 || world == 8;
}

/// The algorithm kAuto picks, or `requested` when it is not kAuto: one-stage
/// for one rank and for messages of at most oneStageMaxBytes; two-stage above
/// when K splits into W chunks of whole 16-byte vectors, else one-stage.
/// Deterministic in its arguments, so every rank picks the same.
constexpr AllreduceAlgorithm chooseAllreduceAlgorithm(AllreduceAlgorithm requested, int world, index_t rows,
                                                      index_t cols, int inputBytes, std::size_t oneStageMaxBytes) {
  if (requested != AllreduceAlgorithm::kAuto) return requested;
  if (world <= 1) return AllreduceAlgorithm::kOneStage;
  const index_t bytes = detail::spanMul(detail::spanMul(rows, cols), inputBytes);  // -1: beyond 2^48, or negative
  if (bytes >= 0 && bytes <= static_cast<index_t>(oneStageMaxBytes)) return AllreduceAlgorithm::kOneStage;
  const index_t vecElems = 16 / inputBytes;
  return cols % (world * vecElems) == 0 ? AllreduceAlgorithm::kTwoStage : AllreduceAlgorithm::kOneStage;
}

/// Blocks per rank such that every rank's grid is resident at once:
/// floor(blocksPerSm * smCount / ranksPerDevice), at most
/// kAllreduceMaxBlocks and `maxBlocksOption` (when > 0). 0: not possible.
/// Ranks sharing one GPU count at most one block per SM between them
/// (blocksPerSm is taken as 1): a rank's other kernels between two calls
/// (a producer's 1024-thread blocks, a copy) must find room while the other
/// ranks' blocks spin, and spinning blocks of W - 1 ranks that filled SMs
/// several deep could leave none.
constexpr int allreduceGridLimit(int blocksPerSm, int smCount, int ranksPerDevice, int maxBlocksOption) {
  if (blocksPerSm <= 0 || smCount <= 0 || ranksPerDevice <= 0) return 0;
  const int perSm = ranksPerDevice > 1 ? 1 : blocksPerSm;
  int limit = perSm * smCount / ranksPerDevice;
  if (limit > kAllreduceMaxBlocks) limit = kAllreduceMaxBlocks;
  if (maxBlocksOption > 0 && limit > maxBlocksOption) limit = maxBlocksOption;
  return limit;
}

#if defined(FP8SCALE_HAS_DEVICE)

namespace detail {

// The runtime calls used here (runtime::malloc, detail::devIpcOpen, ...) are platform.hpp's.

inline std::size_t alignBytes256(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace detail

/// One rank's view of the node's allreduce state. Not copyable; one per rank
/// (in one process per GPU) or W of them in one process (simulated ranks).
/// Every rank must make the same sequence of calls with the same shapes;
/// a rank that does not is reported by checkErrors(), never waited on past
/// spinTimeoutNs.
class AllreduceCommunicator {
 public:
  using Bytes = std::vector<std::uint8_t>;
  /// Takes this rank's bytes, returns every rank's (index = rank), blocking
  /// until all ranks have called it (an all-gather of byte strings).
  using ExchangeFn = std::function<std::vector<Bytes>(const Bytes&)>;

  /// Bytes of one rank's region for buffers of `bufferBytes`.
  static std::size_t rankBytes(std::size_t bufferBytes) {
    return kSignalPadBytes + kRankTableBytes + 2 * detail::alignBytes256(bufferBytes);
  }

  /// Ranks whose regions this process addresses directly: `regions[p]` is
  /// rank p's region of rankBytes(options.bufferBytes) bytes (16-byte
  /// aligned, on the current device or peer-accessible from it). This rank's
  /// signal pad is zeroed here (synchronously); create every rank before
  /// any rank's first call. `ranksPerDevice`: ranks sharing this GPU (the
  /// grid budget is divided among them).
  /// Errors: kInvalidValue ('world' unsupported, 'rank' out of range,
  /// 'ranksPerDevice' < 1), kNullPointer / kMisaligned ('regions'),
  /// kDeviceError from the runtime.
  static Result<std::unique_ptr<AllreduceCommunicator>> fromDevicePointers(int world, int rank,
                                                                          const std::vector<void*>& regions,
                                                                          const AllreduceOptions& options,
                                                                          int ranksPerDevice = 1) {
    const char* fn = "AllreduceCommunicator::fromDevicePointers";
    if (Status s = checkWorld(fn, world, rank); !s) return s;
    if (ranksPerDevice < 1)
      return Status::error(StatusCode::kInvalidValue, fn, "ranksPerDevice", "must be >= 1", ranksPerDevice);
    if (static_cast<int>(regions.size()) != world)
      return Status::error(StatusCode::kInvalidValue, fn, "regions", "one region per rank", static_cast<std::int64_t>(regions.size()),
                           world);
    for (void* r : regions) {
      if (r == nullptr) return Status::error(StatusCode::kNullPointer, fn, "regions", "null rank region");
      if (reinterpret_cast<std::uintptr_t>(r) % 16 != 0)
        return Status::error(StatusCode::kMisaligned, fn, "regions", "rank region not 16-byte aligned");
    }
    std::unique_ptr<AllreduceCommunicator> c(new AllreduceCommunicator(world, rank, options, ranksPerDevice));
    if (Status s = c->init(regions); !s) return s;
    DeviceError e = runtime::memset(regions[rank], 0, kSignalPadBytes);
    if (e == kDeviceSuccess) e = runtime::streamSynchronize(nullptr);  // done before any peer can signal
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    return Result<std::unique_ptr<AllreduceCommunicator>>(std::move(c));
  }

  /// One process per GPU. Collective: every rank calls it with the same
  /// world and options, and `exchange` all-gathers the IPC handles.
  /// Errors: as fromDevicePointers; kInvalidValue ('exchange') when the
  /// exchanged records are malformed or disagree (world, buffer size);
  /// kUnsupportedDevice when a peer region cannot be opened (no peer access:
  /// use the fallback); kDeviceError from the runtime.
  static Result<std::unique_ptr<AllreduceCommunicator>> createIpc(int world, int rank, const ExchangeFn& exchange,
                                                                 const AllreduceOptions& options) {
    const char* fn = "AllreduceCommunicator::createIpc";
    if (Status s = checkWorld(fn, world, rank); !s) return s;
    if (!exchange) return Status::error(StatusCode::kInvalidValue, fn, "exchange", "no exchange function");
    void* own = nullptr;
    DeviceError e = runtime::malloc(&own, rankBytes(options.bufferBytes));
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    std::unique_ptr<AllreduceCommunicator> c(new AllreduceCommunicator(world, rank, options, 1));
    c->ownedRegion_ = own;
    e = runtime::memset(own, 0, kSignalPadBytes);
    if (e == kDeviceSuccess) e = runtime::streamSynchronize(nullptr);  // zeroed before the exchange lets peers in
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    std::vector<void*> regions(world, nullptr);
    regions[rank] = own;
    if (Status s = c->exchangeAndOpen(fn, own, options.bufferBytes, exchange, regions); !s) return s;
    if (Status s = c->init(regions); !s) return s;
    return Result<std::unique_ptr<AllreduceCommunicator>>(std::move(c));
  }

  AllreduceCommunicator(const AllreduceCommunicator&) = delete;
  AllreduceCommunicator& operator=(const AllreduceCommunicator&) = delete;
  /// Frees this rank's region and closes its mappings of the peers'. A peer
  /// may still be reading this rank's region when this rank's own last call
  /// is done: a two-stage call has no end barrier (its all-gather reads
  /// every rank's scratch after the mid barrier). Destroy a communicator
  /// only after every rank's last call has completed: synchronize the
  /// stream, then a host barrier across the ranks (the exchange function,
  /// torch.distributed.barrier(), MPI_Barrier); fp8scale-allreduce-ranks
  /// does so before its teardown. The same holds for buffers registered
  /// with registerBufferIpc: peers read them too, so free them only after
  /// that barrier.
  ~AllreduceCommunicator() {
    for (void* p : opened_) (void)detail::devIpcClose(p);
    if (ownedRegion_ != nullptr) (void)runtime::free(ownedRegion_);
  }

  int world() const { return world_; }
  int rank() const { return rank_; }
  int ranksPerDevice() const { return ranksPerDevice_; }
  int device() const { return device_; }
  int smCount() const { return smCount_; }
  const AllreduceOptions& options() const { return options_; }
  std::size_t bufferBytes() const { return options_.bufferBytes; }

  /// This rank's registered input buffer (bufferBytes bytes, 256-byte
  /// aligned). Write the partial here (or into a registered buffer) before
  /// the call; it must stay unchanged until the call's kernel finished.
  void* stagingBuffer() const { return registered_.front().base[rank_]; }
  /// Rank p's scratch buffer, as this rank addresses it.
  void* scratch(int p) const { return scratch_[p]; }
  /// Rank p's signal pad, as this rank addresses it.
  SignalPad* pad(int p) const { return pads_[p]; }
  /// This rank's rank table (device memory).
  const AllreduceRankTable* rankTable() const { return table_; }

  /// Registers a buffer of `bytes` bytes whose address in every rank this
  /// process knows (`perRank[p]`, 16-byte aligned). Call it on every rank
  /// with the same list. Errors: kInvalidValue ('perRank' size), kNullPointer,
  /// kMisaligned.
  Status registerBuffers(const std::vector<void*>& perRank, std::size_t bytes) {
    const char* fn = "AllreduceCommunicator::registerBuffers";
    if (static_cast<int>(perRank.size()) != world_)
      return Status::error(StatusCode::kInvalidValue, fn, "perRank", "one address per rank",
                           static_cast<std::int64_t>(perRank.size()), world_);
    Registered r;
    for (int p = 0; p < world_; ++p) {
      if (perRank[p] == nullptr) return Status::error(StatusCode::kNullPointer, fn, "perRank", "null address");
      if (reinterpret_cast<std::uintptr_t>(perRank[p]) % 16 != 0)
        return Status::error(StatusCode::kMisaligned, fn, "perRank", "address not 16-byte aligned");
      r.base[p] = perRank[p];
    }
    r.bytes = bytes;
    registered_.push_back(r);
    return Status::ok();
  }

  /// One process per GPU: registers this rank's allocation `base` (the start
  /// of a cudaMalloc / hipMalloc allocation: IPC handles cover whole
  /// allocations) of `bytes` bytes. Collective, like createIpc().
  Status registerBufferIpc(void* base, std::size_t bytes, const ExchangeFn& exchange) {
    const char* fn = "AllreduceCommunicator::registerBufferIpc";
    if (base == nullptr) return Status::error(StatusCode::kNullPointer, fn, "base", "null buffer");
    std::vector<void*> perRank(world_, nullptr);
    perRank[rank_] = base;
    if (Status s = exchangeAndOpen(fn, base, bytes, exchange, perRank); !s) return s;
    return registerBuffers(perRank, bytes);
  }

  /// For launchers: the address of [x, x + bytes) in every rank's copy of
  /// the registered buffer that holds it. False when no registered buffer
  /// holds the whole range.
  bool findRegistered(const void* x, std::size_t bytes, const void* (&perRank)[kAllreduceMaxRanks]) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(x);
    for (const Registered& r : registered_) {
      const auto base = reinterpret_cast<std::uintptr_t>(r.base[rank_]);
      if (addr < base || addr - base > r.bytes || bytes > r.bytes - (addr - base)) continue;
      for (int p = 0; p < kAllreduceMaxRanks; ++p)
        perRank[p] = p < world_ ? static_cast<const char*>(r.base[p]) + (addr - base) : nullptr;
      return true;
    }
    return false;
  }

  /// For launchers: the barrier arguments of a call with `tag`.
  detail::BarrierArgs barrierArgs(std::uint32_t tag) const {
    detail::BarrierArgs a;
    a.table = table_;
    a.own = pads_[rank_];
    a.world = world_;
    a.rank = rank_;
    a.tag = tag;
    a.spinTimeoutNs = options_.spinTimeoutNs;
    return a;
  }

  /// For launchers: blocks per rank for `kernel` at `threads` threads
  /// (allreduceGridLimit of its occupancy). 0 with an ok status: the grids
  /// of all ranks sharing the device cannot be co-resident.
  template <class Kernel>
  Status gridLimit(const char* fn, Kernel kernel, int threads, int& limit) const {
    int perSm = 0;
    const DeviceError e = detail::cachedBlocksPerSm(&perSm, kernel, threads, device_);
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    limit = allreduceGridLimit(perSm, smCount_, ranksPerDevice_, options_.maxBlocksPerRank);
    return Status::ok();
  }

  /// Reads this rank's error record on `stream` (synchronizes it). kOk when
  /// no call since the last reset() failed; else the first fault, naming
  /// the peer rank (value) and barrier (limit: 1 start, 2 mid, 3 end).
  Status checkErrors(Stream stream) const {
    AllreduceErrorRecord rec;
    DeviceError e = runtime::memcpyAsync(&rec, &pads_[rank_]->error, sizeof(rec), runtime::Copy::DeviceToHost, stream);
    if (e == kDeviceSuccess) e = runtime::streamSynchronize(stream);
    if (e != kDeviceSuccess) return Status::fromDevice("AllreduceCommunicator::checkErrors", e);
    return allreduceErrorStatus(rec);
  }

  /// Clears this rank's pad (epoch, flags, abort mark, error record),
  /// synchronously. Every rank must reset, with no call of any rank in
  /// flight, before the next call (a collective, like creation).
  Status reset() const {
    DeviceError e = runtime::memset(pads_[rank_], 0, kSignalPadBytes);
    if (e == kDeviceSuccess) e = runtime::streamSynchronize(nullptr);
    return e == kDeviceSuccess ? Status::ok() : Status::fromDevice("AllreduceCommunicator::reset", e);
  }

 private:
  struct Registered {
    void* base[kAllreduceMaxRanks] = {};
    std::size_t bytes = 0;
  };

  /// The record each rank contributes to an exchange.
  struct IpcRecord {
    std::uint32_t magic;
    std::int32_t world;
    std::int32_t rank;
    std::uint32_t reserved;
    std::uint64_t bytes;
    detail::IpcMemHandle handle;
  };
  static constexpr std::uint32_t kIpcMagic = 0x46503841u;  // "FP8A"

  AllreduceCommunicator(int world, int rank, const AllreduceOptions& options, int ranksPerDevice)
      : world_(world), rank_(rank), ranksPerDevice_(ranksPerDevice), options_(options) {}

  static Status checkWorld(const char* fn, int world, int rank) {
    if (!isSupportedAllreduceWorld(world))
      return Status::error(StatusCode::kInvalidValue, fn, "world",
                           "the custom allreduce takes 1, 2, 4 or 8 ranks; use the NCCL / RCCL fallback", world);
    if (rank < 0 || rank >= world)
      return Status::error(StatusCode::kInvalidValue, fn, "rank", "must be in [0, world)", rank, world);
    return Status::ok();
  }

  Status init(const std::vector<void*>& regions) {
    const char* fn = "AllreduceCommunicator::init";
    DeviceError e = runtime::getDevice(&device_);
    DeviceInfo info;
    if (e == kDeviceSuccess) e = queryDevice(device_, info);
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    smCount_ = info.multiProcessorCount;
    const std::size_t buf = detail::alignBytes256(options_.bufferBytes);
    Registered staging;
    AllreduceRankTable table{};
    for (int p = 0; p < world_; ++p) {
      char* base = static_cast<char*>(regions[p]);
      pads_[p] = reinterpret_cast<SignalPad*>(base);
      staging.base[p] = base + kSignalPadBytes + kRankTableBytes;
      scratch_[p] = base + kSignalPadBytes + kRankTableBytes + buf;
      table.pads[p] = pads_[p];
      table.scratch[p] = scratch_[p];
    }
    staging.bytes = options_.bufferBytes;
    registered_.insert(registered_.begin(), staging);
    // This rank's table, in its own region (its view of every rank's memory).
    table_ = reinterpret_cast<AllreduceRankTable*>(static_cast<char*>(regions[rank_]) + kSignalPadBytes);
    e = runtime::memcpy(table_, &table, sizeof(table), runtime::Copy::HostToDevice);
    if (e == kDeviceSuccess) e = runtime::streamSynchronize(nullptr);
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    return Status::ok();
  }

  /// All-gathers (handle of `base`, bytes) and opens the peers' handles into
  /// `perRank` (own entry preset by the caller).
  Status exchangeAndOpen(const char* fn, void* base, std::size_t bytes, const ExchangeFn& exchange,
                         std::vector<void*>& perRank) {
    if (!exchange) return Status::error(StatusCode::kInvalidValue, fn, "exchange", "no exchange function");
    IpcRecord mine{};
    mine.magic = kIpcMagic;
    mine.world = world_;
    mine.rank = rank_;
    mine.bytes = bytes;
    DeviceError e = detail::devIpcGet(&mine.handle, base);
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    Bytes out(sizeof(IpcRecord));
    std::memcpy(out.data(), &mine, sizeof(IpcRecord));
    const std::vector<Bytes> all = exchange(out);
    if (static_cast<int>(all.size()) != world_)
      return Status::error(StatusCode::kInvalidValue, fn, "exchange", "did not return one record per rank",
                           static_cast<std::int64_t>(all.size()), world_);
    for (int p = 0; p < world_; ++p) {
      if (all[p].size() != sizeof(IpcRecord))
        return Status::error(StatusCode::kInvalidValue, fn, "exchange", "record of the wrong size", p);
      IpcRecord r;
      std::memcpy(&r, all[p].data(), sizeof(IpcRecord));
      if (r.magic != kIpcMagic || r.world != world_ || r.rank != p || r.bytes != bytes)
        return Status::error(StatusCode::kInvalidValue, fn, "exchange",
                             "record of another communicator, world, rank order or buffer size", p);
      if (p == rank_) continue;
      void* opened = nullptr;
      e = detail::devIpcOpen(&opened, r.handle);
      if (e != kDeviceSuccess)
        return Status::error(StatusCode::kUnsupportedDevice, fn, "peer rank",
                             "cannot open the peer's IPC handle (no peer access?): use the fallback", p);
      opened_.push_back(opened);
      perRank[p] = opened;
    }
    return Status::ok();
  }

  int world_ = 0;
  int rank_ = 0;
  int ranksPerDevice_ = 1;
  int device_ = 0;
  int smCount_ = 0;
  AllreduceOptions options_;
  SignalPad* pads_[kAllreduceMaxRanks] = {};
  AllreduceRankTable* table_ = nullptr;  ///< in this rank's region
  void* scratch_[kAllreduceMaxRanks] = {};
  std::vector<Registered> registered_;  ///< [0]: the staging buffers
  std::vector<void*> opened_;           ///< IPC mappings to close
  void* ownedRegion_ = nullptr;         ///< createIpc(): this rank's region
};

/// W simulated ranks on the current device, in this process: W regions
/// allocated (and zeroed) here, one communicator per rank with
/// ranksPerDevice = W. Owns the memory; movable.
class SimulatedAllreduceGroup {
 public:
  SimulatedAllreduceGroup() = default;
  SimulatedAllreduceGroup(SimulatedAllreduceGroup&& o) noexcept
      : ranks_(std::move(o.ranks_)), regions_(std::move(o.regions_)) {
    o.regions_.clear();
  }
  SimulatedAllreduceGroup& operator=(SimulatedAllreduceGroup&& o) noexcept {
    if (this != &o) {
      release();
      ranks_ = std::move(o.ranks_);
      regions_ = std::move(o.regions_);
      o.regions_.clear();
    }
    return *this;
  }
  ~SimulatedAllreduceGroup() { release(); }

  /// Errors: as AllreduceCommunicator::fromDevicePointers, kDeviceError when
  /// the allocation fails.
  static Result<SimulatedAllreduceGroup> create(int world, const AllreduceOptions& options) {
    const char* fn = "SimulatedAllreduceGroup::create";
    if (!isSupportedAllreduceWorld(world))
      return Status::error(StatusCode::kInvalidValue, fn, "world",
                           "the custom allreduce takes 1, 2, 4 or 8 ranks; use the NCCL / RCCL fallback", world);
    SimulatedAllreduceGroup g;
    for (int p = 0; p < world; ++p) {
      void* r = nullptr;
      DeviceError e = runtime::malloc(&r, AllreduceCommunicator::rankBytes(options.bufferBytes));
      if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
      g.regions_.push_back(r);
      e = runtime::memset(r, 0, kSignalPadBytes);
      if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    }
    for (int p = 0; p < world; ++p) {
      auto c = AllreduceCommunicator::fromDevicePointers(world, p, g.regions_, options, world);
      if (!c) return c.status();
      g.ranks_.push_back(std::move(c.value()));
    }
    return Result<SimulatedAllreduceGroup>(std::move(g));
  }

  int world() const { return static_cast<int>(ranks_.size()); }
  AllreduceCommunicator& operator[](int p) { return *ranks_[p]; }
  const AllreduceCommunicator& operator[](int p) const { return *ranks_[p]; }

  /// registerBuffers on every rank.
  Status registerBuffers(const std::vector<void*>& perRank, std::size_t bytes) {
    for (auto& r : ranks_)
      if (Status s = r->registerBuffers(perRank, bytes); !s) return s;
    return Status::ok();
  }
  /// The first rank's error (checkErrors on `stream` for each rank in order).
  Status checkErrors(Stream stream) const {
    for (const auto& r : ranks_)
      if (Status s = r->checkErrors(stream); !s) return s;
    return Status::ok();
  }
  /// reset() of every rank (no call may be in flight).
  Status reset() const {
    for (const auto& r : ranks_)
      if (Status s = r->reset(); !s) return s;
    return Status::ok();
  }

 private:
  void release() {
    ranks_.clear();
    for (void* r : regions_) (void)runtime::free(r);
    regions_.clear();
  }
  std::vector<std::unique_ptr<AllreduceCommunicator>> ranks_;
  std::vector<void*> regions_;
};

#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
