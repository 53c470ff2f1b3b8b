#pragma once
// Dynamic Resource Allocation as every process that decides from a ClusterMirror sees it, in one
// place for gpuorch scheduler, gpuorch extender (through MirrorFeed) and gpuorch doctor:
// ResourceSlices become the nodes' GPUs (dra_devices.hpp); every allocated ResourceClaim holds its
// GPUs in the mirror, whoever allocated it (kube-scheduler, another scheduler, gpuorch), under the
// claim rather than a pod (a claim may outlive its pod or serve several), in the queue of the pod
// it is reserved for; a pod's claims are planned and placed by the core (dra_claims.hpp), with one
// explanation for every caller. Not thread-safe: callers hold their own lock.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/dra_claims.hpp"
#include "gpuorch/k8s/mirror/dra_devices.hpp"

namespace gpuorch::k8s {

// The id a claim's GPUs are held under in a ClusterMirror (never a pod's uid).
std::string claim_holder(const std::string& claim_uid);
[[nodiscard]] bool is_claim_holder(const std::string& uid);

class DraState {
 public:
  // A ResourceSlice event; true when some node's devices changed (apply() again before deciding).
  bool slice(const nlohmann::json& obj, bool deleted, ClusterMirror& mirror);
  void device_class(const nlohmann::json& obj, bool deleted);
  // A ResourceClaim event: its allocation is held in `mirror`, or released.
  void claim(const nlohmann::json& obj, bool deleted, ClusterMirror& mirror);
  // A pod event: the queue (label kai.scheduler/queue) of a pod with claims is where the GPUs of
  // the claims reserved for it count.
  void pod(const PodObject& pod, bool deleted, ClusterMirror& mirror);

  // `nodes` with their DRA GPUs (DraInventory::apply); which nodes took them decides which
  // allocations count, so every claim is counted again.
  std::map<std::string, cluster::NodeSpec> apply(std::map<std::string, cluster::NodeSpec> nodes,
                                                 ClusterMirror& mirror);

  // The pod's request with its claims' GPUs (allocated, else asked: requested_gpus): what the
  // workload history, the Queue status and doctor count for it.
  [[nodiscard]] workload::PodSpec spec_with_claims(const PodObject& pod) const;

  // A pod asking for whole GPUs as a resource (nvidia.com/gpu) without claims, restricted to the
  // nodes whose GPUs come from device plugins: a node whose GPUs are DRA devices has none for it
  // (the kubelet would not prepare them). The pod as it is when no node has DRA GPUs.
  [[nodiscard]] PodObject device_plugin_gpus_only(const PodObject& pod) const;
  // What to add to such a pod's explanation: the DeviceClass that maps its resource to DRA devices
  // (KEP-5004's extendedResourceName, or deviceclass.resource.kubernetes.io/<class>), which
  // gpuorch does not allocate yet; "" when none does or no node has DRA GPUs.
  [[nodiscard]] std::string device_plugin_note(const PodObject& pod) const;

  // The core's decision for a pod with claims, on `mirror` (counted there as schedule() does
  // when placed: the caller keeps it with hold(), or releases it).
  struct Placement {
    enum class Outcome { kPlaced, kWaiting, kInfeasible, kUnevaluated, kNoRoom };
    Outcome outcome = Outcome::kWaiting;
    ClaimPlan plan;
    ClusterMirror::Result result;
    int chosen = -1;      // placed: the index of plan.choices it took (-1: nothing to allocate)
    std::string message;  // not placed: why, in the words gpuorch scheduler writes on the pod
    [[nodiscard]] bool placed() const { return outcome == Outcome::kPlaced; }
  };
  // `among`: the nodes it may go to (empty: any).
  Placement place(const PodObject& pod, ClusterMirror& mirror,
                  const std::vector<std::string>& among = {});
  // A pod with claims as the core's request, so it can be placed with others (a gang's members,
  // the job layer's admission) and kept with hold() as place() keeps it: one pod per way of
  // meeting its claims (plan.choices in order; one when nothing is to be allocated), pinned to
  // the node of claims already allocated; none, with why, when it cannot be placed now.
  struct Ask {
    Placement::Outcome outcome = Placement::Outcome::kPlaced;  // kPlaced: `pods` to try
    std::string message;
    ClaimPlan plan;
    std::vector<PodObject> pods;
  };
  Ask ask(const PodObject& pod, const std::vector<std::string>& among = {});
  // KEP-5004's bridge: the pod asked as if it had `claim` (extended_claim()), to be kept with
  // hold_extended().
  Ask ask_extended(const PodObject& pod, const nlohmann::json& claim);
  // The pod asked with `claims` (ResourceClaim objects not made yet, such as those its
  // ResourceClaimTemplates will give) as if they existed; they are forgotten after.
  Ask ask_with(const PodObject& pod, const std::vector<nlohmann::json>& claims);
  // A placed pod keeps its CPU and memory on its node, and the claims it allocates hold their
  // GPUs from now on (assumed until the claim's allocation is seen, or drop_assumed()). Returns
  // the uids of the claims it allocates.
  std::vector<std::string> hold(const PodObject& pod, const Placement& placement,
                                ClusterMirror& mirror);
  // An allocation that will not be written: those claims count as the API server has them.
  void drop_assumed(const std::vector<std::string>& claim_uids, ClusterMirror& mirror);

  // KEP-5004's bridge (docs/dra.md, "The extended-resource bridge"): the DeviceClass whose
  // devices the pod's GPU resources may be (all of them map to one class: its
  // spec.extendedResourceName, or the implicit deviceclass.resource.kubernetes.io/<class>); ""
  // when none does, or no node has DRA GPUs.
  [[nodiscard]] std::string bridge_class(const PodObject& pod) const;
  // The claim kube-scheduler would make for the pod's GPU resources (one request of `cls` per
  // container resource; generateName <pod>-extended-resources-, annotated, owned by the pod),
  // without status: to create.
  [[nodiscard]] nlohmann::json extended_claim(const PodObject& pod, const std::string& cls) const;
  // The pod placed on DRA GPUs as if it had that claim.
  Placement place_extended(const PodObject& pod, const nlohmann::json& claim,
                           ClusterMirror& mirror);
  // The created claim (`created`, as the API server answered) with the placement's allocation
  // and the pod in reservedFor: the status to write.
  [[nodiscard]] nlohmann::json extended_status(const PodObject& pod, const Placement& placement,
                                               const nlohmann::json& created) const;
  // A placed bridge pod keeps its CPU and memory on its node; its GPUs are held for its claim
  // (to be created) until that claim's allocation is seen, or drop_assumed() with the id returned.
  std::string hold_extended(const PodObject& pod, const Placement& placement,
                            ClusterMirror& mirror);
  // A pod as the mirror counts it: one whose GPU resources a bridge claim holds
  // (status.extendedResourceClaimStatus) holds only its CPU and memory itself.
  [[nodiscard]] static PodObject counted(const PodObject& pod);

  [[nodiscard]] const DraInventory& inventory() const { return inventory_; }
  [[nodiscard]] const std::map<std::string, ClaimObject>& claims() const { return claims_; }
  [[nodiscard]] const std::set<std::string>& gpu_nodes() const { return gpu_nodes_; }

 private:
  void account(const ClaimObject& claim, ClusterMirror& mirror);
  Placement place_ask(const Ask& ask, ClusterMirror& mirror);
  void account_all(ClusterMirror& mirror);

  DraInventory inventory_;
  std::set<std::string> gpu_nodes_;  // nodes whose GPUs are their DRA devices
  // Every other GPU node with all its GPUs: where a GPU resource request may go.
  std::vector<workload::NodeGpuGroups> plugin_groups_;
  std::map<std::string, DeviceClassObject> classes_;
  EligibilityCache eligibility_;  // cleared when devices, classes or DRA GPU nodes change
  std::map<std::string, ClaimObject> claims_;  // by "namespace/name"
  std::unordered_set<std::string> in_flight_;  // claim uid: our allocation being written
  std::unordered_map<std::string, std::string> queue_of_pod_;  // pods with claims: their queue
};

}  // namespace gpuorch::k8s
