#pragma once
// `gpuorch doctor pod`: why a pod is Pending, in the scheduler core's own words. The cluster's
// current state (Nodes, every bound pod, PodGroups) goes into the same k8s::ClusterMirror
// `gpuorch scheduler` decides with, so the explanation is the one the scheduler writes on pods it
// cannot place ("0/3 nodes are available: ... Waiting: ..."), for pods of any scheduler.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"

namespace gpuorch::doctor {

struct ClusterObjects {
  std::vector<nlohmann::json> nodes, pods, podgroups;
  std::vector<nlohmann::json> queues;  // KAI's scheduling.run.ai/v2 Queues
  bool queues_served = false;          // the Queue API exists (or a listed object is a Queue)
  // resource.k8s.io/v1 (DRA): the nodes' devices, their classes, the claims
  std::vector<nlohmann::json> resource_slices, device_classes, resource_claims;
};

// Lists Nodes, Pods (all namespaces), PodGroups, ResourceSlices, DeviceClasses, ResourceClaims
// and, with `queues`, Queues (none of a kind whose API is not served).
ClusterObjects list_cluster(k8s::ApiClient& api, bool queues = false);
// `kubectl get nodes,pods,podgroups,queues,resourceslices,deviceclasses,resourceclaims -A -o
// json`: a v1 List, split by kind. Throws
// base::InputError "file: ..." when it is not one.
ClusterObjects cluster_from_list(const nlohmann::json& list, const std::string& file);

// One finding per pod: `pod` ("namespace/name"), or every unbound pod when empty. Throws
// base::InputError when the named pod does not exist.
std::vector<Finding> explain_pending(const ClusterObjects& objects, const std::string& pod,
                                     const k8s::MirrorOptions& options);

}  // namespace gpuorch::doctor
