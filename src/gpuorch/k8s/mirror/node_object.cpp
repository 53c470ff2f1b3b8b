#include "gpuorch/k8s/mirror/node_object.hpp"

#include <fmt/format.h>

#include "gpuorch/k8s/api/quantity.hpp"
#include "gpuorch/k8s/mirror/topology_annotation.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

const json* field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_field(const json& j, const char* key) {
  const json* f = field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}

}  // namespace

std::variant<cluster::NodeSpec, std::string> node_from_json(const json& node) {
  cluster::NodeSpec spec;
  const json* meta = field(node, "metadata");
  spec.name = meta != nullptr ? string_field(*meta, "name") : "";
  if (spec.name.empty()) return std::string("node without metadata.name");
  const json* status = field(node, "status");
  const json* alloc = status != nullptr ? field(*status, "allocatable") : nullptr;
  if (alloc == nullptr || !alloc->is_object()) {
    return fmt::format("node {}: no status.allocatable", spec.name);
  }
  auto quantity =
      [&](const char* key) -> std::variant<std::monostate, std::string, std::string_view> {
    const json* q = field(*alloc, key);
    if (q == nullptr) return std::monostate{};
    if (!q->is_string())
      return fmt::format("node {}: allocatable {} is not a string", spec.name, key);
    return std::string_view(q->get_ref<const std::string&>());
  };
  std::string error;
  auto read = [&](const char* key, auto convert, auto& out) {
    const auto q = quantity(key);
    if (const auto* e = std::get_if<std::string>(&q)) {
      error = *e;
      return;
    }
    const auto* text = std::get_if<std::string_view>(&q);
    if (text == nullptr) return;
    const auto v = convert(*text);
    if (!v) {
      error = fmt::format("node {}: allocatable {} '{}' is not a quantity gpuorch can use",
                          spec.name, key, *text);
      return;
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
  };
  read("cpu", quantity_milli, spec.cpu_milli);
  read(
      "memory", [](std::string_view t) { return quantity_mib(t, false); }, spec.memory_mib);
  read("pods", quantity_count, spec.max_pods);
  for (const char* resource : kGpuResources) {
    if (spec.gpu_count == 0) read(resource, quantity_count, spec.gpu_count);
  }
  if (!error.empty()) return error;
  if (spec.gpu_count > 4096)
    return fmt::format("node {}: {} GPUs is not plausible", spec.name, spec.gpu_count);
  if (spec.max_pods == 0) spec.max_pods = -1;  // advertised 0 pods: nothing may run there

  if (const json* labels = meta != nullptr ? field(*meta, "labels") : nullptr;
      labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) spec.labels.emplace_back(k, v.get<std::string>());
    }
  }
  if (spec.gpu_count > 0) {
    for (const char* key : kGpuModelLabels) {
      for (const auto& [k, v] : spec.labels) {
        if (spec.gpu_model.empty() && k == key && !v.empty()) spec.gpu_model = v;
      }
    }
    // A GPU node nobody labelled: its GPUs are schedulable for pods that name no model.
    if (spec.gpu_model.empty()) spec.gpu_model = "unknown";
    // The node labeller's link matrix, so the core picks the GPUs the device plugin will; a
    // matrix that does not fit this node is no link data (lowest free GPUs), never a bad node.
    if (const json* annotations = meta != nullptr ? field(*meta, "annotations") : nullptr) {
      if (const json* t = field(*annotations, kTopologyAnnotation);
          t != nullptr && t->is_string()) {
        spec.gpu_links = annotated_gpu_links(t->get_ref<const std::string&>(), spec.gpu_count);
      }
    }
  }
  if (const json* s = field(node, "spec"); s != nullptr) {
    if (const json* u = field(*s, "unschedulable"); u != nullptr && u->is_boolean()) {
      spec.unschedulable = u->get<bool>();
    }
    if (const json* taints = field(*s, "taints"); taints != nullptr && taints->is_array()) {
      for (const json& t : *taints) {
        spec.taints.push_back(
            {string_field(t, "key"), string_field(t, "value"), string_field(t, "effect")});
      }
    }
  }
  return spec;
}

std::string object_name(const nlohmann::json& object) {
  if (!object.is_object()) return {};
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  const auto name = meta->find("name");
  return name != meta->end() && name->is_string() ? name->get<std::string>() : std::string();
}

}  // namespace gpuorch::k8s
