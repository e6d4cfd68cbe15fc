// fp8scale-pipeline: the fp8 activation producer sites of a DeepSeek-V3-shaped
// decoder layer, end to end. Every site runs two ways, the layout gate's
// (transposed scale emit + zero-copy ColMajor view) and the old one (row-major
// emit + materialize); both feed a block-scaled fp8 GEMM; the program checks
// that the two ways are bit-identical and reports what the gate's way saves.
//
// One source: compiled as C++ it has the host path only; compiled as CUDA
// (nvcc, sm_90a) it takes the GPU path when an sm_90 GPU and cuBLASLt >= 12.9
// are there, and compiled as HIP (gfx942 / gfx950) when an AMD GPU is there
// (producers and materialize on the GPU, the GEMM from the host reference);
// the host path otherwise. The first output line says which.
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

// Why a host-only build has no GPU path: CMake says what it found when it
// configured the build (see tests/CMakeLists.txt).
#if !defined(FP8SCALE_HAS_DEVICE)
#ifndef FP8SCALE_PIPELINE_HOST_ONLY_REASON
#define FP8SCALE_PIPELINE_HOST_ONLY_REASON "a host-only build"
#endif
constexpr bool kHostOnlyBuild = true;
constexpr const char* kHostOnlyReason = FP8SCALE_PIPELINE_HOST_ONLY_REASON;
#else
constexpr bool kHostOnlyBuild = false;
#endif

/// A float as the flags take it: "7", "0.5".
std::string formatFloat(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

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
#if defined(FP8SCALE_HAS_DEVICE)
  GpuContext ctx;
  if (o.forceHost) {
    why = "--host given";
  } else {
    why = GpuContext::create(ctx);
    gpu = why.empty();
  }
#else
  why = kHostOnlyReason;
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

  // --- The first lines: which path, and what runs -------------------------------
  const bool text = o.format == OutputFormat::kText;
  const bool markdown = o.format == OutputFormat::kMarkdown;
  std::string pathDetail = why;  // host: why; GPU: the device
  std::string first;
  std::string pathText;
  if (gpu) {
#if defined(FP8SCALE_HAS_DEVICE)
    pathDetail = ctx.description();
    first = "GPU path on " + pathDetail;
    pathText = kDeviceGemm ? "GPU path: device producers, materialize and the cuBLASLt block-scaled GEMM (fp32 output); "
                             "times are events around graph replays of " +
                                 std::to_string(iters) + " calls, median of 7 replays."
                           : "GPU path: device producers and materialize; the GEMM is the fp64 host reference at the "
                             "checked columns (no block-scaled GEMM on this platform: producer + GEMM times are not "
                             "measured); times are events around graph replays of " +
                                 std::to_string(iters) + " calls, median of 7 replays.";
#endif
  } else {
    first = why + ": host path";
    pathText = std::string("host path") + (kHostOnlyBuild ? " (a host-only build)" : "") +
               ": host reference producers, materializeHost and an fp64 reference GEMM; times are wall clock "
               "of scalar reference code, " +
               (iters == 1 ? std::string("one call.") : "median of " + std::to_string(iters) + " calls.");
  }
  if (text || markdown) {
    const std::string what =
        std::string(kProgram) +
        ": the fp8 producer sites of a DeepSeek-V3-shaped decoder layer (hidden 7168), each run two ways on the "
        "same input. gate: the layout gate's path, emitTransposed(kCublasLtVec128, M): the producer writes its "
        "scales into the ColMajor{align(M, 4)} buffer the GEMM reads, handed on as a zero-copy view. old: "
        "row-major emit + materialize. Both feed a block-scaled fp8 GEMM (e4m3fn, fp32 scales, 1x128 "
        "activation groups, 128x128 weight blocks) and must give the same bits.";
    const std::string setup = "input: " + inputText + "; swiglu_limit " + formatFloat(o.swigluLimit) +
                              "; GEMM error checked at " + std::to_string(kSampleBlocks * kSampleColumnsPerBlock) +
                              " output columns per site against fp64 (tolerance " + toleranceText() + ").";
    std::printf("%s\n%s%s%s", first.c_str(), wrapText(what).c_str(), wrapText(pathText).c_str(),
                wrapText(setup).c_str());
    std::fflush(stdout);
  }

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
#if defined(FP8SCALE_HAS_DEVICE)
            DeviceSite<In> site(ctx, in, p.rows.back(), ws, o.swigluLimit, iters, o.seed);
            runAll(site);
#endif
          } else {
            HostSite<In> site(in, ws, o.swigluLimit, iters);
            runAll(site);
          }
          progress.finish();
          if (text) {
            std::printf("\n%s", siteHeadingText(in).c_str());
            printTextTableHead(stdout);
            for (const SiteRow& r : rows) printTextRow(stdout, r, gpu);
            printTextFailures(stdout, rows);
          } else if (markdown) {
            std::printf("\n%s", siteHeading(in).c_str());
            printTableHead(stdout);
            for (const SiteRow& r : rows) printRow(stdout, r, gpu);
          }
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
  if (text) printTextLayerSummary(stdout, all, gpu);
  if (markdown) printLayerSummary(stdout, all, gpu);

  int failed = 0;
  for (const SiteRow& r : all) failed += !r.ok;
  const std::string summary = summarySentence(all, gpu);
  doc["checks"] = static_cast<int>(all.size());
  doc["failed"] = failed;
  doc["ok"] = failed == 0;
  doc["summary"] = summary;
  if (json.is_open()) {
    json << doc.dump(2) << "\n";
    if (!json) {
      std::fprintf(stderr, "%s: error: --json %s: write failed\n", kProgram, o.json.c_str());
      return 1;
    }
  }
  if (text || markdown) std::printf("\n%s", wrapText(summary).c_str());
  else std::printf("%s\n", doc.dump(2).c_str());
  if (failed == 0) return 0;
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
