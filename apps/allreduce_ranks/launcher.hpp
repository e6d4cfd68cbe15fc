// fp8scale-allreduce-ranks, the parent: makes a fresh exchange directory,
// spawns one child per rank (this program again, with --world W --rank r
// --dir D appended to its own flags), waits for all of them, ends the rest
// when one fails or the run passes --timeout-s, and prints every rank's
// output in rank order.
//
// Each child's stdout goes to D/rank-r.out (printed by the parent at the
// end, so ranks do not interleave); its stderr is the parent's (progress
// and errors as they happen). The children inherit the parent's environment
// with NCCL_NVLS_ENABLE=0 and CUDA_MODULE_LOADING=EAGER (main() sets both
// before anything else).
#pragma once

#include <cuda_runtime.h>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "allreduce_ranks/options.hpp"

extern char** environ;

namespace fp8scale {
namespace ranks {

/// The exchange directory of one run: mkdtemp under $TMPDIR (or /tmp),
/// removed with its files on destruction.
class RunDirectory {
 public:
  RunDirectory() = default;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  ~RunDirectory() { remove(); }

  /// Creates the directory; false with `error` set when it cannot.
  bool create(std::string& error) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/fp8scale-ranks-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      error = "mkdtemp " + pattern + ": " + std::strerror(errno);
      return false;
    }
    path_ = buf.data();
    return true;
  }

  const std::string& path() const { return path_; }

 private:
  void remove() {
    if (path_.empty()) return;
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") (void)unlink((path_ + "/" + name).c_str());
      }
      closedir(d);
    }
    (void)rmdir(path_.c_str());
    path_.clear();
  }

  std::string path_;
};

/// One child process and how it ended.
struct RankProcess {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;     ///< waitpid() status, once ended
  std::string fate;   ///< why the parent ended it; empty when it ended by itself

  bool passed() const { return !running && fate.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    std::string s;
    if (WIFEXITED(status)) s = "exit status " + std::to_string(WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) s = std::string("killed by signal ") + strsignal(WTERMSIG(status));
    else s = "ended (status " + std::to_string(status) + ")";
    return fate.empty() ? s : fate + " (" + s + ")";
  }
};

/// The path of this program (the children run the same binary).
inline std::string selfExecutable() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

/// Starts rank `rank`: `exe` with the parent's flags and --world/--rank/--dir,
/// stdout to `outPath`. False with `error` set when the spawn fails.
inline bool spawnRank(const std::string& exe, const std::vector<std::string>& parentArgs, int world, int rank,
                      const std::string& dir, const std::string& outPath, RankProcess& proc, std::string& error) {
  std::vector<std::string> args;
  args.push_back(exe);
  args.insert(args.end(), parentArgs.begin(), parentArgs.end());
  for (const std::string& a : {std::string("--world"), std::to_string(world), std::string("--rank"),
                               std::to_string(rank), std::string("--dir"), dir})
    args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = "posix_spawn " + exe + " (rank " + std::to_string(rank) + "): " + std::strerror(rc);
    return false;
  }
  proc.rank = rank;
  proc.pid = pid;
  proc.running = true;
  return true;
}

/// Reaps `proc` if it has ended (blocking when `wait`).
inline void reap(RankProcess& proc, bool wait) {
  if (!proc.running) return;
  int status = 0;
  const pid_t r = waitpid(proc.pid, &status, wait ? 0 : WNOHANG);
  if (r == proc.pid) {
    proc.running = false;
    proc.status = status;
  } else if (r < 0 && errno != EINTR) {
    proc.running = false;  // not our child any more: nothing to wait for
    proc.status = 0;
    proc.fate = std::string("lost (waitpid: ") + std::strerror(errno) + ")";
  }
}

/// Ends every running child: SIGTERM, up to 2 s to exit, then SIGKILL.
inline void stopRanks(std::vector<RankProcess>& procs, const std::string& why) {
  for (RankProcess& p : procs)
    if (p.running) {
      p.fate = why;
      (void)kill(p.pid, SIGTERM);
    }
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool any = true;
  while (any && std::chrono::steady_clock::now() < grace) {
    any = false;
    for (RankProcess& p : procs) {
      reap(p, false);
      any |= p.running;
    }
    if (any) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (RankProcess& p : procs)
    if (p.running) {
      (void)kill(p.pid, SIGKILL);
      reap(p, true);
    }
}

/// Waits until every child has ended; the first one that fails (or the
/// deadline) ends the others.
inline void waitForRanks(std::vector<RankProcess>& procs, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool any = false;
    for (RankProcess& p : procs) {
      reap(p, false);
      if (!p.running && !p.passed()) {
        stopRanks(procs, "stopped after rank " + std::to_string(p.rank) + " failed");
        return;
      }
      any |= p.running;
    }
    if (!any) return;
    if (std::chrono::steady_clock::now() > deadline) {
      stopRanks(procs, "timed out after " + std::to_string(timeout.count()) + " s (--timeout-s)");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// The largest world size the custom allreduce takes with at most `gpus` ranks.
inline int defaultWorld(int gpus) {
  int w = 1;
  for (int c : {2, 4, 8})
    if (c <= gpus) w = c;
  return w;
}

/// The parent's run. `parentArgs`: argv[1..], passed on to every child.
inline int runParent(const Options& o, const std::vector<std::string>& parentArgs) {
  int gpus = 0;
  const cudaError_t e = cudaGetDeviceCount(&gpus);
  // Nothing to run (exit 0, as on CI): no device, or no NVIDIA driver at all
  // (the runtime says "insufficient driver" when none is loaded). A driver
  // that is present but fails is an error.
  const bool noDriver = e == cudaErrorInsufficientDriver && !std::filesystem::exists("/dev/nvidiactl");
  if ((e == cudaSuccess && gpus == 0) || e == cudaErrorNoDevice || noDriver) {
    std::printf("%s: no CUDA device (%s); nothing to run\n", kProgram,
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: error: cudaGetDeviceCount: %s\n", kProgram, cudaGetErrorString(e));
    return 1;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "%s: error: cudaGetDeviceProperties(0) failed\n", kProgram);
    return 1;
  }
  const int world = o.world > 0 ? o.world : defaultWorld(gpus);
  const bool shared = gpus < world;
  if (shared && !o.allowSharedGpu) {
    std::fprintf(stderr,
                 "%s: error: --world %d needs %d GPUs, %d visible: ranks would share a GPU (pass "
                 "--allow-shared-gpu for a time-sliced smoke test)\n",
                 kProgram, world, world, gpus);
    return 2;
  }
  if (!o.json.empty()) {
    std::ofstream probe(o.json, std::ios::app);  // append: an earlier file survives a failed run
    if (!probe) {
      std::fprintf(stderr, "%s: error: --json %s: cannot open for writing\n", kProgram, o.json.c_str());
      return 2;
    }
  }
  RunDirectory dir;
  std::string error;
  if (!dir.create(error)) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, error.c_str());
    return 1;
  }
  std::printf("%s: %d rank%s, one process per GPU, mode %s, on %d x %s (sm_%d%d)%s; exchange directory %s\n",
              kProgram, world, world == 1 ? "" : "s", modeName(o.mode), gpus, prop.name, prop.major, prop.minor,
              shared ? "; SHARED GPUs (time-sliced smoke test)" : "", dir.path().c_str());
  std::fflush(stdout);

  const std::string exe = selfExecutable();
  std::vector<RankProcess> procs(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    const std::string out = dir.path() + "/rank-" + std::to_string(r) + ".out";
    if (!spawnRank(exe, parentArgs, world, r, dir.path(), out, procs[r], error)) {
      std::fprintf(stderr, "%s: error: %s\n", kProgram, error.c_str());
      stopRanks(procs, "stopped: a later rank could not be started");
      return 1;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  waitForRanks(procs, std::chrono::seconds(o.timeoutS));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Every rank's output, in rank order.
  for (int r = 0; r < world; ++r) {
    std::ifstream in(dir.path() + "/rank-" + std::to_string(r) + ".out");
    std::string line;
    while (std::getline(in, line)) std::printf("%s\n", line.c_str());
  }
  int failed = 0;
  for (const RankProcess& p : procs)
    if (!p.passed()) {
      ++failed;
      std::printf("%s: rank %d: %s\n", kProgram, p.rank, p.describe().c_str());
    }
  if (failed == 0) {
    std::printf("%s: all %d ranks passed (mode %s, %.1f s)\n", kProgram, world, modeName(o.mode), seconds);
    return 0;
  }
  std::printf("%s: FAILED: %d of %d ranks did not pass (mode %s, %.1f s)\n", kProgram, failed, world,
              modeName(o.mode), seconds);
  return 1;
}

}  // namespace ranks
}  // namespace fp8scale
