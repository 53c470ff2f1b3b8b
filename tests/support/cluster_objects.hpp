#pragma once
// Objects the scheduler e2e tests create on the real API server: a GPU Node (no kubelet: the
// Node object with its capacity patched in, which is all a scheduler reads) and a Pod asking
// for resources, with a scheduler name.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::test {

inline const std::string kDefaultPods = "/api/v1/namespaces/default/pods";

inline void add_gpu_node(k8s::ApiClient& api, const std::string& name, int gpus,
                         nlohmann::json labels = nlohmann::json::object(),
                         const std::string& model = "A100") {
  labels["nvidia.com/gpu.product"] = model;
  api.create(
      "/api/v1/nodes",
      {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}});
  const nlohmann::json res = {{"cpu", "32"},
                              {"memory", "256Gi"},
                              {"pods", "110"},
                              {"nvidia.com/gpu", std::to_string(gpus)}};
  api.patch(fmt::format("/api/v1/nodes/{}/status", name),
            {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

inline nlohmann::json gpu_pod(const std::string& name, const nlohmann::json& requests,
                              const nlohmann::json& annotations = nlohmann::json::object(),
                              const std::string& scheduler = "gpuorch") {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"annotations", annotations}}},
      {"spec",
       {{"schedulerName", scheduler},
        {"containers", nlohmann::json::array(
                           {{{"name", "c"},
                             {"image", "registry.k8s.io/pause:3.10"},
                             {"resources", {{"requests", requests}, {"limits", requests}}}}})}}}};
}

// The pod's PodScheduled=False reason ("Unschedulable", "SchedulingGated"); empty when none.
inline std::string unscheduled_reason(const nlohmann::json& pod) {
  for (const auto& c : pod.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
      return c.value("reason", "");
    }
  }
  return "";
}

}  // namespace gpuorch::test
