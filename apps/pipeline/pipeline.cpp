// fp8scale-pipeline: the fp8 activation producer sites of a DeepSeek-V3-shaped
// decoder layer, end to end. Every site runs two ways, the layout gate's
// (transposed scale emit + zero-copy ColMajor view) and the old one (row-major
// emit + materialize); both feed a block-scaled fp8 GEMM; the program checks
// that the two ways are bit-identical and reports what the gate's way saves.
//
// One source: compiled as C++ it has the host path only; compiled as CUDA
// (nvcc, sm_90a) it takes the GPU path when an sm_90 GPU and cuBLASLt >= 12.9
// are there, and the host path otherwise. The first output line says which.
// `fp8scale-pipeline --help` lists the flags; options.hpp parses them.
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "pipeline/device_runner.hpp"
#include "pipeline/host_runner.hpp"
#include "pipeline/options.hpp"
#include "pipeline/report.hpp"
#include "pipeline/safetensors.hpp"
#include "pipeline/site_checks.hpp"
#include "pipeline/site_data.hpp"

namespace {

using namespace fp8scale;
using namespace fp8scale::pipeline;

constexpr const char* kProgram = "fp8scale-pipeline";

int inputError(const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
  return 2;
}

/// One site to run: its input (from the file, or built when the site's turn
/// comes) and its M sweep.
struct SitePlan {
  SiteId id = SiteId::kAttnIn;
  std::optional<AnySiteInput> input;
  std::vector<index_t> rows;
};

/// "[3/36] o_proj_in M=128" on stderr: rewritten in place on a terminal, one
/// line per step otherwise.
class Progress {
 public:
  explicit Progress(index_t total) : total_(total), tty_(isatty(2) != 0) {}
  void step(const char* site, index_t m) {
    ++done_;
    if (tty_)
      std::fprintf(stderr, "\r[%lld/%lld] %s M=%lld      ", static_cast<long long>(done_),
                   static_cast<long long>(total_), site, static_cast<long long>(m));
    else
      std::fprintf(stderr, "progress: [%lld/%lld] %s M=%lld\n", static_cast<long long>(done_),
                   static_cast<long long>(total_), site, static_cast<long long>(m));
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  index_t total_ = 0, done_ = 0;
  bool tty_ = false;
};

/// The M sweep of a site fed from a tensor of `available` rows: --m as given
/// (each M must fit), or the default sweep cut at `available`, plus
/// `available` itself when it is below the default's largest M.
std::optional<std::string> rowsForTensor(const Options& o, const std::vector<index_t>& defaults, SiteId site,
                                         const std::string& tensor, index_t available, std::vector<index_t>& rows) {
  if (!o.rows.empty()) {
    for (index_t m : o.rows)
      if (m > available)
        return "--m " + std::to_string(m) + ": --map " + siteName(site) + "=" + tensor + " has only " +
               std::to_string(available) + " rows";
    rows = o.rows;
    return std::nullopt;
  }
  for (index_t m : defaults)
    if (m <= available) rows.push_back(m);
  if (available < defaults.back() && (rows.empty() || rows.back() != available)) rows.push_back(available);
  return std::nullopt;
}

int run(int argc, char** argv) {
  auto parsed = parseOptions(argc, argv);
  if (auto* e = std::get_if<UsageError>(&parsed)) return inputError(e->message);
  const Options o = std::get<Options>(parsed);
  if (o.help) {
    std::fputs(usageText(), stdout);
    return 0;
  }

  // --- Which path ------------------------------------------------------------
  bool gpu = false;
  std::string why;
#if defined(FP8SCALE_PLATFORM_CUDA)
  GpuContext ctx;
  if (o.forceHost) {
    why = "--host";
  } else {
    why = GpuContext::create(ctx);
    gpu = why.empty();
  }
#else
  why = "host-only build: no CUDA compiler when it was configured";
#endif
  const std::vector<index_t>& defaults = gpu ? defaultGpuRows() : defaultHostRows();
  const int iters = o.iters > 0 ? o.iters : (gpu ? 20 : 2);

  // --- Inputs and sweeps, all validated before anything runs -------------------
  std::vector<SitePlan> plans;
  std::string inputText = "built-in activations, seed " + std::to_string(o.seed);
  if (!o.input.empty()) {
    auto file = SafetensorsFile::open(o.input);
    if (!file) return inputError("--input: " + file.error().what);
    inputText = o.input;
    for (const auto& [site, tensor] : o.map) {
      auto loaded = loadSiteInput(file.value(), site, tensor, o.attnN, o.seed);
      if (auto* e = std::get_if<std::string>(&loaded)) return inputError(*e);
      SitePlan p;
      p.id = site;
      p.input = std::move(std::get<AnySiteInput>(loaded));
      const index_t available = std::visit([](const auto& in) { return in.rows; }, *p.input);
      if (auto e = rowsForTensor(o, defaults, site, tensor, available, p.rows)) return inputError(*e);
      plans.push_back(std::move(p));
    }
  } else {
    for (SiteId site : o.sites) {
      SitePlan p;
      p.id = site;
      p.rows = o.rows.empty() ? defaults : o.rows;
      plans.push_back(std::move(p));
    }
  }
  std::ofstream json;
  if (!o.json.empty()) {
    json.open(o.json);
    if (!json) return inputError("--json " + o.json + ": cannot open for writing");
  }

  // --- The first line: which path ----------------------------------------------
  std::string first;
  std::string pathDetail = why;  // host: why; GPU: the device
  if (gpu) {
#if defined(FP8SCALE_PLATFORM_CUDA)
    pathDetail = ctx.description();
    first = std::string(kProgram) + ": GPU path on " + pathDetail +
            ": device producers, materialize, cuBLASLt block-scaled fp8 GEMM (fp32 output)";
#endif
  } else {
    first = std::string(kProgram) + ": host path (" + why +
            "): host reference producers, materializeHost, fp64 reference GEMM at " +
            std::to_string(kSampleBlocks * kSampleColumnsPerBlock) +
            " checked output columns per site; times are wall clock of scalar reference code";
  }
  std::printf("%s\n", first.c_str());
  std::printf("consumer: cuBLASLt VEC128_32F activation scales, ColMajor{align(M, 4)}; gate: transposed emit for "
              "every M (emitTransposed(kCublasLtVec128, M): M >= 2, and M = 1 since ld = 4 there); e4m3fn, fp32 scales, groups of 1x128, "
              "weights 128x128; input: %s; swiglu_limit %g; %d calls per timing%s; GEMM error checked at %d columns "
              "per site against fp64 (tolerance %g)\n",
              inputText.c_str(), static_cast<double>(o.swigluLimit), iters,
              gpu ? " (CUDA graph, median of 7 replays)" : " (median)", kSampleBlocks * kSampleColumnsPerBlock,
              kGemmTolerance);
  std::fflush(stdout);

  index_t steps = 0;
  for (const SitePlan& p : plans) steps += static_cast<index_t>(p.rows.size());
  Progress progress(steps);

  nlohmann::ordered_json doc;
  doc["program"] = kProgram;
  doc["path"] = gpu ? "gpu" : "host";
  doc["path_detail"] = pathDetail;
  doc["consumer"] = "cuBLASLt VEC128_32F: ColMajor{align(M, 4)}";
  doc["format"] = "e4m3fn";
  doc["scale_rule"] = "fp32";
  doc["group_size"] = kGroup;
  doc["input"] = o.input.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.input);
  doc["seed"] = o.seed;
  doc["swiglu_limit"] = o.swigluLimit;
  doc["iters"] = iters;
  doc["gemm_tolerance"] = kGemmTolerance;
  doc["sites"] = nlohmann::ordered_json::array();

  std::vector<SiteRow> all;
  for (SitePlan& p : plans) {
    if (!p.input) p.input = makeBuiltinInput(defaultShape(p.id, o.attnN), p.rows.back(), o.seed);
    std::vector<SiteRow> rows;
    std::visit(
        [&](const auto& in) {
          using In = typename std::decay_t<decltype(in)>::input_type;
          const WeightSample ws = makeWeightSample(in.shape, o.seed);
          auto runAll = [&](auto& site) {
            for (index_t m : p.rows) {
              progress.step(siteName(p.id), m);
              SiteRun r = site.run(m);
              if (!o.corrupt.empty()) corruptGatePath(r, o.corrupt);
              rows.push_back(evaluate(in, r, ws, o.swigluLimit));
            }
          };
          if (gpu) {
#if defined(FP8SCALE_PLATFORM_CUDA)
            DeviceSite<In> site(ctx, in, p.rows.back(), ws, o.swigluLimit, iters, o.seed);
            runAll(site);
#endif
          } else {
            HostSite<In> site(in, ws, o.swigluLimit, iters);
            runAll(site);
          }
          progress.finish();
          std::printf("\n%s", siteHeading(in).c_str());
          printTableHead(stdout);
          for (const SiteRow& r : rows) printRow(stdout, r, gpu);
          std::fflush(stdout);

          nlohmann::ordered_json site;
          site["site"] = siteName(p.id);
          site["producer"] = in.shape.producerText;
          site["gemm"] = in.shape.gemmText;
          site["input"] = in.source;
          site["input_dtype"] = in.dtype;
          site["K"] = in.shape.K;
          site["N"] = in.shape.N;
          site["heads"] = in.shape.heads;
          site["head_dim"] = in.shape.headDim;
          site["checked_columns"] = ws.columns();
          site["results"] = nlohmann::ordered_json::array();
          for (const SiteRow& r : rows) site["results"].push_back(rowJson(r));
          doc["sites"].push_back(site);
        },
        *p.input);
    p.input.reset();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  printLayerSummary(stdout, all, gpu);

  int failed = 0;
  for (const SiteRow& r : all) failed += !r.ok;
  doc["checks"] = static_cast<int>(all.size());
  doc["failed"] = failed;
  doc["ok"] = failed == 0;
  if (json.is_open()) {
    json << doc.dump(2) << "\n";
    if (!json) {
      std::fprintf(stderr, "%s: error: --json %s: write failed\n", kProgram, o.json.c_str());
      return 1;
    }
  }
  if (failed == 0) {
    std::printf("\nall %zu site x M checks passed: fp8 data, scales through the views, scale padding, residual "
                "and GEMM output bit-identical between the two paths; GEMM error <= %g\n",
                all.size(), kGemmTolerance);
    return 0;
  }
  std::printf("\nFAILED: %d of %zu site x M checks (see the check column)\n", failed, all.size());
  std::fprintf(stderr, "%s: %d of %zu contract checks failed\n", kProgram, failed, all.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
}
