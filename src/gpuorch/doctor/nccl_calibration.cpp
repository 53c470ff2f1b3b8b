// `doctor nccl-log --calibration FILE`: the paths `gpuorch tune nccl` measured (docs/comm.md), so a
// setting that switches P2P off is reported with its cost measured on the user's own machine.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"

namespace gpuorch::doctor {
namespace {

// `key` of `o` as a string, `fallback` when absent; any other type is bad input (nlohmann's
// value() would throw its own type_error instead of one line naming the file).
std::string text_of(const std::string& path, const nlohmann::json& o, const char* key,
                    const std::string& fallback) {
  if (!o.is_object() || !o.contains(key)) return fallback;
  if (!o[key].is_string()) base::fail_input(fmt::format("{}: '{}' is not a string", path, key));
  return o[key].get<std::string>();
}

// A collective's per-setting curves (`tune nccl` writes them since the setting sweep); files
// without them are still calibration files.
void read_settings(const std::string& path, const nlohmann::json& c,
                   std::vector<CalibratedSetting>& out) {
  if (!c.is_object() || !c.contains("settings")) return;
  const std::string collective = text_of(path, c, "collective", "?");
  const auto bad = [&](const char* what) {
    base::fail_input(fmt::format("{}: collective {}: {}", path, base::printable(collective), what));
  };
  if (!c["settings"].is_array()) bad("settings is not an array");
  for (const auto& s : c["settings"]) {
    if (!s.is_object() || !s.contains("points") || !s["points"].is_array()) {
      bad("a setting without points");
    }
    const auto text = [&](const char* key) {
      if (s.contains(key) && !s[key].is_string()) bad("NCCL_ALGO and NCCL_PROTO must be strings");
      return text_of(path, s, key, "");
    };
    CalibratedSetting x;
    x.collective = collective;
    if (c.contains("ranks") && c["ranks"].is_number_integer()) {
      const auto r = c["ranks"].get<std::int64_t>();
      x.ranks = r > 0 && r < (1 << 20) ? static_cast<int>(r) : 0;
    }
    x.algo = text("NCCL_ALGO");
    x.proto = text("NCCL_PROTO");
    for (const auto& p : s["points"]) {
      // Sizes past 2^62 bytes are no message NCCL sends (and would not convert back to bytes).
      if (!p.is_array() || p.size() < 2 || !p[0].is_number() || !p[1].is_number() ||
          !(p[0].get<double>() > 0 && p[0].get<double>() < 0x1p62) ||
          !(p[1].get<double>() >= 0 && p[1].get<double>() < 1e12)) {
        bad("a point is not [bytes > 0, busbw_gbps >= 0, ...]");
      }
      x.points.push_back({p[0].get<double>(), p[1].get<double>()});
    }
    out.push_back(std::move(x));
  }
}

}  // namespace

NcclCheckOptions read_calibration(const std::string& path) {
  // A calibration file is a few KiB; 16 MiB bounds a wrong path (a log, a device).
  const std::string text = base::read_input_file(path, "calibration file", std::size_t{16} << 20);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    base::fail_input(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string() ||
      j["schema"].get<std::string>() != "gpuorch.calibration/1") {
    base::fail_input(
        fmt::format("{}: not a calibration file (schema gpuorch.calibration/1, `gpuorch tune nccl "
                    "--calibration`)",
                    path));
  }
  NcclCheckOptions o;
  o.calibration_file = path;
  o.calibration_host = base::printable(text_of(path, j, "host", "?"));
  if (j.contains("collectives") && j["collectives"].is_array()) {
    for (const auto& c : j["collectives"]) read_settings(path, c, o.calibrated_settings);
  }
  if (!j.contains("paths") || !j["paths"].is_array()) return o;
  for (const auto& p : j["paths"]) {
    if (!p.is_object() || !p.contains("bandwidth_gbps") || !p["bandwidth_gbps"].is_number()) {
      base::fail_input(fmt::format("{}: a path without a numeric bandwidth_gbps", path));
    }
    o.calibrated_paths.push_back({text_of(path, p, "type", ""), text_of(path, p, "forced_by", ""),
                                  p["bandwidth_gbps"].get<double>()});
  }
  return o;
}

}  // namespace gpuorch::doctor
