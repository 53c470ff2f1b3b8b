// Catalogue hits as findings. The entry gives the words (meaning, cause, cost, fix, with the line's
// own values filled in); the log gives the evidence (how often, on which hosts, the first line as
// logged) and the entry the versions that print it, so a reader can check the verdict.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gpuorch/doctor/nccl_log_findings.hpp"

namespace gpuorch::doctor {
namespace {

// A failing job repeats generic WARNs per rank and per peer; the first few say it.
constexpr std::size_t kWarnShown = 10;

Severity severity_of(EntrySeverity s) {
  return s == EntrySeverity::kError     ? Severity::kError
         : s == EntrySeverity::kWarning ? Severity::kWarning
                                        : Severity::kInfo;
}

std::string library_name(const std::string& library) {
  if (library == "nccl") return "NCCL";
  if (library == "rccl") return "RCCL (ROCm)";
  if (library == "torch") return "PyTorch";
  return "the network plugin";
}

// What switching P2P off measured, from the calibration file's via_host_memory path.
std::string measured_p2p_cost(const NcclCheckOptions& o) {
  const CalibratedPath* direct = nullptr;
  const CalibratedPath* host = nullptr;
  for (const auto& p : o.calibrated_paths) {
    if (p.type == "via_host_memory") host = &p;
    if (p.forced_by.empty() && p.type != "via_host_memory" && !direct) direct = &p;
  }
  if (!direct || !host || host->bandwidth_gbps <= 0) return {};
  return fmt::format(
      "; measured on {} ({}): {:.1f} GB/s between two GPUs over {} against {:.1f} GB/s with {} "
      "({:.1f}x slower)",
      o.calibration_host, o.calibration_file, direct->bandwidth_gbps, direct->type,
      host->bandwidth_gbps, host->forced_by.empty() ? "P2P off" : host->forced_by,
      direct->bandwidth_gbps / host->bandwidth_gbps);
}

std::string measured_cost(const std::string& finding, const NcclCheckOptions& o) {
  if (o.calibration_file.empty()) return {};
  if (finding == "nccl.env-p2p-disabled") return measured_p2p_cost(o);
  if (finding == "nccl.env-algo-forced" || finding == "nccl.env-proto-forced") {
    return fmt::format(
        "; the calibration file {} holds one curve per collective (NCCL's default), no figures "
        "per algorithm or protocol: `gpuorch tune nccl` measures each setting against the default "
        "per size",
        o.calibration_file);
  }
  return {};
}

Finding finding_of(const NcclLog& log, const CatalogueHit& h, const NcclCheckOptions& options) {
  const CatalogueEntry& e = *h.entry;
  const std::map<std::string, std::string> extra{
      {"host", h.host.empty() ? std::string("its host") : h.host},
      {"rank", h.rank.empty() ? std::string("?") : h.rank},
      // " on rank 3", or nothing when the line does not say which rank wrote it.
      {"on_rank", h.rank.empty() ? std::string() : " on rank " + h.rank},
      {"line", std::to_string(h.first_line)}};
  const auto& fields = e.formats[h.format].fields;
  auto fill = [&](const std::string& t) { return fill_fields(t, fields, h.values, extra); };
  EntrySeverity sev = e.severity;
  if (e.one_host_severity && one_host(log)) sev = *e.one_host_severity;
  Finding f;
  f.severity = severity_of(sev);
  f.id = e.finding;
  f.what = fill(e.meaning);
  if (!e.cause.empty()) f.what += "; likely cause: " + fill(e.cause);
  if (!e.cost.empty()) {
    f.what += "; cost: " + fill(e.cost) + measured_cost(e.finding, options);
  }
  const CatalogueFormat& format = e.formats[h.format];
  f.evidence =
      fmt::format("{} time(s){}, first at line {}: \"{}\"; {} {}prints it{}", h.count,
                  h.hosts.empty() ? std::string() : fmt::format(" on {}", fmt::join(h.hosts, ", ")),
                  h.first_line, h.text, library_name(e.library),
                  format.versions.empty() ? std::string() : format.versions + " ",
                  e.source.empty() ? std::string() : " (" + e.source + ")");
  if (f.severity != Severity::kInfo) f.fix = fill(e.fix);
  return f;
}

}  // namespace

bool one_host(const NcclLog& log) {
  if (log.hosts.size() > 1) return false;
  if (log.nnodes) return *log.nnodes == 1;
  if (!log.nranks) return false;
  return log.init_complete.size() >= static_cast<std::size_t>(*log.nranks);
}

const CatalogueHit* hit_of(const NcclLog& log, const std::string& entry_id) {
  for (const auto& h : log.hits) {
    if (h.entry->id == entry_id) return &h;
  }
  return nullptr;
}

bool has_fact(const NcclLog& log, const std::string& fact) { return log.facts.count(fact) > 0; }

std::vector<Finding> catalogue_findings(const NcclLog& log, const NcclCheckOptions& options) {
  std::vector<Finding> out;
  std::size_t generic = 0, generic_lines = 0;
  for (const auto& h : log.hits) {
    if (h.entry->severity == EntrySeverity::kNote) continue;
    // Generic WARNs (source.yaml, advice by category) are capped; hand-written entries are not.
    if (h.entry->generated && ++generic > kWarnShown) {
      generic_lines += h.count;
      continue;
    }
    out.push_back(finding_of(log, h, options));
  }
  if (generic > kWarnShown) {
    out.push_back({Severity::kError, "nccl.warn",
                   fmt::format("{} more distinct NCCL WARN messages", generic - kWarnShown),
                   fmt::format("{} more WARN lines", generic_lines),
                   "read the first WARN lines of the log"});
  }
  return out;
}

}  // namespace gpuorch::doctor
