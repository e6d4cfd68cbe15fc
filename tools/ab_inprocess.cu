// ab_inprocess: an A/B of two builds of the producer launchers in one process.
//
// Why: an A/B of two benchmark binaries run one after the other (h200_ab.sh)
// compares two processes, and between processes the same kernel's time moves
// by several percent at small M with programmatic launch (clock state, the
// placement of each process's buffers). Here both builds (tools/ab_side.cu
// compiled against each set of headers into a shared library) are loaded into
// one process, enqueue onto the same stream and the same buffers, and are timed
// replay by replay in alternation, so drift falls on both sides alike and the
// ratio is taken pair by pair.
//
//   ab_inprocess OLD.so NEW.so [--pairs N] [--filter REGEX] [--json FILE] [--launches]
//
// For each entry (ab_side.cu lists them): one CUDA graph of 20 calls per side,
// each warmed up; then N pairs (default 60) of one replay of each side, the
// order alternating from pair to pair, each replay timed by CUDA events.
// Prints per entry: the median us per call of each side, new/old of the
// medians, and the 10th / 50th / 90th percentiles of the N per-pair ratios.
// Each side's graph is compared launch by launch (grid, block, dynamic shared
// memory): entries whose launch shapes differ are marked "(launches differ)",
// and --launches prints the first launch (kernel name and shape) of every
// entry. Two sides with the same launches and the same SASS (compare
// `cuobjdump -sass` of the two libraries) differ only by where their code
// lies; an A/A run (one library under two file names) measures that floor.
// Exit status 1 when a side refuses an entry or a CUDA call fails.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

struct Buffers {
  void* x;
  void* r;
  void* w;
  void* q;
  void* s;
};

using EntriesFn = int (*)();
using NameFn = const char* (*)(int);
using EnqueueFn = int (*)(int, const Buffers*, cudaStream_t, char*, int);

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void checkDriver(CUresult e, const char* what) {
  if (e != CUDA_SUCCESS) {
    const char* msg = "unknown error";
    cuGetErrorString(e, &msg);
    std::fprintf(stderr, "%s: %s\n", what, msg);
    std::exit(1);
  }
}

struct Side {
  EntriesFn entries = nullptr;
  NameFn name = nullptr;
  EnqueueFn enqueue = nullptr;

  explicit Side(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
      std::exit(1);
    }
    entries = reinterpret_cast<EntriesFn>(dlsym(h, "fp8scale_ab_entries"));
    name = reinterpret_cast<NameFn>(dlsym(h, "fp8scale_ab_name"));
    enqueue = reinterpret_cast<EnqueueFn>(dlsym(h, "fp8scale_ab_enqueue"));
    if (entries == nullptr || name == nullptr || enqueue == nullptr) {
      std::fprintf(stderr, "%s: not an ab_side library\n", path);
      std::exit(1);
    }
  }
};

/// The kernel launches of a captured graph: `shapes` holds one line per
/// launch with grid, block and dynamic shared memory (what two sides must
/// agree on to do the same work), `names` the kernels' mangled names (which
/// may differ between versions of the headers).
struct Launches {
  std::string shapes, names;
};

Launches describeLaunches(cudaGraph_t graph) {
  std::size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
  Launches out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    if (type != cudaGraphNodeTypeKernel) {
      out.shapes += "node type " + std::to_string(static_cast<int>(type)) + "\n";
      continue;
    }
    // The driver API: each side links its own CUDA runtime, which the
    // runtime of this program does not know, so only the driver can name
    // the kernels of a graph that both enqueued.
    CUDA_KERNEL_NODE_PARAMS p{};
    checkDriver(cuGraphKernelNodeGetParams(node, &p), "cuGraphKernelNodeGetParams");
    const char* name = "?";
    checkDriver(p.func != nullptr ? cuFuncGetName(&name, p.func) : cuKernelGetName(&name, p.kern), "get kernel name");
    char line[1024];
    std::snprintf(line, sizeof line, "grid %u,%u,%u block %u,%u,%u smem %u\n", p.gridDimX, p.gridDimY, p.gridDimZ,
                  p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes);
    out.shapes += line;
    out.names += std::string(name) + "\n";
  }
  return out;
}

struct Captured {
  cudaGraphExec_t exec = nullptr;
  Launches launches;  ///< describeLaunches of its graph
};

/// A graph of kCalls calls of one entry of one side, instantiated and warmed.
Captured capture(const Side& side, int entry, const Buffers& b, cudaStream_t stream) {
  constexpr int kCalls = 20;
  char err[512] = {0};
  if (side.enqueue(entry, &b, stream, err, sizeof err) != 0) {  // once outside the capture
    std::fprintf(stderr, "%s refused: %s\n", side.name(entry), err);
    std::exit(1);
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < kCalls; ++i)
    if (side.enqueue(entry, &b, stream, err, sizeof err) != 0) {
      std::fprintf(stderr, "%s refused in capture: %s\n", side.name(entry), err);
      std::exit(1);
    }
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  Captured c;
  c.launches = describeLaunches(graph);
  check(cudaGraphInstantiate(&c.exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  for (int i = 0; i < 2; ++i) check(cudaGraphLaunch(c.exec, stream), "cudaGraphLaunch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return c;
}

/// us per call of one replay of `exec` (20 calls).
double replayUs(cudaGraphExec_t exec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) {
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms * 1e3 / 20;
}

double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

__global__ void fillKernel(unsigned short* p, std::size_t n) {
  // bf16 values of magnitude about 2^-4 .. 2^3, both signs, never zero: a
  // counter hash, so both sides read the same data.
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ static_cast<unsigned>(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<unsigned short>(((h & 1u) << 15) | ((123u + (h >> 1) % 8u) << 7) | ((h >> 8) & 0x7Fu));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OLD.so NEW.so [--pairs N] [--filter REGEX] [--json FILE] [--launches]\n", argv[0]);
    return 2;
  }
  int pairs = 60;
  std::string filter = ".*", json;
  bool showLaunches = false;
  for (int i = 3; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "--launches") {
      showLaunches = true;
      continue;
    }
    if (i + 1 >= argc || (opt != "--pairs" && opt != "--filter" && opt != "--json")) {
      std::fprintf(stderr, "unknown option or missing value: %s\n", opt.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (opt == "--pairs") pairs = std::max(1, std::atoi(value));
    else if (opt == "--filter") filter = value;
    else json = value;
  }
  const Side oldSide(argv[1]), newSide(argv[2]);
  const int n = oldSide.entries();
  if (n != newSide.entries()) {
    std::fprintf(stderr, "the two libraries list different entries\n");
    return 1;
  }
  const std::size_t rows = 65536, hidden = 7168;
  Buffers b{};
  check(cudaMalloc(&b.x, rows * hidden * 2), "cudaMalloc x");
  check(cudaMalloc(&b.r, rows * hidden * 2), "cudaMalloc r");
  check(cudaMalloc(&b.w, hidden * 2), "cudaMalloc w");
  check(cudaMalloc(&b.q, rows * hidden), "cudaMalloc q");
  check(cudaMalloc(&b.s, rows * 56 * 4), "cudaMalloc s");
  fillKernel<<<1024, 256>>>(static_cast<unsigned short*>(b.x), rows * hidden);
  fillKernel<<<1024, 256>>>(static_cast<unsigned short*>(b.r), rows * hidden);
  fillKernel<<<1024, 256>>>(static_cast<unsigned short*>(b.w), hidden);
  check(cudaDeviceSynchronize(), "fill");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  const std::regex re(filter);
  std::string out = "[\n";
  std::printf("%-36s %9s %9s %8s   %s\n", "entry", "old us", "new us", "new/old", "pair ratio p10 p50 p90");
  for (int e = 0; e < n; ++e) {
    const std::string name = oldSide.name(e);
    if (name != newSide.name(e)) {
      std::fprintf(stderr, "entry %d: %s against %s\n", e, name.c_str(), newSide.name(e));
      return 1;
    }
    if (!std::regex_search(name, re)) continue;
    const Captured capOld = capture(oldSide, e, b, stream), capNew = capture(newSide, e, b, stream);
    cudaGraphExec_t execOld = capOld.exec, execNew = capNew.exec;
    const bool sameLaunches = capOld.launches.shapes == capNew.launches.shapes;
    if (showLaunches || !sameLaunches) {
      const auto first = [](const std::string& lines) { return lines.substr(0, lines.find('\n') + 1); };
      std::printf("%s: %s launch shapes\n  old: %s  %s  new: %s  %s", name.c_str(),
                  sameLaunches ? "same" : "different", first(capOld.launches.names).c_str(),
                  first(capOld.launches.shapes).c_str(), first(capNew.launches.names).c_str(),
                  first(capNew.launches.shapes).c_str());
    }
    std::vector<double> o, nw, ratio;
    for (int p = 0; p < pairs; ++p) {
      double to, tn;
      if (p % 2 == 0) {
        to = replayUs(execOld, stream, start, stop);
        tn = replayUs(execNew, stream, start, stop);
      } else {
        tn = replayUs(execNew, stream, start, stop);
        to = replayUs(execOld, stream, start, stop);
      }
      o.push_back(to);
      nw.push_back(tn);
      ratio.push_back(tn / to);
    }
    check(cudaGraphExecDestroy(execOld), "cudaGraphExecDestroy");
    check(cudaGraphExecDestroy(execNew), "cudaGraphExecDestroy");
    const double mo = quantile(o, 0.5), mn = quantile(nw, 0.5);
    const double r10 = quantile(ratio, 0.1), r50 = quantile(ratio, 0.5), r90 = quantile(ratio, 0.9);
    std::printf("%-36s %9.2f %9.2f %8.3f   %.3f %.3f %.3f%s\n", name.c_str(), mo, mn, mn / mo, r10, r50, r90,
                sameLaunches ? "" : "   (launches differ)");
    std::fflush(stdout);
    char line[512];
    std::snprintf(line, sizeof line,
                  "  {\"name\": \"%s\", \"old_us\": %.4f, \"new_us\": %.4f, \"ratio_p10\": %.4f, "
                  "\"ratio_p50\": %.4f, \"ratio_p90\": %.4f, \"pairs\": %d, \"same_launches\": %s},\n",
                  name.c_str(), mo, mn, r10, r50, r90, pairs, sameLaunches ? "true" : "false");
    out += line;
  }
  if (out.size() > 2) out.erase(out.size() - 2, 1);  // the last entry's comma
  out += "]\n";
  if (!json.empty()) std::ofstream(json) << out;
  return 0;
}
