#include "gpuorch/launch/error_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gpuorch::launch {

std::optional<WorkerError> read_error_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  const auto j = nlohmann::json::parse(s.str(), nullptr, false);
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
    try {
      if (ts.is_string()) e.timestamp = std::stoll(ts.get<std::string>());
      if (ts.is_number_integer()) e.timestamp = ts.get<std::int64_t>();
    } catch (const std::exception&) {
      e.timestamp = 0;
    }
  } else {
    return std::nullopt;
  }
  if (const auto nl = e.message.find('\n'); nl != std::string::npos) e.message.resize(nl);
  return e;
}

}  // namespace gpuorch::launch
