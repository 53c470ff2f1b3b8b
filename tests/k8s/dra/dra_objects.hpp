#pragma once
// The DRA objects of the tests without an API server (DraState, the extender, doctor, the Kueue
// check): node "dgx" whose GPUs are DRA devices only, the driver's slice of the recorded DGX H100
// cut into two NVLink domains (GPUs 0-3, 4-6), gpuorch's GPU DeviceClass, and claims for GPUs of
// one domain, as made and as kube-scheduler allocates them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "k8s/dra/dra_node.hpp"

namespace gpuorch::k8s::dra_objects {

using nlohmann::json;

inline constexpr const char* kNode = "dgx";

inline json dra_node() {
  const json res = {{"cpu", "32"}, {"memory", "256Gi"}, {"pods", "110"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", kNode}, {"uid", "uid-node"}}},
          {"status", {{"capacity", res}, {"allocatable", res}}}};
}

inline json slice() {
  dra::SliceOptions o;
  o.node_name = kNode;
  json s = dra::resource_slice(dra::two_domain_host(), o);
  s["kind"] = "ResourceSlice";
  return s;
}

inline json gpu_class() {
  return {
      {"kind", "DeviceClass"},
      {"metadata", {{"name", "gpu.gpuorch.io"}}},
      {"spec",
       {{"selectors",
         json::array(
             {{{"cel",
                {{"expression", R"(device.driver == "gpu.gpuorch.io" && )"
                                R"(device.attributes["gpu.gpuorch.io"].type == "gpu")"}}}}})}}}};
}

// A claim for `count` GPUs of one NVLink domain; `selector`: a CEL expression of the request.
inline json claim(const std::string& name, int count, const std::string& selector = "") {
  json exactly = {
      {"deviceClassName", "gpu.gpuorch.io"}, {"allocationMode", "ExactCount"}, {"count", count}};
  if (!selector.empty()) {
    exactly["selectors"] = json::array({{{"cel", {{"expression", selector}}}}});
  }
  return {
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
      {"spec",
       {{"devices",
         {{"requests", json::array({{{"name", "gpus"}, {"exactly", exactly}}})},
          {"constraints", json::array({{{"matchAttribute", "gpu.gpuorch.io/nvlinkDomain"}}})}}}}}};
}

// The claim as kube-scheduler leaves it: `devices` allocated on the node, reserved for `pod`.
inline json allocated(json c, const std::vector<std::string>& devices, const std::string& pod) {
  json results = json::array();
  for (const auto& d : devices) {
    results.push_back(
        {{"request", "gpus"}, {"driver", "gpu.gpuorch.io"}, {"pool", kNode}, {"device", d}});
  }
  c["status"] = {
      {"allocation",
       {{"devices", {{"results", results}}},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                       {"operator", "In"},
                                                       {"values", json::array({kNode})}}})}}})}}}}},
      {"reservedFor", json::array({{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}})}};
  return c;
}

}  // namespace gpuorch::k8s::dra_objects
