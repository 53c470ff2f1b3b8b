#include "gpuorch/launch/error_file.hpp"

#include <nlohmann/json.hpp>

#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/whole_number.hpp"

namespace gpuorch::launch {

std::optional<WorkerError> read_error_file(const std::string& path) {
  // A worker writes it, so it may be anything: bounded, regular files only; unreadable is none.
  std::string problem;
  const auto text = base::read_bounded(path, base::kConfigFileMaxBytes, problem);
  if (!text) return std::nullopt;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("message")) return std::nullopt;
  WorkerError e;
  const auto& m = j.at("message");
  if (m.is_string()) {
    e.message = m.get<std::string>();
  } else if (m.is_object()) {
    e.message = m.value("message", std::string());
    const auto extra = m.value("extraInfo", nlohmann::json::object());
    e.traceback = extra.value("py_callstack", std::string());
    const auto ts = extra.value("timestamp", nlohmann::json());
    if (ts.is_string())
      e.timestamp = base::whole_number<std::int64_t>(ts.get<std::string>()).value_or(0);
    if (ts.is_number_integer()) e.timestamp = ts.get<std::int64_t>();
  } else {
    return std::nullopt;
  }
  if (const auto nl = e.message.find('\n'); nl != std::string::npos) e.message.resize(nl);
  return e;
}

}  // namespace gpuorch::launch
