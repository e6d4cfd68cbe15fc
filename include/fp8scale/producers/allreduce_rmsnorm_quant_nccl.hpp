// fp8scale: the NCCL / RCCL fallback of the fused allreduce + RMSNorm quant,
// for what the custom path does not cover (more ranks than one node, a
// world size it does not take, a message larger than its buffer, no peer
// access).
//
// It must give the custom path's bits. An ncclAllReduce does not: NCCL sums
// in an order of its own choosing (ring, tree, NVLS) and may round through
// the input type between steps. So the fallback gathers instead of reducing:
// ncclAllGather copies every rank's partial, byte for byte, into a
// [W][M][K] buffer (no arithmetic), and gatheredRmsNormQuant() sums the W
// slices in rank order in fp32 and runs the same epilogue on the same device
// code: the same bits by construction. The price is W x the bytes of a
// reduce-scatter + all-gather allreduce on the wire.
//
// Compiled only when the build defines FP8SCALE_WITH_NCCL (CMake:
// FP8SCALE_NCCL=AUTO|ON|OFF in tests/device) and links NCCL (NVIDIA,
// <nccl.h>) or RCCL (AMD, <rccl/rccl.h>); otherwise this header declares
// nothing.
#pragma once

#include "allreduce_rmsnorm_quant.hpp"

#if defined(FP8SCALE_HAS_DEVICE) && defined(FP8SCALE_WITH_NCCL)

#if defined(FP8SCALE_PLATFORM_HIP)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

namespace fp8scale {

/// The fallback for one rank of an NCCL / RCCL communicator (not owned; any
/// number of ranks and nodes). Owns the gathered buffer of (W + 1) x
/// maxMessageBytes bytes on the current device (W partials and the staging
/// rows of long-row shapes). Movable, not copyable.
class NcclRmsNormQuantFallback {
 public:
  NcclRmsNormQuantFallback() = default;
  NcclRmsNormQuantFallback(NcclRmsNormQuantFallback&& o) noexcept { *this = std::move(o); }
  NcclRmsNormQuantFallback& operator=(NcclRmsNormQuantFallback&& o) noexcept {
    if (this != &o) {
      release();
      comm_ = o.comm_;
      world_ = o.world_;
      rank_ = o.rank_;
      gathered_ = o.gathered_;
      maxMessageBytes_ = o.maxMessageBytes_;
      o.gathered_ = nullptr;
    }
    return *this;
  }
  NcclRmsNormQuantFallback(const NcclRmsNormQuantFallback&) = delete;
  NcclRmsNormQuantFallback& operator=(const NcclRmsNormQuantFallback&) = delete;
  ~NcclRmsNormQuantFallback() { release(); }

  /// Errors: kNullPointer ('comm'); kInvalidValue ('maxMessageBytes' 0 or not
  /// a multiple of 16); kDeviceError (NCCL's or the runtime's message).
  static Result<NcclRmsNormQuantFallback> create(ncclComm_t comm, std::size_t maxMessageBytes) {
    const char* fn = "NcclRmsNormQuantFallback::create";
    if (comm == nullptr) return Status::error(StatusCode::kNullPointer, fn, "comm", "null NCCL communicator");
    if (maxMessageBytes == 0 || maxMessageBytes % 16 != 0)
      return Status::error(StatusCode::kInvalidValue, fn, "maxMessageBytes", "must be a positive multiple of 16",
                           static_cast<std::int64_t>(maxMessageBytes));
    NcclRmsNormQuantFallback f;
    f.comm_ = comm;
    ncclResult_t r = ncclCommCount(comm, &f.world_);
    if (r == ncclSuccess) r = ncclCommUserRank(comm, &f.rank_);
    if (r != ncclSuccess) return ncclStatus(fn, r);
    f.maxMessageBytes_ = maxMessageBytes;
    const DeviceError e =
        runtime::malloc(&f.gathered_, maxMessageBytes * (static_cast<std::size_t>(f.world_) + 1));
    if (e != kDeviceSuccess) return Status::fromDevice(fn, e);
    return Result<NcclRmsNormQuantFallback>(std::move(f));
  }

  int world() const { return world_; }
  int rank() const { return rank_; }
  /// [world][maxMessageBytes] bytes: rank p's partial at p * M * K elements.
  void* gatheredBuffer() const { return gathered_; }

  /// ncclAllGather of in.x ([M, K], contiguous: ldx == K) on `stream`, then
  /// gatheredRmsNormQuant() of the W partials into this rank's outputs.
  /// Errors: as gatheredRmsNormQuant(); kInvalidShape ('ldx' != K: an
  /// all-gather moves contiguous rows; 'M' when M * K * sizeof(In) exceeds
  /// maxMessageBytes); kDeviceError with NCCL's message.
  template <class Format, class Layout, class In>
  Result<QuantizedTensor<Format, Layout>> run(const RmsNormQuantInput<In>& in, Fp8Matrix<Format> q,
                                              ScaleOutput<Layout> scale, const QuantOptions& opt,
                                              Stream stream) const {
    const char* fn = "NcclRmsNormQuantFallback::run";
    // The epilogue's arguments first (they bound M * K), then the message,
    // all before any communication.
    float fmax = 0.0f;
    if (Status s = detail::checkRmsNormQuant(fn, in, q, scale, opt, fmax); !s) return s;
    if (in.rows > 0 && in.ldx != in.cols)
      return Status::error(StatusCode::kInvalidShape, fn, "ldx", "the all-gather needs contiguous rows (ldx == K)",
                           in.ldx, in.cols);
    const index_t elems = in.rows * in.cols;  // checked: x spans at most 2^48 bytes
    if (elems * static_cast<index_t>(sizeof(In)) > static_cast<index_t>(maxMessageBytes_))
      return Status::error(StatusCode::kInvalidShape, fn, "M", "message larger than maxMessageBytes", in.rows,
                           static_cast<std::int64_t>(maxMessageBytes_));
    In* gathered = static_cast<In*>(gathered_);
    if (elems > 0) {
      const ncclResult_t r = ncclAllGather(in.x, gathered, static_cast<std::size_t>(elems) * sizeof(In), ncclUint8,
                                           comm_, stream);
      if (r != ncclSuccess) return ncclStatus(fn, r);
    }
    RmsNormQuantInput<In> local = in;
    local.x = gathered;
    In* stage = reinterpret_cast<In*>(static_cast<char*>(gathered_) + maxMessageBytes_ * static_cast<std::size_t>(world_));
    return gatheredRmsNormQuant<Format>(local, world_, elems, stage, q, scale, opt, stream);
  }

 private:
  static Status ncclStatus(const char* fn, ncclResult_t r) {
    Status s = Status::error(StatusCode::kDeviceError, fn, "nccl", ncclGetErrorString(r), static_cast<int>(r));
    return s;
  }
  void release() {
    if (gathered_ != nullptr) (void)runtime::free(gathered_);
    gathered_ = nullptr;
  }

  ncclComm_t comm_ = nullptr;
  int world_ = 0;
  int rank_ = 0;
  void* gathered_ = nullptr;
  std::size_t maxMessageBytes_ = 0;
};

/// The custom path when `custom` covers the call, else the fallback: one
/// entry point for an engine. `custom` (nullable) covers it when the input is
/// registered with it and the chosen algorithm's preconditions hold (every
/// rank decides alike when the calls agree). Errors: the chosen path's; with
/// neither applicable, that of the last path tried.
template <class Format, class Layout, class In>
Result<QuantizedTensor<Format, Layout>> allreduceRmsNormQuantOrFallback(const AllreduceCommunicator* custom,
                                                                        const NcclRmsNormQuantFallback* fallback,
                                                                        const RmsNormQuantInput<In>& in,
                                                                        Fp8Matrix<Format> q,
                                                                        ScaleOutput<Layout> scale,
                                                                        const QuantOptions& opt, Stream stream) {
  if (custom != nullptr) {
    // Bad arguments are refused by the custom path, before any
    // communication; only a valid call chooses between the paths.
    float fmax = 0.0f;
    if (Status s = detail::checkRmsNormQuant("allreduceRmsNormQuant", in, q, scale, opt, fmax); !s) return s;
    const AllreduceAlgorithm algo = chooseAllreduceAlgorithm(AllreduceAlgorithm::kAuto, custom->world(), in.rows,
                                                             in.cols, static_cast<int>(sizeof(In)),
                                                             custom->options().oneStageMaxBytes);
    const std::size_t bytes =
        in.rows == 0 ? 0 : static_cast<std::size_t>((in.rows - 1) * in.ldx + in.cols) * sizeof(In);
    const void* perRank[kAllreduceMaxRanks];
    const bool covered =
        custom->findRegistered(in.x, bytes, perRank) &&
        detail::checkAllreduceShape<In>("allreduceRmsNormQuantOrFallback", algo, custom->world(), in.rows, in.cols,
                                        custom->bufferBytes(), detail::allreduceStagesRows<In>(in.cols))
            .isOk();
    if (covered || fallback == nullptr) return allreduceRmsNormQuant<Format>(*custom, in, q, scale, opt, stream);
  }
  if (fallback == nullptr)
    return Status::error(StatusCode::kInvalidValue, "allreduceRmsNormQuantOrFallback", "fallback",
                         "neither a custom communicator nor a fallback");
  return fallback->run<Format>(in, q, scale, opt, stream);
}

}  // namespace fp8scale

#endif  // FP8SCALE_HAS_DEVICE && FP8SCALE_WITH_NCCL
