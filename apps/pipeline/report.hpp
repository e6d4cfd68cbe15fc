// fp8scale-pipeline: the output. By default plain-text tables that fit a
// 100-column terminal (one per site, one line per M), a per-layer summary
// and a closing sentence; --format markdown prints the same tables as
// markdown, --format json (or --json FILE) the same numbers as JSON.
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/options.hpp"
#include "pipeline/site_checks.hpp"
#include "pipeline/site_data.hpp"

namespace fp8scale {
namespace pipeline {

/// Widest line the text format prints.
constexpr std::size_t kTextWidth = 100;

/// `text` broken at spaces into lines of at most `width` columns, each
/// prefixed by `indent` after the first (the first keeps `text`'s own
/// leading spaces).
inline std::string wrapText(const std::string& text, std::size_t width = kTextWidth - 1,
                            const std::string& indent = "") {
  std::string out;
  std::size_t start = text.find_first_not_of(' ');
  if (start == std::string::npos) return "";
  std::string line = text.substr(0, start);
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    const bool fresh = line.find_first_not_of(' ') == std::string::npos;  // only the indentation so far
    if (!fresh && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    } else if (!fresh) {
      line += ' ';
    }
    line += word;
    start = end + 1;
  }
  if (line.find_first_not_of(' ') != std::string::npos) out += line + "\n";
  return out;
}

inline const char* kGatePathName = "transposed+view";
inline const char* kOldPathName = "row-major+materialize";

inline std::string formatUs(double us) {
  if (std::isnan(us)) return "-";  // not measured (a build without a device GEMM)
  char buf[32];
  std::snprintf(buf, sizeof(buf), us >= 100.0 ? "%.1f" : "%.2f", us);
  return buf;
}

inline std::string formatError(double e) {
  if (std::isinf(e)) return "inf";
  if (std::isnan(e)) return "nan";
  if (e == 0.0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1e", e);
  return buf;
}

inline std::string formatBytes(std::int64_t b) {
  char buf[32];
  if (b < 10 * 1024) std::snprintf(buf, sizeof(buf), "%" PRId64 " B", b);
  else if (b < 10 * 1024 * 1024) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024.0));
  return buf;
}

/// The GEMM error tolerance as the flags and the summary print it ("0.01").
inline std::string toleranceText() {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", kGemmTolerance);
  return buf;
}

/// "yes", or what differs, e.g. "NO: fp8 12, scales 3".
inline std::string identityText(const SiteRow& r) {
  if (r.identical()) return "yes";
  std::string s = "NO:";
  auto add = [&](const char* what, std::int64_t n) {
    if (n != 0) s += std::string(s.size() > 3 ? ", " : " ") + what + " " + std::to_string(n);
  };
  add("fp8", r.fp8Mismatches);
  add("scales", r.scaleMismatches);
  add("padding", r.paddingNonZero);
  add("residual", r.residualMismatches);
  add("GEMM", r.gemmMismatches);
  return s;
}

/// The heading of a site's table.
template <class In>
std::string siteHeading(const SiteInput<In>& in) {
  const SiteShape& s = in.shape;
  std::string h = "### " + std::string(siteName(s.id)) + ": " + s.producerText + " of " + inputShapeText(s) + " -> " +
                  s.gemmText + " GEMM, N = " + std::to_string(s.N) + ", K = " + std::to_string(s.K) + "\n\n";
  h += "input: " + in.source + " (" + in.dtype + " producer input)";
  if (s.producer == ProducerKind::kRmsNorm && in.source.rfind("built-in", 0) != 0) h += ", zero residual";
  return h + "\n";
}

inline void printTableHead(std::FILE* out) {
  std::fprintf(out,
               "\n| M | gate's path | scale ld | us/call gate's path: producer, +GEMM | us/call %s: producer, +GEMM |"
               " producer us saved | relayouts avoided | scale bytes not copied | bit-identical | GEMM err | quant err |"
               " check |\n",
               kOldPathName);
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

/// `timed`: the times are GPU times (the host path's wall clock of scalar
/// reference code varies more between two calls than a relayout costs, so
/// there the saved column shows "-").
inline void printRow(std::FILE* out, const SiteRow& r, bool timed) {
  std::fprintf(out, "| %lld | %s | %lld | %s, %s | %s, %s | %s | %d | %s | %s | %s | %s | %s |\n",
               static_cast<long long>(r.M), r.transposed ? kGatePathName : kOldPathName, static_cast<long long>(r.ld),
               formatUs(r.gateProducerUs).c_str(), formatUs(r.gateTotalUs).c_str(), formatUs(r.oldProducerUs).c_str(),
               formatUs(r.oldTotalUs).c_str(), timed ? formatUs(r.oldProducerUs - r.gateProducerUs).c_str() : "-",
               r.relayoutsAvoided,
               formatBytes(r.bytesNotCopied).c_str(), identityText(r).c_str(), formatError(r.gemmError).c_str(),
               formatError(r.quantError).c_str(),
               r.ok ? "ok" : (r.weightMismatches != 0 ? "FAIL (weight quant)" : "FAIL"));
}

/// Per M, summed over the sites that ran at that M: what one decoder layer saves.
inline void printLayerSummary(std::FILE* out, const std::vector<SiteRow>& rows, bool timed) {
  struct Sum {
    int sites = 0, relayouts = 0;
    std::int64_t bytes = 0;
    double savedUs = 0.0;
  };
  std::map<index_t, Sum> byM;
  for (const SiteRow& r : rows) {
    Sum& s = byM[r.M];
    ++s.sites;
    s.relayouts += r.relayoutsAvoided;
    s.bytes += r.bytesNotCopied;
    s.savedUs += r.oldProducerUs - r.gateProducerUs;
  }
  std::fprintf(out, "\n### per layer (sum over the sites run)\n\n");
  std::fprintf(out, "| M | sites | relayout launches avoided | scale bytes not copied | producer us saved |\n");
  std::fprintf(out, "|---|---|---|---|---|\n");
  for (const auto& [m, s] : byM)
    std::fprintf(out, "| %lld | %d | %d | %s | %s |\n", static_cast<long long>(m), s.sites, s.relayouts,
                 formatBytes(s.bytes).c_str(), timed ? formatUs(s.savedUs).c_str() : "-");
}

// ---------------------------------------------------------------------------
// The text format (the default): fixed-width columns, at most kTextWidth wide.
// ---------------------------------------------------------------------------

/// A site's heading: what runs and on what input.
template <class In>
std::string siteHeadingText(const SiteInput<In>& in) {
  const SiteShape& s = in.shape;
  std::string h = std::string(siteName(s.id)) + ": " + s.producerText + " of " + inputShapeText(s) + " -> " +
                  s.gemmText + " GEMM, N = " + std::to_string(s.N) + ", K = " + std::to_string(s.K);
  std::string i = "input: " + in.source + " (" + in.dtype + ")";
  if (s.producer == ProducerKind::kRmsNorm && in.source.rfind("built-in", 0) != 0) i += ", zero residual";
  return wrapText(h, kTextWidth - 1, "  ") + wrapText(i, kTextWidth - 1, "  ");
}

inline void printTextTableHead(std::FILE* out) {
  std::fprintf(out, "%14s%25s%17s%13s\n", "", "producer us/call", "+GEMM us/call", "scale bytes");
  std::fprintf(out, "%6s %6s %8s %8s %6s %8s %8s %11s %9s %9s  %s\n", "M", "ld", "gate", "old", "saved", "gate",
               "old", "not copied", "GEMM err", "quant err", "check");
}

/// One line per M. `timed`: the times are GPU times (the host path's wall
/// clock of scalar reference code varies more between two calls than a
/// relayout costs, so there the saved column shows "-"). An ld marked '*'
/// is an M where the gate chose row-major emission.
inline void printTextRow(std::FILE* out, const SiteRow& r, bool timed) {
  const std::string ld = std::to_string(r.ld) + (r.transposed ? "" : "*");
  std::fprintf(out, "%6lld %6s %8s %8s %6s %8s %8s %11s %9s %9s  %s\n", static_cast<long long>(r.M), ld.c_str(),
               formatUs(r.gateProducerUs).c_str(), formatUs(r.oldProducerUs).c_str(),
               timed ? formatUs(r.oldProducerUs - r.gateProducerUs).c_str() : "-", formatUs(r.gateTotalUs).c_str(),
               formatUs(r.oldTotalUs).c_str(), formatBytes(r.bytesNotCopied).c_str(),
               formatError(r.gemmError).c_str(), formatError(r.quantError).c_str(), r.ok ? "ok" : "FAIL");
}

/// What failed, one line per failed M, under a site's table.
inline void printTextFailures(std::FILE* out, const std::vector<SiteRow>& rows) {
  for (const SiteRow& r : rows) {
    if (r.ok) continue;
    std::string why;
    if (!r.identical()) why = "paths differ (" + identityText(r) + ")";
    if (!(r.gemmError <= kGemmTolerance))
      why += std::string(why.empty() ? "" : "; ") + "GEMM error " + formatError(r.gemmError) + " above " +
             toleranceText();
    if (r.weightMismatches != 0)
      why += std::string(why.empty() ? "" : "; ") + "device weight quant differs from the host's in " +
             std::to_string(r.weightMismatches) + " values";
    std::fputs(wrapText("  FAIL at M = " + std::to_string(r.M) + ": " + why, kTextWidth - 1, "    ").c_str(), out);
  }
  const bool rowMajorSomewhere =
      std::any_of(rows.begin(), rows.end(), [](const SiteRow& r) { return !r.transposed; });
  if (rowMajorSomewhere) std::fprintf(out, "  * the gate chose row-major emission at this M\n");
}

/// Per M, summed over the sites that ran at that M.
struct LayerSum {
  int sites = 0, relayouts = 0;
  std::int64_t bytes = 0;
  double savedUs = 0.0;
};

inline std::map<index_t, LayerSum> layerSums(const std::vector<SiteRow>& rows) {
  std::map<index_t, LayerSum> byM;
  for (const SiteRow& r : rows) {
    LayerSum& s = byM[r.M];
    ++s.sites;
    s.relayouts += r.relayoutsAvoided;
    s.bytes += r.bytesNotCopied;
    s.savedUs += r.oldProducerUs - r.gateProducerUs;
  }
  return byM;
}

inline void printTextLayerSummary(std::FILE* out, const std::vector<SiteRow>& rows, bool timed) {
  std::fprintf(out, "\nper layer (summed over the sites run)\n");
  std::fprintf(out, "%6s %6s %26s %23s %18s\n", "M", "sites", "relayout launches avoided", "scale bytes not copied",
               "producer us saved");
  for (const auto& [m, s] : layerSums(rows))
    std::fprintf(out, "%6lld %6d %26d %23s %18s\n", static_cast<long long>(m), s.sites, s.relayouts,
                 formatBytes(s.bytes).c_str(), timed ? formatUs(s.savedUs).c_str() : "-");
}

/// "a" or "a to b" (a < b), from the smallest and largest value.
inline std::string rangeText(const std::string& lo, const std::string& hi) { return lo == hi ? lo : lo + " to " + hi; }

/// The closing sentence: what the gate's path saved per layer, and whether
/// every check passed.
inline std::string summarySentence(const std::vector<SiteRow>& rows, bool timed) {
  const auto byM = layerSums(rows);
  if (byM.empty()) return "Nothing ran.";
  int relMin = byM.begin()->second.relayouts, relMax = relMin;
  double usMin = byM.begin()->second.savedUs, usMax = usMin;
  for (const auto& [m, s] : byM) {
    relMin = std::min(relMin, s.relayouts);
    relMax = std::max(relMax, s.relayouts);
    usMin = std::min(usMin, s.savedUs);
    usMax = std::max(usMax, s.savedUs);
  }
  const auto& first = *byM.begin();
  const auto& last = *byM.rbegin();
  const std::string mText = byM.size() == 1 ? "at M = " + std::to_string(first.first)
                                            : "from M = " + std::to_string(first.first) + " to " +
                                                  std::to_string(last.first);
  std::string s = "Per layer, " + mText + ", the gate's path avoided " +
                  rangeText(std::to_string(relMin), std::to_string(relMax)) +
                  (relMax == 1 ? " relayout launch and " : " relayout launches and ") +
                  rangeText(formatBytes(first.second.bytes), formatBytes(last.second.bytes)) + " of scale copies";
  s += timed ? ", saving " + rangeText(formatUs(usMin), formatUs(usMax)) + " us of producer time."
             : " (the host path does not time the saving).";
  int failed = 0;
  for (const SiteRow& r : rows) failed += !r.ok;
  if (failed == 0)
    s += " All " + std::to_string(rows.size()) +
         " site x M checks passed: fp8 data, scales, scale padding, residual and GEMM output are bit-identical "
         "between the two paths, and the GEMM error is at most " +
         toleranceText() + ".";
  else
    s += " FAILED: " + std::to_string(failed) + " of " + std::to_string(rows.size()) +
         " site x M checks (see the check column).";
  return s;
}

inline nlohmann::ordered_json rowJson(const SiteRow& r) {
  nlohmann::ordered_json j;
  j["site"] = r.site;
  j["M"] = r.M;
  j["K"] = r.K;
  j["N"] = r.N;
  j["groups"] = r.G;
  j["scale_ld"] = r.ld;
  j["gate_path"] = r.transposed ? kGatePathName : kOldPathName;
  j["gate_emits_transposed"] = r.transposed;
  j["us_per_call"] = nlohmann::ordered_json::object();
  j["us_per_call"]["gate"] = {{"producer", r.gateProducerUs}, {"producer_gemm", r.gateTotalUs}};
  j["us_per_call"]["row_major_materialize"] = {{"producer", r.oldProducerUs}, {"producer_gemm", r.oldTotalUs}};
  j["relayout_launches"] = {{"gate", r.relayoutsGate}, {"row_major_materialize", r.relayoutsOld}};
  j["relayout_launches_avoided"] = r.relayoutsAvoided;
  j["scale_bytes_not_copied"] = r.bytesNotCopied;
  j["mismatches"] = {{"fp8", r.fp8Mismatches},         {"scales", r.scaleMismatches},
                     {"scale_padding_nonzero", r.paddingNonZero}, {"residual", r.residualMismatches},
                     {"gemm", r.gemmMismatches},       {"gemm_values_compared", r.gemmCompared},
                     {"weight_quant", r.weightMismatches}};
  j["bit_identical"] = r.identical();
  auto finiteOrNull = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
  j["gemm_rel_error"] = finiteOrNull(r.gemmError);
  j["quant_rel_error"] = finiteOrNull(r.quantError);
  j["ok"] = r.ok;
  return j;
}

}  // namespace pipeline
}  // namespace fp8scale
