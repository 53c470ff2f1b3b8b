#pragma once
// One filter of the scheduler core, as kube-scheduler's framework has Filter plugins: a stable
// name, the check, and the words an unschedulable pod's explanation and doctor's fix use.
// A plain struct of function pointers rather than an interface with virtual calls: check_node runs
// the built-in ones from a constant table, so the compiler sees through them on the hot path.
#include <string>
#include <string_view>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/workload/node_constraints.hpp"

namespace gpuorch::sched {

enum class FilterStage : std::uint8_t {
  // The node's own labels, taints and cordon against the pod's constraints: they do not change
  // with load, so RequestResolver evaluates them once per constraint set and node and the
  // request carries the verdicts (PodRequest::node_reasons). They run before kResources.
  kNode,
  // The node's free resources: evaluated on every check.
  kResources,
};

using ResourceFilterFn = bool (*)(const cluster::Cluster& cluster, cluster::NodeIndex n,
                                  const PodRequest& pod);
using NodeFilterFn = bool (*)(const cluster::NodeSpec& node, const workload::NodeConstraints& pod);
using FilterPhraseFn = std::string (*)(const PodRequest& pod);

// The empty-node check of a filter about load only: a node with nothing on it passes.
inline bool passes_when_empty(const cluster::Cluster&, cluster::NodeIndex, const PodRequest&) {
  return true;
}

struct FilterPlugin {
  // Stable key of machine-readable output ("gpu-milli"): JSON of sim fill, doctor, the scheduler.
  std::string_view name;
  FilterStage stage = FilterStage::kResources;
  // kResources: true when the node passes now; and when it would pass with nothing running on it
  // (an infeasible pod is one that no empty node passes).
  ResourceFilterFn filter = nullptr;
  ResourceFilterFn filter_empty = passes_when_empty;
  // kNode: true when the node passes; an empty node keeps its labels, so the same verdict holds.
  NodeFilterFn filter_node = nullptr;
  // What the nodes it rejected lack, for this pod ("lack a GPU with >= 810 free milli").
  FilterPhraseFn phrase = nullptr;
  // What a user can do about it (doctor pending's fix).
  std::string_view fix;
};

}  // namespace gpuorch::sched
