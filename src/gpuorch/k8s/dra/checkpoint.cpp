#include "gpuorch/k8s/dra/checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/read_file.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

// The layout's version: a driver that finds another refuses the file instead of misreading it.
constexpr int kCheckpointVersion = 1;

PreparedSharing sharing_from(const json& j) {
  PreparedSharing s;
  for (const auto& t : j.value("timeSlices", json::array())) {
    s.time_slices.push_back({t.at("uuid").get<std::string>(), t.at("interval").get<int>()});
  }
  if (const auto m = j.find("mps"); m != j.end()) {
    s.mps_root = m->at("root").get<std::string>();
    s.mps_devices = m->at("devices").get<std::vector<std::string>>();
    if (const auto p = m->find("activeThreadPercentage"); p != m->end()) {
      s.mps_active_thread_percentage = p->get<int>();
    }
    s.mps_pinned_mib = m->value("pinnedMiB", std::map<std::string, std::int64_t>());
  }
  return s;
}

json sharing_to(const PreparedSharing& s) {
  json j = json::object();
  if (!s.time_slices.empty()) {
    json ts = json::array();
    for (const auto& t : s.time_slices) ts.push_back({{"uuid", t.uuid}, {"interval", t.interval}});
    j["timeSlices"] = ts;
  }
  if (!s.mps_devices.empty()) {
    json m{{"root", s.mps_root}, {"devices", s.mps_devices}, {"pinnedMiB", s.mps_pinned_mib}};
    if (s.mps_active_thread_percentage) {
      m["activeThreadPercentage"] = *s.mps_active_thread_percentage;
    }
    j["mps"] = m;
  }
  return j;
}

}  // namespace

PreparedClaims load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  std::string problem;
  const auto text = base::read_bounded(path, base::kConfigFileMaxBytes, problem);
  if (!text) throw std::runtime_error(fmt::format("{}: the checkpoint {}", path, problem));
  PreparedClaims out;
  try {
    const json j = json::parse(*text);
    if (j.at("version").get<int>() != kCheckpointVersion) {
      throw std::runtime_error(
          fmt::format("version {} is not {}", j.at("version").dump(), kCheckpointVersion));
    }
    for (const auto& [uid, c] : j.at("claims").items()) {
      PreparedClaim pc{
          c.at("namespace").get<std::string>(), c.at("name").get<std::string>(), {}, {}};
      for (const auto& d : c.at("devices")) {
        pc.devices.push_back({d.at("requests").get<std::vector<std::string>>(),
                              d.at("pool").get<std::string>(), d.at("device").get<std::string>(),
                              d.at("cdiDeviceIDs").get<std::vector<std::string>>()});
      }
      if (const auto sh = c.find("sharing"); sh != c.end()) pc.sharing = sharing_from(*sh);
      out.emplace(uid, std::move(pc));
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: not a gpuorch DRA checkpoint: {}", path, e.what()));
  }
  return out;
}

void save_checkpoint(const std::string& path, const PreparedClaims& claims) {
  json cj = json::object();
  for (const auto& [uid, c] : claims) {
    json devices = json::array();
    for (const auto& d : c.devices) {
      devices.push_back({{"requests", d.requests},
                         {"pool", d.pool},
                         {"device", d.device},
                         {"cdiDeviceIDs", d.cdi_device_ids}});
    }
    cj[uid] = {{"namespace", c.ns}, {"name", c.name}, {"devices", devices}};
    if (!c.sharing.empty()) cj[uid]["sharing"] = sharing_to(c.sharing);
  }
  base::write_file_atomically(path,
                              json{{"version", kCheckpointVersion}, {"claims", cj}}.dump(1) + "\n");
}

}  // namespace gpuorch::k8s::dra
