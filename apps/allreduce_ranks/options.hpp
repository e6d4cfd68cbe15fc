// fp8scale-allreduce-ranks: command-line flags.
//
// Every flag takes its value as the next argument or after '=' (--m 1,16 or
// --m=1,16). A bad flag or value is a UsageError whose message names the flag
// and the value; main() prints it and exits with status 2. The number
// parsing and list splitting are the apps' shared ones (common/cli.hpp).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fp8scale/allreduce/communicator.hpp"
#include "fp8scale/platform.hpp"
#include "common/cli.hpp"

namespace fp8scale {
namespace ranks {

constexpr const char* kProgram = "fp8scale-allreduce-ranks";

/// What each rank runs.
///   kCheck: every algorithm x scale layout against the other ranks, the host
///           reference and each other.
///   kRace:  CUDA-graph replays that overwrite the input right after the call.
///   kBench: the fused call vs NCCL allreduce + rmsNormQuant.
enum class Mode : int { kCheck = 0, kRace = 1, kBench = 2 };

inline const char* modeName(Mode m) {
  return m == Mode::kCheck ? "check" : m == Mode::kRace ? "race" : "bench";
}

/// Default M sweeps: check and race cover decode (1, 16), a batch (128) and
/// a prefill chunk (1000, M % 4 != 0: padded column-major ld); bench the
/// decode-to-prefill range of bench_allreduce plus 2048.
inline const std::vector<index_t>& defaultRows(Mode m) {
  static const std::vector<index_t> check = {1, 16, 128, 1000};
  static const std::vector<index_t> bench = {1, 8, 32, 128, 512, 2048};
  return m == Mode::kBench ? bench : check;
}

/// Largest M accepted by --m, and largest K by --k (rmsNormQuant's longest
/// row for 16-bit inputs, RmsNormPolicy<BFloat16>::kMaxCols).
constexpr index_t kMaxRows = 16384;
constexpr index_t kMaxCols = 32768;
constexpr index_t kGroup = 128;

struct Options {
  int world = 0;                ///< --world; 0: the visible GPUs, rounded down to 1, 2, 4 or 8
  int rank = -1;                ///< --rank; -1: this is the parent
  std::string dir;              ///< --dir: the exchange directory (children only)
  Mode mode = Mode::kCheck;     ///< --mode
  std::vector<index_t> rows;    ///< --m, sorted, unique; empty: the mode's default
  index_t cols = 7168;          ///< --k
  int iters = 1000;             ///< --iters: race replays
  std::string json;             ///< --json FILE (bench)
  bool allowSharedGpu = false;  ///< --allow-shared-gpu
  int timeoutS = 300;           ///< --timeout-s: the parent's limit on the whole run
  bool help = false;            ///< --help

  bool isParent() const { return rank < 0; }
  const std::vector<index_t>& sweep() const { return rows.empty() ? defaultRows(mode) : rows; }
};

/// A bad command line: `message` names the flag and the offending value.
struct UsageError {
  std::string message;
};

inline const char* usageText() {
  return "usage: fp8scale-allreduce-ranks [--world W] [--mode check|race|bench] [flags]\n"
         "\n"
         "Runs the fused allreduce + residual + RMSNorm + group quant (allreduceRmsNormQuant) with one\n"
         "process per GPU: the parent spawns W ranks of this program, which open each other's buffers\n"
         "with CUDA IPC (AllreduceCommunicator::createIpc) and exchange handles, hashes and NCCL ids\n"
         "through files in a fresh temporary directory. bf16 input, e4m3fn, fp32 scales, groups of 128,\n"
         "residual in place, bf16 norm output.\n"
         "\n"
         "modes:\n"
         "  check   (default) for each M: one-stage, two-stage, auto and (when built with NCCL) the\n"
         "          NCCL fallback, with row-major and column-major (ld = align(M, 4)) scales over\n"
         "          garbage-filled buffers. Checks: every rank's outputs hash alike; the allreduce equals\n"
         "          the host's rank-ordered fp32 sum and residual_out the host's, bit for bit; fp8 within\n"
         "          one step of the host reference (at most 1% of values off); scale padding zeroed and\n"
         "          nothing written past the outputs; every algorithm and the fallback give the same bits;\n"
         "          column-major scales equal row-major ones.\n"
         "  race    for each M, one-stage and two-stage: a CUDA graph of the fused call followed by a\n"
         "          memset that overwrites this rank's input with NaN, replayed --iters times; counts NaN\n"
         "          and wrong words in the outputs after every replay.\n"
         "  bench   for each M: the fused call (auto algorithm) vs ncclAllReduce (bf16 sum) +\n"
         "          rmsNormQuant, each timed as a CUDA graph of 20 calls (median of 15 replays); rank 0\n"
         "          prints the table (slowest rank per M).\n"
         "\n"
         "flags:\n"
         "  --world W            ranks, one per GPU: 1, 2, 4 or 8 (default: the visible GPUs, rounded down)\n"
         "  --mode MODE          check, race or bench (default check)\n"
         "  --m LIST             token counts M, comma-separated (default 1,16,128,1000; bench\n"
         "                       1,8,32,128,512,2048)\n"
         "  --k K                hidden size, a multiple of 128 up to 32768 (default 7168)\n"
         "  --iters N            race: graph replays per M and algorithm (default 1000)\n"
         "  --json FILE          bench: rank 0 also writes the results as JSON\n"
         "  --allow-shared-gpu   run even with fewer GPUs than ranks (ranks share GPUs, time-sliced:\n"
         "                       a smoke test only; the NCCL parts are skipped)\n"
         "  --timeout-s S        the parent kills every rank after S seconds (default 300)\n"
         "  --help               this text\n"
         "set by the parent for its children:\n"
         "  --rank R --dir D     run as rank R, exchanging through directory D\n"
         "\n"
         "exit status: 0 every rank passed (or no CUDA device: nothing to run); 1 a check failed, a rank\n"
         "failed or hung; 2 a bad flag, or fewer GPUs than ranks without --allow-shared-gpu.\n";
}

/// Parses argv. Returns the options, or the UsageError of the first bad flag.
/// A flag given twice keeps its last value (the parent appends --world to
/// the children's flags).
inline std::variant<Options, UsageError> parseOptions(int argc, const char* const* argv) {
  namespace util = cli;
  Options o;
  bool itersGiven = false;
  cli::FlagReader reader(argc, argv);
  while (reader.next()) {
    const std::string arg = reader.flag();
    const std::string& value = reader.value();  // a flag's value once takeValue() took it

    if (arg == "--help" || arg == "-h") {
      if (auto e = reader.noValue()) return UsageError{*e};
      o.help = true;
    } else if (arg == "--allow-shared-gpu") {
      if (auto e = reader.noValue()) return UsageError{*e};
      o.allowSharedGpu = true;
    } else if (arg == "--world") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = util::parseInt(value, 1, kAllreduceMaxRanks);
      if (!v || !isSupportedAllreduceWorld(static_cast<int>(*v)))
        return UsageError{reader.badValue("the custom allreduce takes 1, 2, 4 or 8 ranks")};
      o.world = static_cast<int>(*v);
    } else if (arg == "--rank") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = util::parseInt(value, 0, kAllreduceMaxRanks - 1);
      if (!v) return UsageError{reader.badValue("not a rank in [0, 7]")};
      o.rank = static_cast<int>(*v);
    } else if (arg == "--dir") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value.empty()) return UsageError{reader.badValue("empty directory name")};
      o.dir = value;
    } else if (arg == "--mode") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value == "check") o.mode = Mode::kCheck;
      else if (value == "race") o.mode = Mode::kRace;
      else if (value == "bench") o.mode = Mode::kBench;
      else return UsageError{reader.badValue("not one of check, race, bench")};
    } else if (arg == "--m") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      o.rows.clear();
      for (const std::string& item : util::splitList(value)) {
        const auto v = util::parseInt(item, 1, kMaxRows);
        if (!v)
          return UsageError{
              reader.badValue("'" + item + "' is not a token count in [1, " + std::to_string(kMaxRows) + "]")};
        o.rows.push_back(*v);
      }
      std::sort(o.rows.begin(), o.rows.end());
      o.rows.erase(std::unique(o.rows.begin(), o.rows.end()), o.rows.end());
    } else if (arg == "--k") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = util::parseInt(value, kGroup, kMaxCols);
      if (!v || *v % kGroup != 0)
        return UsageError{reader.badValue("not a multiple of 128 in [128, " + std::to_string(kMaxCols) + "]")};
      o.cols = *v;
    } else if (arg == "--iters") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = util::parseInt(value, 1, 1000000);
      if (!v) return UsageError{reader.badValue("not an integer in [1, 1000000]")};
      o.iters = static_cast<int>(*v);
      itersGiven = true;
    } else if (arg == "--json") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value.empty()) return UsageError{reader.badValue("empty file name")};
      o.json = value;
    } else if (arg == "--timeout-s") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = util::parseInt(value, 1, 86400);
      if (!v) return UsageError{reader.badValue("not a number of seconds in [1, 86400]")};
      o.timeoutS = static_cast<int>(*v);
    } else {
      return UsageError{"unknown flag '" + reader.argument() + "' (see --help)"};
    }
  }
  if (o.help) return o;
  if (!o.json.empty() && o.mode != Mode::kBench)
    return UsageError{"--json " + o.json + ": only --mode bench writes JSON"};
  if (itersGiven && o.mode != Mode::kRace) return UsageError{"--iters: only --mode race replays"};
  if (o.rank >= 0) {
    if (o.world == 0) return UsageError{"--rank needs --world"};
    if (o.rank >= o.world)
      return UsageError{"--rank '" + std::to_string(o.rank) + "': must be below --world (" +
                        std::to_string(o.world) + ")"};
    if (o.dir.empty()) return UsageError{"--rank needs --dir (the parent sets both)"};
  } else if (!o.dir.empty()) {
    return UsageError{"--dir " + o.dir + ": only children take --dir (with --rank); the parent makes its own"};
  }
  return o;
}

}  // namespace ranks
}  // namespace fp8scale
