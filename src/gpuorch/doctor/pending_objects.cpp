// Where doctor pod gets the cluster from: the API server, or a List saved with kubectl.
#include <fmt/format.h>

#include <atomic>
#include <chrono>

#include "gpuorch/base/error.hpp"
#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/mirror/pod_group.hpp"

namespace gpuorch::doctor {
namespace {

std::vector<nlohmann::json> items(const nlohmann::json& list) {
  std::vector<nlohmann::json> out;
  if (list.contains("items") && list["items"].is_array()) {
    for (const auto& i : list["items"]) out.push_back(i);
  }
  return out;
}

}  // namespace

ClusterObjects list_cluster(k8s::ApiClient& api, bool queues) {
  ClusterObjects o;
  o.nodes = items(api.get("/api/v1/nodes"));
  o.pods = items(api.get("/api/v1/pods"));
  // Both gang APIs where they are served (404: that kind of gang does not exist here). A list's
  // items of a built-in kind carry no apiVersion; it is written in so the parse knows the kind.
  for (const auto& [path, version] :
       {std::pair{k8s::kPluginsPodGroups, "scheduling.x-k8s.io/v1alpha1"},
        std::pair{k8s::kUpstreamPodGroups, "scheduling.k8s.io/v1beta1"}}) {
    try {
      for (nlohmann::json& g : items(api.get(path))) {
        if (g.is_object() && !g.contains("apiVersion")) g["apiVersion"] = version;
        o.podgroups.push_back(std::move(g));
      }
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404) throw;
    }
  }
  // DRA where served: a built-in kind's list items carry no kind, written in for the parse.
  for (auto [path, out] : {std::pair{"resourceslices", &o.resource_slices},
                           std::pair{"deviceclasses", &o.device_classes},
                           std::pair{"resourceclaims", &o.resource_claims}}) {
    try {
      *out = items(api.get(fmt::format("/apis/resource.k8s.io/v1/{}", path)));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404) throw;
      break;  // the group is not served
    }
  }
  if (!queues) return o;
  try {
    // A Queue CRD being (re)established answers 429 for a few seconds: waited out.
    static const std::atomic<bool> never{false};
    const auto list =
        k8s::patient_get(api, "/apis/scheduling.run.ai/v2/queues", std::chrono::seconds(20), never);
    if (list) o.queues = items(*list);
    o.queues_served = true;
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404) throw;  // no Queue CRD installed
  }
  return o;
}

ClusterObjects cluster_from_list(const nlohmann::json& list, const std::string& file) {
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    base::fail_input(file, 0, "not a Kubernetes List (kubectl get nodes,pods -A -o json)");
  }
  ClusterObjects o;
  for (const auto& i : list["items"]) {
    const std::string kind = i.is_object() ? i.value("kind", "") : "";
    if (kind == "Node") {
      o.nodes.push_back(i);
    } else if (kind == "Pod") {
      o.pods.push_back(i);
    } else if (kind == "PodGroup") {
      o.podgroups.push_back(i);
    } else if (kind == "Queue") {
      o.queues.push_back(i);
      o.queues_served = true;
    } else if (kind == "ResourceSlice") {
      o.resource_slices.push_back(i);
    } else if (kind == "DeviceClass") {
      o.device_classes.push_back(i);
    } else if (kind == "ResourceClaim") {
      o.resource_claims.push_back(i);
    }
  }
  return o;
}

}  // namespace gpuorch::doctor
