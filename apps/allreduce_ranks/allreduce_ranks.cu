// fp8scale-allreduce-ranks: the fused allreduce + residual + RMSNorm + group
// quant (producers/allreduce_rmsnorm_quant.hpp) with one process per GPU and
// real CUDA IPC, where the device tests and bench_allreduce simulate the
// ranks on one GPU.
//
//   fp8scale-allreduce-ranks --world 8                  check every algorithm
//   fp8scale-allreduce-ranks --world 8 --mode race      graph-replay race test
//   fp8scale-allreduce-ranks --world 8 --mode bench     fused vs NCCL + rmsNormQuant
//
// Run without --rank it is the parent (launcher.hpp): it spawns W copies of
// itself with --rank r --dir D, which set up their rank (rank_context.hpp:
// GPU r % device count, AllreduceCommunicator::createIpc through the file
// exchange of file_exchange.hpp, NCCL when built in) and run the mode
// (check_mode.hpp, race_mode.hpp, bench_mode.hpp). `--help` lists the flags;
// options.hpp parses them.
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <variant>
#include <vector>

#include "allreduce_ranks/bench_mode.hpp"
#include "allreduce_ranks/check_mode.hpp"
#include "allreduce_ranks/launcher.hpp"
#include "allreduce_ranks/options.hpp"
#include "allreduce_ranks/race_mode.hpp"
#include "allreduce_ranks/rank_context.hpp"

namespace {

using namespace fp8scale;
using namespace fp8scale::ranks;

int usageError(const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
  return 2;
}

/// A child: rank o.rank of o.world. Exit status 0 when its mode passed.
int runRank(const Options& o) {
  // A parent that is killed (Ctrl-C, a test's timeout) takes its ranks along.
  const pid_t parent = getppid();
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // stdout is a file: keep every finished line

  RankContext ctx;
  try {
    if (const int rc = ctx.setUp(o); rc != 0) return rc;
    std::printf("rank %d: GPU %d of %d (%s)%s, world %d, K=%lld, mode %s; custom allreduce over CUDA IPC "
                "(createIpc, input registered with registerBufferIpc, %zu MiB buffers); NCCL: %s\n",
                ctx.rank, ctx.device, ctx.deviceCount, ctx.deviceName.c_str(), ctx.sharedGpu ? ", shared" : "",
                ctx.world, static_cast<long long>(ctx.cols), modeName(o.mode), ctx.comm->bufferBytes() >> 20,
                ctx.hasNccl() ? "yes" : ("no, " + ctx.ncclAbsent).c_str());
    int failed = 0;
    switch (o.mode) {
      case Mode::kCheck: failed = runCheckMode(ctx, o); break;
      case Mode::kRace: failed = runRaceMode(ctx, o); break;
      case Mode::kBench: failed = runBenchMode(ctx, o); break;
    }
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    // A refused launch, a device fault or a failed exchange: the collective
    // is broken, so skip the last barrier (the parent ends the other ranks).
    ctx.failed = true;
    std::fflush(stdout);
    ctx.error(e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before the CUDA runtime starts, for this process and the ranks it
  // spawns: NVLink multicast (NCCL's NVLS) stays off, and every kernel is
  // loaded up front (lazy loading may synchronize while a peer's kernel spins).
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);

  auto parsed = parseOptions(argc, argv);
  if (const auto* e = std::get_if<UsageError>(&parsed)) return usageError(e->message);
  const Options o = std::get<Options>(parsed);
  if (o.help) {
    std::fputs(usageText(), stdout);
    return 0;
  }
  try {
    if (o.isParent()) return runParent(o, std::vector<std::string>(argv + 1, argv + argc));
    return runRank(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
}
