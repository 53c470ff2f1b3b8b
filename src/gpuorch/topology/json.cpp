#include "gpuorch/topology/json.hpp"

#include <fmt/format.h>

#include "gpuorch/topology/matrix.hpp"

namespace gpuorch::topology {
namespace {

using Json = nlohmann::ordered_json;

Json optional_int(long long v, bool known) { return known ? Json(v) : Json(nullptr); }

Json pci_json(const PciLocation& p) {
  Json j;
  j["address"] = p.address;
  j["host_bridge"] = p.host_bridge.empty() ? Json(nullptr) : Json(p.host_bridge);
  j["bridges"] = p.bridges;
  j["ancestry_known"] = p.known;
  return j;
}

Json gpu_json(const Host& h, const Gpu& g) {
  Json j;
  j["index"] = g.index;
  j["vendor"] = to_string(g.vendor);
  j["model"] = g.model;
  j["uuid"] = g.uuid.empty() ? Json(nullptr) : Json(g.uuid);
  j["pci"] = g.pci.address;
  j["pci_device_id"] = fmt::format("0x{:04x}", g.pci_device_id);
  j["memory_mib"] = optional_int(g.memory_mib, g.memory_mib > 0);
  j["numa_node"] = optional_int(g.numa_node, g.numa_node >= 0);
  j["local_cpus"] = format_id_list(g.local_cpus);
  j["cpu_affinity"] = cpu_affinity(h, g);
  j["numa_affinity"] = numa_affinity(h, g);
  j["minor"] = optional_int(g.minor, g.minor >= 0);
  if (g.vendor == Vendor::kNvidia) {
    j["compute_capability"] =
        g.cc_major >= 0 ? Json(fmt::format("{}.{}", g.cc_major, g.cc_minor)) : Json(nullptr);
    j["nvlinks"] = g.nvlink_links;
    j["nvswitch_links"] = g.nvswitch_links;
  } else {
    j["gfx_target"] = g.gfx_target;
    j["compute_units"] = g.compute_units;
    j["render_minor"] = optional_int(g.render_minor, g.render_minor >= 0);
    j["xgmi_hive"] = g.xgmi_hive ? Json(fmt::format("0x{:016x}", g.xgmi_hive)) : Json(nullptr);
  }
  j["family"] = g.family.empty() ? Json(nullptr) : Json(g.family);
  j["pcie"] = {{"gen", g.pcie.gen},
               {"width", g.pcie.width},
               {"max_gen", g.pcie.max_gen},
               {"max_width", g.pcie.max_width}};
  Json mig;
  mig["capable"] = g.mig.capable;
  mig["enabled"] = g.mig.enabled;
  mig["pending_enabled"] = g.mig.pending_enabled;
  mig["instances"] = Json::array();
  for (const auto& m : g.mig.instances) {
    Json inst = {{"gpu_instance", m.gpu_instance},
                 {"compute_instance", m.compute_instance},
                 {"profile", m.profile.empty() ? Json(nullptr) : Json(m.profile)},
                 {"uuid", m.uuid.empty() ? Json(nullptr) : Json(m.uuid)},
                 {"memory_mib", optional_int(m.memory_mib, m.memory_mib > 0)}};
    if (m.attributes) {
      for (const auto& [key, member] : kMigAttributeFields) {
        inst["attributes"][key] = (*m.attributes).*member;
      }
    }
    mig["instances"].push_back(std::move(inst));
  }
  j["mig"] = mig;
  j["source"] = g.source;
  j["pci_location"] = pci_json(g.pci);
  return j;
}

Json nic_json(const Nic& n) {
  Json j;
  j["name"] = n.name;
  j["pci"] = n.pci.address;
  j["numa_node"] = optional_int(n.numa_node, n.numa_node >= 0);
  j["local_cpus"] = format_id_list(n.local_cpus);
  j["node_guid"] = n.node_guid;
  j["firmware"] = n.firmware;
  j["ports"] = Json::array();
  for (const auto& p : n.ports) {
    j["ports"].push_back({{"port", p.port},
                          {"state", p.state},
                          {"phys_state", p.phys_state},
                          {"rate_gbps", p.rate_gbps},
                          {"link_layer", p.link_layer}});
  }
  j["pci_location"] = pci_json(n.pci);
  return j;
}

}  // namespace

std::string to_json_text(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

Json to_json(const Host& h) {
  Json j;
  j["schema"] = kTopologySchema;
  j["hostname"] = h.hostname;
  j["machine"] = h.machine;
  j["driver_version"] = h.driver_version.empty() ? Json(nullptr) : Json(h.driver_version);
  j["cuda_driver_version"] = h.cuda_driver_version > 0
                                 ? Json(fmt::format("{}.{}", h.cuda_driver_version / 1000,
                                                    (h.cuda_driver_version % 1000) / 10))
                                 : Json(nullptr);
  j["cpus"] = {{"logical", h.logical_cpus},
               {"cores", optional_int(h.cores, h.cores > 0)},
               {"packages", optional_int(h.packages, h.packages > 0)},
               {"online", format_id_list(h.online_cpus)}};
  j["memory_mib"] = h.memory_mib;
  j["numa_nodes"] = Json::array();
  for (const auto& n : h.numa_nodes) {
    j["numa_nodes"].push_back({{"id", n.id},
                               {"cpus", format_id_list(n.cpus)},
                               {"cpu_count", n.cpus.size()},
                               {"memory_mib", n.memory_mib},
                               {"distances", n.distances}});
  }
  j["gpus"] = Json::array();
  for (const auto& g : h.gpus) j["gpus"].push_back(gpu_json(h, g));
  j["nics"] = Json::array();
  for (const auto& n : h.nics) j["nics"].push_back(nic_json(n));
  j["devices"] = Json::array();
  for (std::size_t i = 0; i < h.device_count(); ++i) j["devices"].push_back(h.device_name(i));
  j["links"] = Json::array();
  for (const auto& l : h.links) {
    Json lj;
    lj["a"] = h.device_name(static_cast<std::size_t>(l.a));
    lj["b"] = h.device_name(static_cast<std::size_t>(l.b));
    lj["path"] = to_string(l.path, l.nvlinks);
    lj["pcie_path"] = to_string(l.pcie);
    lj["nvlinks"] = l.nvlinks;
    if (l.xgmi_weight > 0) {
      lj["xgmi"] = {{"weight", l.xgmi_weight}, {"max_bandwidth_mbps", l.xgmi_bandwidth_mbps}};
    }
    j["links"].push_back(lj);
  }
  j["notes"] = h.notes;
  return j;
}

}  // namespace gpuorch::topology
