// fp8scale-pipeline: command-line flags.
//
// Every flag takes its value as the next argument or after '=' (--m 1,3 or
// --m=1,3). A bad flag or value is a UsageError whose message names the flag
// and the value; main() prints it and exits with status 2.
#pragma once

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "common/cli.hpp"
#include "fp8scale/platform.hpp"

namespace fp8scale {
namespace pipeline {

/// The producer sites of one decoder layer, in layer order.
enum class SiteId : int { kAttnIn, kOProjIn, kMoeIn, kDownIn };
constexpr int kSiteCount = 4;
constexpr SiteId kAllSites[kSiteCount] = {SiteId::kAttnIn, SiteId::kOProjIn, SiteId::kMoeIn, SiteId::kDownIn};

/// The name a site has on the command line and in the output, e.g. "o_proj_in".
inline const char* siteName(SiteId s) {
  switch (s) {
    case SiteId::kAttnIn: return "attn_in";
    case SiteId::kOProjIn: return "o_proj_in";
    case SiteId::kMoeIn: return "moe_in";
    case SiteId::kDownIn: return "down_in";
  }
  return "?";
}

inline std::optional<SiteId> siteFromName(const std::string& name) {
  for (SiteId s : kAllSites)
    if (name == siteName(s)) return s;
  return std::nullopt;
}

inline std::string siteList() {
  std::string out;
  for (SiteId s : kAllSites) out += std::string(out.empty() ? "" : ", ") + siteName(s);
  return out;
}

/// Default M sweeps: the GPU's covers decode (1-4, 16, 17), a batch (128) and
/// prefill (1000, 4096), with M % 4 != 0 cases that pad the scale ld; the
/// host path's is small because its producers and GEMM are scalar references.
inline const std::vector<index_t>& defaultGpuRows() {
  static const std::vector<index_t> rows = {1, 2, 3, 4, 16, 17, 128, 1000, 4096};
  return rows;
}
inline const std::vector<index_t>& defaultHostRows() {
  static const std::vector<index_t> rows = {1, 3, 16, 128};
  return rows;
}

/// Largest M accepted by --m (a [M, 16384] bf16 activation is then 8 GiB).
constexpr index_t kMaxRows = 262144;

/// How results go to stdout: fixed-width text tables (default), markdown
/// tables, or the JSON document alone.
enum class OutputFormat { kText, kMarkdown, kJson };

struct Options {
  std::vector<index_t> rows;        ///< --m, sorted, unique; empty: the path's default
  std::vector<SiteId> sites;        ///< --sites (or the mapped sites with --input); empty: all
  index_t attnN = 1536;             ///< --attn-n: attn_in's GEMM N (q_a_proj: q_lora_rank)
  float swigluLimit = 7.0f;         ///< --swiglu-limit; <= 0: no clamp
  int iters = 0;                    ///< --iters; 0: the path's default
  std::uint64_t seed = 1;           ///< --seed
  std::string input;                ///< --input FILE.safetensors
  std::vector<std::pair<SiteId, std::string>> map;  ///< --map SITE=TENSOR, in site order
  std::string json;                 ///< --json FILE
  OutputFormat format = OutputFormat::kText;  ///< --format
  bool forceHost = false;           ///< --host
  std::string corrupt;              ///< --corrupt WHAT (testing the checks); empty: none
  bool help = false;                ///< --help
};

/// A bad command line: `message` names the flag and the offending value.
struct UsageError {
  std::string message;
};

inline const char* usageText() {
  return "usage: fp8scale-pipeline [flags]\n"
         "\n"
         "Runs the fp8 activation producer sites of a DeepSeek-V3-shaped decoder layer (hidden 7168)\n"
         "two ways each: the layout gate's choice (transposed scale emit + zero-copy column-major view)\n"
         "and the old way (row-major emit + materialize), feeds both results to a block-scaled fp8\n"
         "GEMM (1x128 activation scales, 128x128 weight blocks) and checks that the two paths are\n"
         "bit-identical. Sites:\n"
         "  attn_in    RMSNorm quant (+ residual) of x[M, 7168]       -> GEMM N = --attn-n (q_a_proj)\n"
         "  o_proj_in  group quant of the attention output [M, 128, 128] -> GEMM N = 7168, K = 16384\n"
         "  moe_in     RMSNorm quant (+ residual) of x[M, 7168]       -> GEMM N = 4096 (gate|up, I = 2048)\n"
         "  down_in    SiLU-clamp quant of gate|up [M, 2 * 2048]      -> GEMM N = 7168, K = 2048\n"
         "GPU path (a CUDA build on an sm_90 GPU): device producers, materialize, cuBLASLt. Host path\n"
         "(no GPU, a host-only build, or --host): the host reference producers, materializeHost and\n"
         "the fp64 reference GEMM. The first output line says which path runs, and why.\n"
         "\n"
         "flags:\n"
         "  --m LIST            token counts M, comma-separated\n"
         "                      (default GPU 1,2,3,4,16,17,128,1000,4096; host 1,3,16,128)\n"
         "  --sites LIST        sites to run, comma-separated (default: all four)\n"
         "  --attn-n N          attn_in's GEMM output features (default 1536; a multiple of 16)\n"
         "  --swiglu-limit F    down_in's clamp: gate <= F, |up| <= F (default 7; <= 0 disables)\n"
         "  --iters N           calls per timing (GPU: calls per graph, median of 7 replays,\n"
         "                      default 20; host: repetitions, median, default 2)\n"
         "  --seed N            seed of the built-in activations, the weights and the checked\n"
         "                      GEMM columns (default 1)\n"
         "  --input FILE        real activations from a safetensors file (BF16, F16 or F32 tensors);\n"
         "                      only the sites named by --map run, on the tensor's rows\n"
         "  --map SITE=TENSOR   the tensor of --input that feeds SITE (repeatable). Shapes: attn_in,\n"
         "                      moe_in [rows..., K]; o_proj_in [rows..., H, D] or [rows, K];\n"
         "                      down_in [rows..., 2 * I]; K and I multiples of 128\n"
         "  --format F          stdout: text (default; tables fit 100 columns), markdown (the same\n"
         "                      tables as markdown) or json (the JSON document alone)\n"
         "  --json FILE         also write the results as JSON to FILE\n"
         "  --host              take the host path even where a GPU is present\n"
         "  --corrupt WHAT      testing: change one value of the gate path's result before the\n"
         "                      checks (fp8, scale, padding, residual, gemm), which must then fail\n"
         "  --help              this text\n"
         "\n"
         "Built-in data (no --input): seeded activation-like values with a few outlier channels\n"
         "100-1000x larger; weights seeded, block-quantized 128x128. The GEMM error is checked on\n"
         "64 output columns per site (16 seeded columns in each of 4 seeded 128-row weight blocks).\n"
         "\n"
         "exit status: 0 every contract check passed; 1 a check failed, or the run hit a runtime\n"
         "error; 2 a bad flag or input file (nothing was run).\n";
}

namespace detail {
using cli::parseFloat;
using cli::parseInt;
using cli::splitList;
}  // namespace detail

/// Parses argv. Returns the options, or the UsageError of the first bad flag.
inline std::variant<Options, UsageError> parseOptions(int argc, const char* const* argv) {
  Options o;
  bool sitesGiven = false;
  cli::FlagReader reader(argc, argv);
  while (reader.next()) {
    const std::string arg = reader.flag();
    const std::string& value = reader.value();  // a flag's value once takeValue() took it

    if (arg == "--help" || arg == "-h") {
      if (auto e = reader.noValue()) return UsageError{*e};
      o.help = true;
    } else if (arg == "--host") {
      if (auto e = reader.noValue()) return UsageError{*e};
      o.forceHost = true;
    } else if (arg == "--m") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      o.rows.clear();
      for (const std::string& item : detail::splitList(value)) {
        const auto v = detail::parseInt(item, 1, kMaxRows);
        if (!v)
          return UsageError{
              reader.badValue("'" + item + "' is not a token count in [1, " + std::to_string(kMaxRows) + "]")};
        o.rows.push_back(*v);
      }
      std::sort(o.rows.begin(), o.rows.end());
      o.rows.erase(std::unique(o.rows.begin(), o.rows.end()), o.rows.end());
    } else if (arg == "--sites") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      o.sites.clear();
      for (const std::string& item : detail::splitList(value)) {
        const auto s = siteFromName(item);
        if (!s) return UsageError{reader.badValue("unknown site '" + item + "' (sites: " + siteList() + ")")};
        if (std::find(o.sites.begin(), o.sites.end(), *s) == o.sites.end()) o.sites.push_back(*s);
      }
      std::sort(o.sites.begin(), o.sites.end());
      sitesGiven = true;
    } else if (arg == "--attn-n") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = detail::parseInt(value, 16, 1 << 20);
      if (!v || *v % 16 != 0)
        return UsageError{
            reader.badValue("not a multiple of 16 in [16, 1048576] (cuBLASLt's fp8 N must be a 16-multiple)")};
      o.attnN = *v;
    } else if (arg == "--swiglu-limit") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = detail::parseFloat(value);
      if (!v) return UsageError{reader.badValue("not a number")};
      o.swigluLimit = *v;
    } else if (arg == "--iters") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = detail::parseInt(value, 1, 10000);
      if (!v) return UsageError{reader.badValue("not an integer in [1, 10000]")};
      o.iters = static_cast<int>(*v);
    } else if (arg == "--seed") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const auto v = detail::parseInt(value, 0, 9223372036854775807LL);
      if (!v) return UsageError{reader.badValue("not a non-negative integer")};
      o.seed = static_cast<std::uint64_t>(*v);
    } else if (arg == "--input") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value.empty()) return UsageError{reader.badValue("empty file name")};
      o.input = value;
    } else if (arg == "--map") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      const std::size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
        return UsageError{reader.badValue("expected SITE=TENSOR (sites: " + siteList() + ")")};
      const auto s = siteFromName(value.substr(0, eq));
      if (!s) return UsageError{
          reader.badValue("unknown site '" + value.substr(0, eq) + "' (sites: " + siteList() + ")")};
      for (const auto& m : o.map)
        if (m.first == *s) return UsageError{reader.badValue(std::string("site ") + siteName(*s) + " is mapped twice")};
      o.map.emplace_back(*s, value.substr(eq + 1));
    } else if (arg == "--corrupt") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value != "fp8" && value != "scale" && value != "padding" && value != "residual" && value != "gemm")
        return UsageError{reader.badValue("not one of fp8, scale, padding, residual, gemm")};
      o.corrupt = value;
    } else if (arg == "--format") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value == "text") o.format = OutputFormat::kText;
      else if (value == "markdown" || value == "md") o.format = OutputFormat::kMarkdown;
      else if (value == "json") o.format = OutputFormat::kJson;
      else return UsageError{reader.badValue("not one of text, markdown, json")};
    } else if (arg == "--json") {
      if (auto e = reader.takeValue()) return UsageError{*e};
      if (value.empty()) return UsageError{reader.badValue("empty file name")};
      o.json = value;
    } else {
      return UsageError{"unknown flag '" + reader.argument() + "' (see --help)"};
    }
  }
  if (o.help) return o;
  if (!o.map.empty() && o.input.empty()) return UsageError{"--map needs --input FILE.safetensors"};
  if (!o.input.empty()) {
    if (o.map.empty())
      return UsageError{"--input " + o.input + ": name the tensors to run with --map SITE=TENSOR (sites: " +
                        siteList() + ")"};
    if (sitesGiven) return UsageError{"--sites cannot be combined with --input: the sites named by --map run"};
    std::sort(o.map.begin(), o.map.end());
    for (const auto& m : o.map) o.sites.push_back(m.first);
  }
  if (o.sites.empty()) o.sites.assign(kAllSites, kAllSites + kSiteCount);
  return o;
}

}  // namespace pipeline
}  // namespace fp8scale
