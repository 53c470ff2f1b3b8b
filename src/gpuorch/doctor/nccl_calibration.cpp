// `doctor nccl-log --calibration FILE`: the paths `gpuorch tune nccl` measured (docs/comm.md), so a
// setting that switches P2P off is reported with its cost measured on the user's own machine.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"

namespace gpuorch::doctor {

NcclCheckOptions read_calibration(const std::string& path) {
  // A calibration file is a few KiB; 16 MiB bounds a wrong path (a log, a device).
  const std::string text = base::read_input_file(path, "calibration file", std::size_t{16} << 20);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    base::fail_input(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  if (!j.is_object() || j.value("schema", std::string()) != "gpuorch.calibration/1") {
    base::fail_input(
        fmt::format("{}: not a calibration file (schema gpuorch.calibration/1, `gpuorch tune nccl "
                    "--calibration`)",
                    path));
  }
  NcclCheckOptions o;
  o.calibration_file = path;
  o.calibration_host = j.value("host", std::string("?"));
  if (!j.contains("paths") || !j["paths"].is_array()) return o;
  for (const auto& p : j["paths"]) {
    if (!p.is_object() || !p.contains("bandwidth_gbps") || !p["bandwidth_gbps"].is_number()) {
      base::fail_input(fmt::format("{}: a path without a numeric bandwidth_gbps", path));
    }
    o.calibrated_paths.push_back({p.value("type", std::string()),
                                  p.value("forced_by", std::string()),
                                  p["bandwidth_gbps"].get<double>()});
  }
  return o;
}

}  // namespace gpuorch::doctor
