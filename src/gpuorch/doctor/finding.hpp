#pragma once
// What every `gpuorch doctor` check reports: findings, one line each (severity, what is wrong, the
// evidence, the fix), the same list as JSON, and the exit code (0 all well, 1 a problem found).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::doctor {

// kInfo says what was seen (the transports NCCL chose, the policies in force) so a clean run still
// shows its evidence; only kWarning and kError are problems.
enum class Severity { kInfo, kWarning, kError };
const char* to_string(Severity s);

struct Finding {
  Severity severity = Severity::kInfo;
  std::string id;  // stable key for scripts and tests: "nccl.socket-fallback"
  std::string what;
  std::string evidence;
  std::string fix;  // empty for kInfo
};

struct Report {
  std::string check;  // "nccl-log", "network", ...
  std::string input;  // what was examined: a file, "live host", a recorded tree
  std::vector<Finding> findings;
};

[[nodiscard]] bool has_problem(const Report& r);
// 0 when nothing is a warning or an error, else 1.
[[nodiscard]] int exit_code(const std::vector<Report>& reports);
// "warning nccl.socket-fallback: WHAT (evidence: ...) fix: ..." per finding, then one summary line
// per report.
std::string render_text(const std::vector<Report>& reports);
nlohmann::ordered_json to_json(const std::vector<Report>& reports);

}  // namespace gpuorch::doctor
