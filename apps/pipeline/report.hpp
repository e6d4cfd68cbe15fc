// fp8scale-pipeline: the output. A markdown table per site (one line per M),
// a per-layer summary over the sites, and the same numbers as JSON (--json).
#pragma once

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/site_checks.hpp"
#include "pipeline/site_data.hpp"

namespace fp8scale {
namespace pipeline {

inline const char* kGatePathName = "transposed+view";
inline const char* kOldPathName = "row-major+materialize";

inline std::string formatUs(double us) {
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
