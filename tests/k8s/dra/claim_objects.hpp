#pragma once
// What the tests of gpuorch scheduler allocating ResourceClaims on the real API server share: a
// pod with one claim (by name or from a template), the claim the resourceclaim controller would
// make from a template (the test control plane runs none), the devices an allocation holds, and
// a fresh DGX node with its slice and gpuorch's DeviceClasses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/dra/slice_publisher.hpp"
#include "k8s/dra/api_driver.hpp"
#include "k8s/dra/dra_node.hpp"
#include "support/kube_objects.hpp"

namespace gpuorch::k8s::dra {

inline const std::string kClaims = namespaced_path(kResourceApi, "default", "resourceclaims");

// `claim`: a ResourceClaim's name, or "template:NAME" for a ResourceClaimTemplate's.
inline nlohmann::json claim_pod(const std::string& name, const std::string& claim,
                                const std::string& scheduler) {
  using nlohmann::json;
  json source = {{"name", "gpus"}};
  if (claim.starts_with("template:")) {
    source["resourceClaimTemplateName"] = claim.substr(9);
  } else {
    source["resourceClaimName"] = claim;
  }
  json spec = {{"resourceClaims", json::array({source})},
               {"containers", json::array({{{"name", "c"},
                                            {"image", "registry.k8s.io/pause:3.10"},
                                            {"resources",
                                             {{"requests", {{"cpu", "1"}}},
                                              {"claims", json::array({{{"name", "gpus"}}})}}}}})}};
  if (!scheduler.empty()) spec["schedulerName"] = scheduler;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", spec}};
}

// A pod of `scheduler` with one entry of spec.resourceClaims per claim (c0, c1, ...), in order.
inline nlohmann::json pod_with_claims(const std::string& name,
                                      const std::vector<std::string>& claims,
                                      const std::string& scheduler) {
  using nlohmann::json;
  json pod = claim_pod(name, claims.front(), scheduler);
  json sources = json::array();
  json uses = json::array();
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const std::string entry = "c" + std::to_string(i);
    sources.push_back({{"name", entry}, {"resourceClaimName", claims[i]}});
    uses.push_back({{"name", entry}});
  }
  pod["spec"]["resourceClaims"] = sources;
  pod["spec"]["containers"][0]["resources"]["claims"] = uses;
  return pod;
}

// What kube-controller-manager's resourceclaim controller does for a pod's template: `claim`
// (named `name`) owned by the pod, and named in the pod's status.
inline void make_template_claim(ApiClient& api, const nlohmann::json& pod, nlohmann::json claim,
                                const std::string& name) {
  using nlohmann::json;
  claim["metadata"]["name"] = name;
  claim["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                       {"kind", "Pod"},
                                                       {"name", pod["metadata"]["name"]},
                                                       {"uid", pod["metadata"]["uid"]},
                                                       {"controller", true}}});
  api.create(kClaims, claim);
  api.patch(
      namespaced_path("/api/v1", "default", "pods", pod["metadata"]["name"].get<std::string>()) +
          "/status",
      {{"status",
        {{"resourceClaimStatuses",
          json::array({{{"name", "gpus"}, {"resourceClaimName", name}}})}}}});
}

// The devices of an allocated claim ("gpu-4"), or none.
inline std::set<std::string> devices_of(const nlohmann::json& claim) {
  std::set<std::string> out;
  for (const auto& r :
       claim.value(nlohmann::json::json_pointer("/status/allocation/devices/results"),
                   nlohmann::json::array())) {
    out.insert(r.value("device", ""));
  }
  return out;
}

// The NVLink domain of a device of two_domain_host(): 0 (gpu-0..3) or 4 (gpu-4..6).
inline int domain_of(const std::string& device) { return std::stoi(device.substr(4)) < 4 ? 0 : 4; }

inline bool one_domain(const std::set<std::string>& devices) {
  std::set<int> domains;
  for (const auto& d : devices) domains.insert(domain_of(d));
  return domains.size() == 1;
}

inline void drop(ApiClient& api, const std::string& path) {
  try {
    api.remove(path);
  } catch (const ApiError& e) {
    if (e.status() != 404) throw;
  }
}

// Every claim in default gone, also those kube-scheduler protected with its finalizer (no
// resourceclaim controller runs here to remove it).
inline void drop_claims(ApiClient& api) {
  const nlohmann::json list = api.get(kClaims);
  for (const auto& c : list["items"]) {
    try {
      api.patch(kClaims + "/" + c["metadata"]["name"].get<std::string>(),
                {{"metadata", {{"finalizers", nullptr}}}});
    } catch (const ApiError&) {
    }
  }
  drop(api, kClaims);
  test::wait_for(api, kClaims, [](const nlohmann::json& l) { return l["items"].empty(); });
}

// Nothing but DGX node `node` with its slice (two_domain_host) and gpuorch's DeviceClasses, no
// pods, no claims.
inline void dgx_node_only(ApiClient& api, const std::string& node) {
  test::clear_cluster(api);
  drop_claims(api);
  add_dra_node(api, node);
  SliceOptions o;
  o.node_name = node;
  drop(api, std::string(kResourceApi) + "/resourceslices/" + slice_name(o));
  ASSERT_EQ(publish_slice(api, resource_slice(two_domain_host(), o)), SliceChange::kCreated);
  apply_device_classes(api);
}

}  // namespace gpuorch::k8s::dra
