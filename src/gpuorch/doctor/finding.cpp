#include "gpuorch/doctor/finding.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpuorch::doctor {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "info";
}

bool has_problem(const Report& r) {
  return std::any_of(r.findings.begin(), r.findings.end(),
                     [](const Finding& f) { return f.severity != Severity::kInfo; });
}

int exit_code(const std::vector<Report>& reports) {
  return std::any_of(reports.begin(), reports.end(), has_problem) ? 1 : 0;
}

std::string render_text(const std::vector<Report>& reports) {
  std::string out;
  for (const auto& r : reports) {
    std::size_t problems = 0;
    for (const auto& f : r.findings) {
      out += fmt::format("{:<7} {}: {}", to_string(f.severity), f.id, f.what);
      if (!f.evidence.empty()) out += fmt::format(" (evidence: {})", f.evidence);
      if (!f.fix.empty()) out += fmt::format(" fix: {}", f.fix);
      out += '\n';
      if (f.severity != Severity::kInfo) ++problems;
    }
    out += fmt::format("doctor {} on {}: {}\n", r.check, r.input,
                       problems == 0 ? std::string("no problem found")
                                     : fmt::format("{} problem{} found", problems,
                                                   problems == 1 ? "" : "s"));
  }
  return out;
}

nlohmann::ordered_json to_json(const std::vector<Report>& reports) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const auto& r : reports) {
    nlohmann::ordered_json findings = nlohmann::ordered_json::array();
    for (const auto& f : r.findings) {
      findings.push_back({{"severity", to_string(f.severity)},
                          {"id", f.id},
                          {"what", f.what},
                          {"evidence", f.evidence},
                          {"fix", f.fix}});
    }
    checks.push_back({{"check", r.check},
                      {"input", r.input},
                      {"problem", has_problem(r)},
                      {"findings", std::move(findings)}});
  }
  return {{"schema", "gpuorch.doctor/v1"},
          {"problem", exit_code(reports) != 0},
          {"checks", std::move(checks)}};
}

}  // namespace gpuorch::doctor
