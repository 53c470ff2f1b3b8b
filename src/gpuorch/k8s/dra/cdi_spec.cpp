#include "gpuorch/k8s/dra/cdi_spec.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <stdexcept>

#include "gpuorch/k8s/dra/resource_slice.hpp"

namespace gpuorch::k8s::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// CDI 0.6.0: the oldest version with every field used here, so older runtimes read it too.
constexpr const char* kCdiVersion = "0.6.0";

// The device node's entry ("/dev/nvidia0", the path in the container and on the host) when the
// host has it.
void add_node(json& nodes, const CdiOptions& o, const std::string& path) {
  std::error_code ec;
  const std::string in_dev = path.substr(std::string_view("/dev/").size());
  if (fs::exists(fs::path(o.dev_root) / in_dev, ec)) nodes.push_back({{"path", path}});
}

}  // namespace

std::string cdi_spec_path(const CdiOptions& o, const std::string& uid) {
  return (fs::path(o.cdi_dir) / fmt::format("{}-claim_{}.json", o.driver, uid)).string();
}

CdiClaim cdi_claim(const topology::Host& host, const CdiOptions& o, const std::string& uid,
                   const std::vector<std::string>& devices, const json& claim_edits) {
  const std::vector<SliceDevice> known = slice_devices(host);
  std::vector<const SliceDevice*> chosen;
  std::string nvidia;  // NVIDIA_VISIBLE_DEVICES: GPU and MIG UUIDs, as NVIDIA's runtime reads them
  for (const auto& name : devices) {
    const SliceDevice* d = nullptr;
    for (const auto& k : known) {
      if (k.name == name) d = &k;
    }
    if (d == nullptr) {
      throw std::runtime_error(fmt::format("device {} is not one of this node's", name));
    }
    chosen.push_back(d);
    const auto& g = host.gpus[static_cast<std::size_t>(d->gpu)];
    if (g.vendor != topology::Vendor::kNvidia) continue;
    const std::string& id =
        d->mig < 0 ? g.uuid : g.mig.instances[static_cast<std::size_t>(d->mig)].uuid;
    nvidia += (nvidia.empty() ? "" : ",") + (id.empty() ? std::to_string(g.index) : id);
  }
  const std::string kind = std::string(o.driver) + "/claim";
  CdiClaim out;
  json cdi_devices = json::array();
  json common_nodes = json::array();
  bool any_amd = false;
  std::set<const SliceDevice*> written;
  for (const SliceDevice* d : chosen) {
    const std::string name = fmt::format("{}-{}", uid, d->name);
    out.device_ids.push_back(kind + "=" + name);
    // A device named twice (two results of one device) is one CDI device: names are unique in
    // a spec.
    if (!written.insert(d).second) continue;
    const auto& g = host.gpus[static_cast<std::size_t>(d->gpu)];
    json nodes = json::array();
    json env = json::array({fmt::format("GPUORCH_DRA_CLAIM_UID={}", uid)});
    if (g.vendor == topology::Vendor::kNvidia) {
      env.push_back("NVIDIA_VISIBLE_DEVICES=" + nvidia);
      if (g.minor >= 0) add_node(nodes, o, fmt::format("/dev/nvidia{}", g.minor));
    } else {
      any_amd = true;
      if (g.minor >= 0) add_node(nodes, o, fmt::format("/dev/dri/card{}", g.minor));
      if (g.render_minor >= 0)
        add_node(nodes, o, fmt::format("/dev/dri/renderD{}", g.render_minor));
    }
    json edits{{"env", env}};
    if (!nodes.empty()) edits["deviceNodes"] = nodes;
    cdi_devices.push_back({{"name", name}, {"containerEdits", edits}});
  }
  if (!nvidia.empty()) {
    for (const char* p : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
      add_node(common_nodes, o, p);
    }
  }
  if (any_amd) add_node(common_nodes, o, "/dev/kfd");
  out.spec = json{{"cdiVersion", kCdiVersion}, {"kind", kind}, {"devices", cdi_devices}};
  json common = claim_edits.is_object() ? claim_edits : json::object();
  if (!common_nodes.empty()) common["deviceNodes"] = common_nodes;
  if (!common.empty()) out.spec["containerEdits"] = common;
  return out;
}

}  // namespace gpuorch::k8s::dra
