#pragma once
// A pod's ResourceClaims (resource.k8s.io/v1) in the scheduler core's terms, and the claim
// status gpuorch scheduler writes back. A claim's device request (its DeviceClass's and its own
// CEL selectors, evaluated here by the subset of cel_subset.hpp; ExactCount, All, firstAvailable)
// and its matchAttribute constraints become per node groups of eligible GPUs
// (workload::PodSpec::gpu_groups: the devices sharing one value of every constrained attribute),
// so the core's gpu-groups filter and its GPU picker choose among valid sets; CEL never reaches
// the core. What the subset or this planner cannot evaluate is refused by name, never guessed.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/dra_devices.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::k8s {

// A ResourceClaim as gpuorch scheduler reads it.
struct ClaimObject {
  nlohmann::json object;  // as the API server sent it: the base of a status write
  std::string uid;
  std::string ns;
  std::string name;
  bool allocated = false;
  std::string node;  // allocated: the node its allocation's nodeSelector names (may be empty)
  std::vector<std::string> owners;         // metadata.ownerReferences uids
  std::vector<std::string> reserved_uids;  // status.reservedFor uids
  [[nodiscard]] std::string key() const { return ns + "/" + name; }
};
ClaimObject claim_from_json(const nlohmann::json& claim);

// The whole GPUs of gpuorch's driver an allocation holds, as (node, GPU index); results of other
// drivers or of devices not (or no longer) published are left out.
std::vector<std::pair<std::string, int>> allocated_gpus(const ClaimObject& claim,
                                                        const DraInventory& inventory);

// How many devices an unallocated claim asks for: ExactCount requests' counts (a firstAvailable
// request's first subrequest); All counts none (it depends on the node).
int requested_gpus(const ClaimObject& claim);

// A DeviceClass: its selectors' expressions and its opaque configuration.
struct DeviceClassObject {
  std::vector<std::string> selectors;
  std::string extended_resource_name;  // spec.extendedResourceName (KEP-5004), if any
  nlohmann::json config = nlohmann::json::array();
};
DeviceClassObject device_class_from_json(const nlohmann::json& cls);

// One way to meet a pod's unallocated claims: `gpus` whole GPUs of one group of a node; `parts`
// say which request of which claim gets them. When the requests ask for the same devices the
// parts take the chosen GPUs in order (`count` each); otherwise each part says which devices of
// each node it allows, and the chosen GPUs are given to the parts by device_results (the groups
// are then the sets of devices that meet every request together).
struct ClaimChoice {
  int gpus = 0;
  std::vector<workload::NodeGpuGroups> groups;
  struct Part {
    std::string claim;    // "namespace/name"
    std::string request;  // the result's request: "gpus", or "gpus/h100" for a subrequest
    int count = 0;        // ExactCount; All: every device it allows on the node
    nlohmann::json class_config = nlohmann::json::array();
    bool all = false;
    std::vector<workload::NodeGpuGroups> eligible;  // by node, one group; empty: handed in order
  };
  std::vector<Part> parts;
  struct Constraint {
    std::vector<std::size_t> parts;
    std::string attribute;
    bool distinct = false;
  };
  std::vector<Constraint> constraints;
};

// One allocated device: which part (request of a claim) of the choice gets which GPU.
struct DeviceResult {
  std::size_t part = 0;
  int gpu = 0;
};
// The chosen GPUs of `node` given to the choice's parts (in part order); throws
// std::runtime_error when they cannot meet the parts (a choice the core did not keep to).
std::vector<DeviceResult> device_results(const ClaimChoice& choice, const std::string& node,
                                         const std::vector<int>& gpus,
                                         const DraInventory& inventory);

struct ClaimPlan {
  std::string waiting;  // a claim (or its DeviceClass) does not exist yet: why the pod waits
  std::string refused;  // outside what gpuorch evaluates, or no node can ever meet it: why
  // refused because gpuorch does not evaluate it (the CEL subset, the forms of "Not yet" in
  // docs/dra.md), not because no node can meet it: another allocator may
  bool unevaluated = false;
  std::string pinned_node;           // claims already allocated put the pod on this node
  std::vector<ClaimChoice> choices;  // to try in order; empty when nothing is to be allocated
  std::vector<std::string> claims;   // every claim of the pod ("namespace/name"), to reserve
};

// Which GPUs one device request may get, per node, grouped by its matchAttribute values.
struct DeviceEligibility {
  std::vector<workload::NodeGpuGroups> groups;  // nodes with at least one eligible device
  int class_devices = 0;                        // devices the class's selectors allow
  int eligible = 0;                             // ... and the request's
  int most_in_a_group = 0;                      // the largest group on any node
  std::string runtime_error;                    // the first selector error on a device
  bool truncated = false;  // sets of devices together: the search per node was cut short
};
// Eligibility by request (selectors, constraints, pinned node): valid while the devices, the
// DeviceClasses and the set of DRA GPU nodes stay as they were; the caller clears it when one
// changes. Pods of one template ask alike, so a decision need not evaluate every selector on
// every device again.
using EligibilityCache = std::map<std::string, DeviceEligibility>;

// `gpu_nodes`: the nodes whose GPUs are their DRA devices (DraInventory::apply took them).
ClaimPlan plan_claims(const PodObject& pod, const std::map<std::string, ClaimObject>& claims,
                      const std::map<std::string, DeviceClassObject>& classes,
                      const DraInventory& inventory, const std::set<std::string>& gpu_nodes,
                      EligibilityCache* cache = nullptr);

// The claim's object with `pod` added to status.reservedFor and, when `results` name parts of
// this claim, with status.allocation: one result per GPU (its part's request, the driver, the
// node's pool, the device), the node pinned by its nodeSelector, the class's and the claim's
// configuration.
nlohmann::json claim_status_for(const ClaimObject& claim, const PodObject& pod,
                                const std::string& node, const std::vector<DeviceResult>& results,
                                const std::vector<ClaimChoice::Part>& parts,
                                const DraInventory& inventory);

// The claim's object without `pod_uid` in status.reservedFor, and deallocated when nobody is
// left; nullopt-like empty json when the pod is not there.
nlohmann::json claim_released(const ClaimObject& claim, const std::string& pod_uid);

}  // namespace gpuorch::k8s
