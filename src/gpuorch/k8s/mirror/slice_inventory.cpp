#include "gpuorch/k8s/mirror/slice_inventory.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>
#include <variant>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/mirror/dra_devices.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {

std::vector<cluster::NodeSpec> nodes_from_resource_slices(const nlohmann::json& list,
                                                          const std::string& file) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    base::fail_input(file, 0, "not a Kubernetes List (kubectl get nodes,resourceslices -o json)");
  }
  DraInventory inventory;
  std::map<std::string, cluster::NodeSpec> nodes;
  // `kubectl get resourceslices` lists items without their kind; a ResourceSliceList says it.
  const bool all_slices = list.value("kind", "") == "ResourceSliceList";
  std::size_t index = 0;
  for (const auto& item : list["items"]) {
    ++index;
    const std::string kind =
        item.is_object() ? item.value("kind", all_slices ? "ResourceSlice" : "") : "";
    if (kind == "Node") {
      const auto parsed = node_from_json(item);
      if (const auto* spec = std::get_if<cluster::NodeSpec>(&parsed)) {
        nodes[spec->name] = *spec;
      } else {
        base::fail_input(file, 0, fmt::format("item {}: {}", index, std::get<std::string>(parsed)));
      }
    } else if (kind == "ResourceSlice") {
      inventory.update_slice(item, false);
    }
  }
  std::vector<cluster::NodeSpec> out;
  for (const auto& [name, dra] : inventory.nodes()) {
    cluster::NodeSpec spec;
    if (const auto it = nodes.find(name); it != nodes.end()) {
      spec = it->second;
    } else {
      spec.name = name;
      spec.cpu_milli = kUnlimitedCpuMilli;
      spec.memory_mib = kUnlimitedMemoryMib;
    }
    // A node that advertises nvidia.com/gpu as well keeps the device plugin's GPUs, as in
    // gpuorch scheduler's mirror (never counted twice). The simulator's pods ask whole GPUs:
    // MIG instances are not among them.
    if (inventory.apply(spec, false) || spec.gpu_count > 0) out.push_back(std::move(spec));
  }
  if (out.empty()) {
    base::fail_input(file, 0,
                     fmt::format("no ResourceSlice of a whole GPU of {} on a node (slices of "
                                 "`gpuorch dra-driver`, kubectl get resourceslices -o json)",
                                 kGpuDraDriver));
  }
  return out;
}

std::vector<cluster::NodeSpec> load_resource_slices(const std::string& path) {
  std::ifstream in(path);
  if (!in) base::fail_input(path, 0, "cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    base::fail_input(path, 0, fmt::format("not JSON: {}", e.what()));
  }
  return nodes_from_resource_slices(list, path);
}

}  // namespace gpuorch::k8s
