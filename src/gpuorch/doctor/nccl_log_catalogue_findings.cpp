// Catalogue hits as findings. The entry gives the words (meaning, cause, cost, fix, with the line's
// own values filled in); the log gives the evidence (how often, on which hosts, the first line as
// logged) and the entry the versions that print it, so a reader can check the verdict.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>

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

std::string size_name(double bytes) {
  const auto b = static_cast<unsigned long long>(bytes);
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

bool same_name(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string forced_value(const NcclLog& log, const char* entry) {
  const CatalogueHit* h = hit_of(log, entry);
  return h != nullptr && !h->values.empty() ? h->values[0] : std::string();
}

// "x.xx times slower" or "faster", forced against NCCL's choice.
std::string ratio_words(double forced, double chosen) {
  if (forced <= 0) return "it moved nothing";
  const double r = chosen / forced;
  if (r >= 1) return fmt::format("{:.2f}x slower", r);
  return fmt::format("{:.2f}x faster", 1 / r);
}

// What the forced NCCL_ALGO / NCCL_PROTO of this log measured against NCCL's own choice, from the
// calibration file's per-setting curves (all_reduce first: what data-parallel training runs).
std::string measured_setting_cost(const NcclLog& log, const NcclCheckOptions& o) {
  const std::string algo = forced_value(log, "env.algo-forced");
  const std::string proto = forced_value(log, "env.proto-forced");
  std::vector<std::string> forced_vars;
  if (!algo.empty()) forced_vars.push_back(fmt::format("NCCL_ALGO={}", algo));
  if (!proto.empty()) forced_vars.push_back(fmt::format("NCCL_PROTO={}", proto));
  const std::string setting = fmt::format("{}", fmt::join(forced_vars, " "));
  const CalibratedSetting* forced = nullptr;
  const CalibratedSetting* chosen = nullptr;
  for (const char* preferred : {"all_reduce", ""}) {
    for (const auto& c : o.calibrated_settings) {
      if (*preferred != '\0' && c.collective != preferred) continue;
      if (!forced && same_name(c.algo, algo) && same_name(c.proto, proto)) forced = &c;
    }
    if (forced) break;
  }
  if (forced) {
    for (const auto& c : o.calibrated_settings) {
      if (c.collective == forced->collective && c.algo.empty() && c.proto.empty()) chosen = &c;
    }
  }
  if (!forced || !chosen) {
    if (o.calibrated_settings.empty()) {
      return fmt::format(
          "; the calibration file {} has no per-setting curves (written before `gpuorch tune "
          "nccl` measured each setting): run it again to price {}",
          o.calibration_file, setting);
    }
    return fmt::format(
        "; the calibration file {} did not measure {} against NCCL's choice: `gpuorch tune nccl "
        "--algos {} --protos {}` does",
        o.calibration_file, setting, algo.empty() ? "Ring,Tree" : algo,
        proto.empty() ? "LL,LL128,Simple" : proto);
  }
  // Sizes both measured, smallest to largest.
  std::vector<std::array<double, 3>> both;  // bytes, forced, chosen
  for (const auto& p : forced->points) {
    for (const auto& q : chosen->points) {
      if (q.bytes == p.bytes) both.push_back({p.bytes, p.busbw_gbps, q.busbw_gbps});
    }
  }
  if (both.empty()) return {};
  std::sort(both.begin(), both.end());
  const auto& large = both.back();
  const auto& small = both.front();
  const auto worst = std::max_element(both.begin(), both.end(), [](const auto& a, const auto& b) {
    return a[2] * b[1] < b[2] * a[1];  // chosen/forced, compared without dividing by 0
  });
  std::string out = fmt::format(
      "; measured on {} ({}, {} on {} GPUs): with {} {:.1f} GB/s at {} against {:.1f} GB/s with "
      "NCCL's choice ({})",
      o.calibration_host, o.calibration_file, forced->collective, forced->ranks, setting, large[1],
      size_name(large[0]), large[2], ratio_words(large[1], large[2]));
  if (both.size() > 1) {
    out += fmt::format(", at {} {:.2f} against {:.2f} GB/s ({})", size_name(small[0]), small[1],
                       small[2], ratio_words(small[1], small[2]));
  }
  if (worst->at(2) > worst->at(1) && worst != both.end() - 1 && worst != both.begin()) {
    out += fmt::format("; it loses most at {} ({})", size_name(worst->at(0)),
                       ratio_words(worst->at(1), worst->at(2)));
  }
  return out;
}

std::string measured_cost(const NcclLog& log, const std::string& finding,
                          const NcclCheckOptions& o) {
  if (o.calibration_file.empty()) return {};
  if (finding == "nccl.env-p2p-disabled") return measured_p2p_cost(o);
  if (finding == "nccl.env-algo-forced" || finding == "nccl.env-proto-forced") {
    return measured_setting_cost(log, o);
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
    f.what += "; cost: " + fill(e.cost) + measured_cost(log, e.finding, options);
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
