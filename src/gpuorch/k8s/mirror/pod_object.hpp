#pragma once
// A Kubernetes Pod as the scheduler core sees it: the request (CPU, memory, whole GPUs or a GPU
// fraction, GPU models), where it may run (nodeSelector, required node affinity, tolerations),
// its priority, its gang, and where it is bound with which GPUs.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/extended_resources.hpp"
#include "gpuorch/workload/pod_spec.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::k8s {

// KAI-Scheduler's convention: a share of one GPU, "0.5" = half a GPU.
inline constexpr const char* kGpuFractionAnnotation = "gpu-fraction";
// gpuorch's own form of a share, in milli (1..1000); also written after binding.
inline constexpr const char* kGpuMilliAnnotation = "gpuorch.io/gpu-milli";
// Written before binding: the GPU indices on the node, comma-separated.
inline constexpr const char* kGpusAnnotation = "gpuorch.io/gpus";
// Gangs: scheduler-plugins' PodGroup label and Volcano's annotation.
inline constexpr const char* kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr const char* kGroupNameAnnotation = "scheduling.k8s.io/group-name";
// The queue a pod's job belongs to, as KAI-Scheduler names it (a Queue of scheduling.run.ai/v2).
inline constexpr const char* kQueueLabel = "kai.scheduler/queue";

// Priorities above this are the system's (system-cluster-critical and up): never preempted.
inline constexpr int kSystemPriority = 1'000'000'000;

// One entry of spec.resourceClaims (Dynamic Resource Allocation): the ResourceClaim it names
// (resourceClaimName), or the one kube-controller-manager's resourceclaim controller made from
// its template (resourceClaimTemplateName; the name in status.resourceClaimStatuses); `claim` is
// empty while that one does not exist yet.
struct PodClaim {
  std::string name;
  std::string claim;
  std::string template_name;
  bool operator==(const PodClaim&) const = default;
};

struct PodObject {
  std::string uid;
  std::string ns;
  std::string name;
  std::string scheduler_name;
  std::string node_name;  // empty until bound
  std::string phase;
  std::string created;  // metadata.creationTimestamp (RFC 3339 sorts as text)
  int priority = 0;
  // spec.preemptionPolicy Never: it waits for room rather than take it from lower priorities.
  bool preempt_never = false;
  // status.startTime (else metadata.creationTimestamp), Unix seconds; -1 when neither parses:
  // how much work a preemption of it would lose.
  std::int64_t started_s = -1;
  // When it joined its gang's run, Unix seconds: status.startTime, else (bound, not started yet)
  // the lastTransitionTime of its PodScheduled=True condition, which the API server sets at the
  // binding; -1 when neither. An elastic gang's resize interval runs from its newest member's.
  std::int64_t joined_s = -1;
  workload::PodSpec spec;  // spec.name is "namespace/name"
  std::vector<int> gpus;   // from gpuorch.io/gpus, when a gpuorch scheduler placed it
  std::string gang;        // "namespace/group", empty when not in a gang
  std::string queue;       // label kai.scheduler/queue; empty: the default queue
  std::string error;       // why the request cannot be understood; the pod is then not placed
  bool deleting = false;   // metadata.deletionTimestamp set
  // spec.schedulingGates: while any is there the pod is not to be scheduled (Kueue's
  // kueue.x-k8s.io/admission until it admits the pod).
  std::vector<std::string> scheduling_gates;
  // The first required placement constraint gpuorch scheduler does not evaluate (empty: none);
  // the soft ones it ignores (unevaluated_fields.hpp). The extender leaves both to kube-scheduler.
  std::string unevaluated;
  std::vector<std::string> ignored_preferences;
  // spec.resourceClaims: devices the pod gets through ResourceClaims (gpuorch scheduler allocates
  // them, k8s/mirror/dra_claims.hpp); its GPUs are then the claims', not in `spec`.
  std::vector<PodClaim> claims;
  // Its GPU extended resources per container, and the claim a scheduler made for them
  // (status.extendedResourceClaimStatus): KEP-5004's bridge (k8s/mirror/extended_resources.hpp).
  std::vector<GpuResourceAsk> gpu_resources;
  std::string extended_claim;
  bool gpu_milli_annotated = false;  // the pod carries gpuorch.io/gpu-milli itself
  // The reason of its PodScheduled=False condition, when it has one ("Unschedulable",
  // "SchedulingGated"), so a verdict it already shows is not written again.
  std::string unscheduled_reason;
  // gpuorch.io/throughput, as `gpuorch launch` publishes it on the pod of a job's first rank;
  // nullopt when absent or malformed (a bad annotation only goes unused).
  std::optional<workload::ThroughputReport> throughput;

  [[nodiscard]] std::string key() const { return ns + "/" + name; }
  // Succeeded or Failed: its resources are free again.
  [[nodiscard]] bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  [[nodiscard]] bool gated() const { return !scheduling_gates.empty(); }
};

PodObject pod_from_json(const nlohmann::json& pod);
// spec.resourceClaims, each with the claim it names or was given (status.resourceClaimStatuses).
std::vector<PodClaim> pod_claims(const nlohmann::json& pod);

// An RFC 3339 time the API server writes ("2026-12-04T07:28:05Z", fractions and offsets
// allowed) as Unix seconds; -1 when it is not one.
std::int64_t rfc3339_seconds(const std::string& text);
// Now, as the API server writes times ("2026-12-04T07:28:05Z"): conditions, Events, checks.
std::string now_rfc3339();

// The GPU-model label's required affinity moves into the request's model list, so a pod asking
// for `nvidia.com/gpu.product In [A100]` is explained as "have the wrong GPU model" and placed
// exactly as a trace pod with gpu_spec A100.
inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";

}  // namespace gpuorch::k8s
