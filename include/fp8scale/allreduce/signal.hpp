// fp8scale: the signal pad of the custom allreduce, its barrier and its error
// record.
//
// Every rank owns one SignalPad in device memory that its peers can write
// (through CUDA / HIP IPC, or directly when all ranks live on one device).
// A barrier is per block: thread p of block b of rank r stores an arrival
// value into slot [phase][b][r] of peer p's pad with a system-scope release,
// then waits, with a system-scope acquire, until slot [phase][b][p] of its own
// pad holds the value peer p's block b stores there. Both sides bracket that
// exchange with __syncthreads(), so everything the block wrote before the
// barrier is visible to the peer's block after it (release is cumulative over
// the block barrier; the scheme of vLLM's custom_all_reduce.cuh and
// TensorRT-LLM's two-shot allreduce).
//
// Arrival values: (epoch << 32) | tag. The epoch counts this rank's calls
// (pad.epoch, advanced in device memory by the last block of each call, so
// CUDA / HIP graph replays run back to back without a host update); the tag
// hashes what must agree between ranks (operation, algorithm, M, K, row
// stride, input type, grid). A slot holding the current epoch with another
// tag means the peer made a different call: a shape mismatch, reported, not
// waited on. Values only grow between resets (the epoch skips 0 on wrap).
//
// Every wait is bounded when spinTimeoutNs > 0: past it the waiting thread
// records which peer did not arrive at which barrier in its rank's
// ErrorRecord, marks every pad "aborted" so that the other ranks stop
// waiting too, and its block skips the rest of the call. The host reads the
// record with AllreduceCommunicator::checkErrors(), which turns it into a
// Status. After an error the pads stay aborted until reset().
#pragma once

#include <cstdint>

#include "../platform.hpp"
#include "../status.hpp"

namespace fp8scale {

/// Ranks the custom allreduce's pointer tables hold (one node).
constexpr int kAllreduceMaxRanks = 8;
/// Blocks per rank the signal pad has slots for.
constexpr int kAllreduceMaxBlocks = 256;

/// The three barriers of a call.
enum class AllreducePhase : std::uint32_t { kStart = 0, kMid = 1, kEnd = 2 };

/// What went wrong in a call, as recorded on the device.
enum class AllreduceFault : std::uint32_t {
  kNone = 0,
  kTimeout = 1,        ///< `peer` did not arrive at `phase` within spinTimeoutNs
  kShapeMismatch = 2,  ///< `peer` arrived with another tag: different M, K, ldx, type, algorithm or grid
  kAbortedByPeer = 3,  ///< another rank (`peer`) failed first; this rank stopped waiting
};

/// The first fault a rank saw, in its own pad. All zero when there was none.
struct AllreduceErrorRecord {
  std::uint32_t fault = 0;  ///< AllreduceFault
  std::int32_t peer = -1;   ///< the rank that did not arrive / mismatched / aborted
  std::int32_t block = -1;  ///< the waiting block
  std::uint32_t phase = 0;  ///< AllreducePhase
  std::uint32_t epoch = 0;  ///< the call's epoch (calls since the last reset)
  std::uint32_t reserved = 0;
};

/// One rank's pad. `flags` and `abortedBy` are written by peers; the rest by
/// the rank's own kernels. Zero-initialized (memset) at creation and reset.
struct SignalPad {
  std::uint64_t flags[3][kAllreduceMaxBlocks][kAllreduceMaxRanks];  ///< [phase][block][source rank]
  std::uint32_t epoch;      ///< epoch of the last completed call of this rank
  std::uint32_t done;       ///< blocks of the running call that finished (last one advances epoch)
  std::uint32_t abortedBy;  ///< 0, or 1 + the rank that failed first
  std::uint32_t pad0;
  AllreduceErrorRecord error;
};

/// Bytes reserved for a SignalPad at the start of each rank's allocation
/// (keeps what follows 256-byte aligned).
constexpr std::size_t kSignalPadBytes = (sizeof(SignalPad) + 255) / 256 * 256;

/// Every rank's pad and scratch buffer as one rank addresses them, in that
/// rank's device memory (after its pad; written once at creation, never by
/// kernels). Kernels read entries on demand, so a per-thread index (the
/// barrier's peer, a column chunk's owner) costs one cached load instead of
/// holding all the pointers in scalar registers.
struct AllreduceRankTable {
  SignalPad* pads[kAllreduceMaxRanks];
  void* scratch[kAllreduceMaxRanks];
};

/// Bytes reserved for the rank table.
constexpr std::size_t kRankTableBytes = (sizeof(AllreduceRankTable) + 255) / 256 * 256;

/// 32-bit FNV-1a over the words that must agree between ranks.
constexpr std::uint32_t allreduceTag(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
                                     std::uint64_t e) {
  const std::uint64_t words[5] = {a, b, c, d, e};
  std::uint32_t h = 2166136261u;
  for (std::uint64_t w : words)
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<std::uint32_t>((w >> (8 * i)) & 0xFFu);
      h *= 16777619u;
    }
  return h;
}

/// The Status an error record reports (kOk when there was no fault).
/// Timeouts and aborts are kDeviceError; a mismatch is kInvalidShape; the
/// value is the peer rank, the limit the phase (1 start, 2 mid, 3 end).
inline Status allreduceErrorStatus(const AllreduceErrorRecord& e) {
  const std::int64_t phase = static_cast<std::int64_t>(e.phase) + 1;
  switch (static_cast<AllreduceFault>(e.fault)) {
    case AllreduceFault::kNone: return Status::ok();
    case AllreduceFault::kTimeout:
      return Status::error(StatusCode::kDeviceError, "allreduce", "peer rank",
                           e.phase == 0   ? "did not arrive at the start barrier within the spin limit (phase 1)"
                           : e.phase == 1 ? "did not arrive at the mid barrier within the spin limit (phase 2)"
                                          : "did not arrive at the end barrier within the spin limit (phase 3)",
                           e.peer, phase);
    case AllreduceFault::kShapeMismatch:
      return Status::error(StatusCode::kInvalidShape, "allreduce", "peer rank",
                           "made a different call (M, K, row stride, input type, algorithm or grid differ)", e.peer,
                           phase);
    case AllreduceFault::kAbortedByPeer:
      return Status::error(StatusCode::kDeviceError, "allreduce", "peer rank",
                           "failed first; this rank stopped waiting (reset() before the next call)", e.peer, phase);
  }
  return Status::error(StatusCode::kDeviceError, "allreduce", "fault", "unknown fault code in the error record",
                       static_cast<std::int64_t>(e.fault));
}

#if defined(FP8SCALE_HAS_DEVICE)
namespace detail {

// System-scope flag accesses, the clock and spinPause(): platform.hpp.

/// What a block needs to take part in barriers: the rank table (every
/// rank's pad, as this rank addresses it) and the call's arrival value.
struct BarrierArgs {
  const AllreduceRankTable* table = nullptr;  ///< this rank's table (device memory)
  SignalPad* own = nullptr;                   ///< table->pads[rank]
  int world = 0;
  int rank = 0;
  std::uint32_t tag = 0;
  std::uint64_t spinTimeoutNs = 0;  ///< 0: wait without a limit
};

/// Records `fault` (first one wins) in this rank's pad and tells every rank
/// to stop waiting.
FP8SCALE_DEVICE inline void recordFault(const BarrierArgs& a, AllreduceFault fault, int peer, AllreducePhase phase,
                                        std::uint32_t epoch) {
  SignalPad* own = a.own;
  if (atomicCAS(&own->error.fault, 0u, static_cast<std::uint32_t>(fault)) == 0u) {
    own->error.peer = peer;
    own->error.block = static_cast<std::int32_t>(blockIdx.x);
    own->error.phase = static_cast<std::uint32_t>(phase);
    own->error.epoch = epoch;
  }
  if (fault != AllreduceFault::kAbortedByPeer) {
    for (int p = 0; p < a.world; ++p)
      storeRelaxedSystem(&a.table->pads[p]->abortedBy, static_cast<std::uint32_t>(a.rank) + 1u);
  }
}

/// The epoch of the call this kernel runs: one past the last completed call
/// (0 is skipped on wrap, so a zeroed slot never matches).
FP8SCALE_DEVICE FP8SCALE_FORCEINLINE std::uint32_t callEpoch(const BarrierArgs& a) {
  const std::uint32_t e = loadRelaxedSystem(&a.own->epoch) + 1u;
  return e == 0u ? 1u : e;
}

/// Thread `p` (< world) of the block: signal peer p, wait for peer p.
/// Returns false when the wait failed (fault recorded).
FP8SCALE_DEVICE inline bool arriveAndWait(const BarrierArgs& a, AllreducePhase phase, std::uint32_t epoch, int p) {
  const int b = static_cast<int>(blockIdx.x);
  const int ph = static_cast<int>(phase);
  const std::uint64_t value = (static_cast<std::uint64_t>(epoch) << 32) | a.tag;
  SignalPad* own = a.own;
  if (phase == AllreducePhase::kStart) {  // a communicator that saw a fault stays aborted until reset()
    const std::uint32_t aborted = loadRelaxedSystem(&own->abortedBy);
    if (aborted != 0u) {
      recordFault(a, AllreduceFault::kAbortedByPeer, static_cast<int>(aborted) - 1, phase, epoch);
      return false;
    }
  }
  SignalPad* peer = a.table->pads[p];
  storeReleaseSystem(&peer->flags[ph][b][a.rank], value);  // peer p: rank arrived
  const std::uint64_t* slot = &own->flags[ph][b][p];             // own pad: peer p arrived
  std::uint64_t start = 0;
  for (std::uint32_t it = 0;; ++it) {
    const std::uint64_t v = loadAcquireSystem(slot);
    if (v == value) return true;
    if ((v >> 32) == epoch) {  // the current call, another tag
      recordFault(a, AllreduceFault::kShapeMismatch, p, phase, epoch);
      return false;
    }
    if ((it & 15u) == 15u) {
      const std::uint32_t aborted = loadRelaxedSystem(&own->abortedBy);
      if (aborted != 0u) {
        recordFault(a, AllreduceFault::kAbortedByPeer, static_cast<int>(aborted) - 1, phase, epoch);
        return false;
      }
      // A peer with another M may launch fewer blocks: its block 0 always
      // exists, and its start slot shows the mismatch.
      if (phase == AllreducePhase::kStart && b != 0) {
        const std::uint64_t v0 = loadAcquireSystem(&own->flags[0][0][p]);
        if ((v0 >> 32) == epoch && v0 != value) {
          recordFault(a, AllreduceFault::kShapeMismatch, p, phase, epoch);
          return false;
        }
      }
      if (a.spinTimeoutNs != 0) {
        const std::uint64_t now = deviceNanoseconds();
        if (start == 0) {
          start = now;
        } else if (now - start > a.spinTimeoutNs) {
          recordFault(a, AllreduceFault::kTimeout, p, phase, epoch);
          return false;
        }
      }
      if (it > 1024u) spinPause();
    }
  }
}

/// Block-wide barrier with every rank's block of the same index. All threads
/// of the block call it; it returns false to all of them when any wait failed.
/// `failed` is a __shared__ int of the caller, 0 on entry.
FP8SCALE_DEVICE inline bool blockBarrier(const BarrierArgs& a, AllreducePhase phase, std::uint32_t epoch,
                                         int* failed) {
  __syncthreads();  // the block's writes precede the release below
  const int t = static_cast<int>(threadIdx.x);
  if (t < a.world && !arriveAndWait(a, phase, epoch, t)) atomicExch(failed, 1);
  __syncthreads();  // the acquires precede the block's reads after the barrier
  return *failed == 0;
}

/// The end of a call, in every block (also after a failed barrier): the last
/// of the grid's `blocks` blocks to finish records the call's epoch in the
/// rank's pad.
FP8SCALE_DEVICE inline void finishCall(const BarrierArgs& a, std::uint32_t epoch, int blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    SignalPad* own = a.own;
    __threadfence();
    if (atomicAdd(&own->done, 1u) == static_cast<std::uint32_t>(blocks) - 1u) {
      own->done = 0u;
      storeRelaxedSystem(&own->epoch, epoch);
    }
  }
}

}  // namespace detail
#endif  // FP8SCALE_HAS_DEVICE

}  // namespace fp8scale
