#include "gpuorch/k8s/mirror/extended_resources.hpp"

#include <fmt/format.h>

#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/api/quantity.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

bool gpu_resource(const std::string& name) {
  if (name.starts_with(kImplicitClassPrefix)) return true;
  for (const char* r : kGpuResources) {
    if (name == r) return true;
  }
  return false;
}

}  // namespace

std::vector<GpuResourceAsk> gpu_resource_asks(const json& pod) {
  std::vector<GpuResourceAsk> out;
  const json& spec = field(pod, "spec");
  int index = 0;
  // As kube-scheduler numbers them: init containers first, a resource by its place among the
  // container's requests in name order (the request name is no API: the mapping is).
  for (const char* list : {"initContainers", "containers"}) {
    const json& containers = field(spec, list);
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      const json& res = field(c, "resources");
      int j = 0;
      // Requests, else limits (as the API server defaults them); keys in the map's order.
      json asked = field(res, "requests").is_object() ? field(res, "requests") : json::object();
      if (const json& limits = field(res, "limits"); limits.is_object()) {
        for (const auto& [k, v] : limits.items()) {
          if (!asked.contains(k)) asked[k] = v;
        }
      }
      for (const auto& [name, value] : asked.items()) {  // sorted by name
        const int at = j++;
        if (!gpu_resource(name)) continue;
        const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
        const auto n = quantity_count(text);
        if (!n || *n <= 0 || *n > 4096) continue;
        out.push_back({str(c, "name"), name, static_cast<int>(*n),
                       fmt::format("container-{}-request-{}", index, at)});
      }
      ++index;
    }
  }
  return out;
}

std::string extended_claim_name(const json& pod) {
  return str(field(field(pod, "status"), "extendedResourceClaimStatus"), "resourceClaimName");
}

json extended_claim_status(const std::vector<GpuResourceAsk>& asks, const std::string& claim) {
  json mappings = json::array();
  for (const GpuResourceAsk& a : asks) {
    mappings.push_back(
        {{"containerName", a.container}, {"resourceName", a.resource}, {"requestName", a.request}});
  }
  return {{"requestMappings", std::move(mappings)}, {"resourceClaimName", claim}};
}

}  // namespace gpuorch::k8s
