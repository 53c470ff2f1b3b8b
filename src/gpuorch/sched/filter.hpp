#pragma once
// Filters: can this pod run on this node now? Each rejection carries its reason, and the reasons
// over all nodes add up to the explanation a pending pod gets.
#include <array>
#include <cstdint>
#include <string>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/reason.hpp"

namespace gpuorch::sched {

// First failing filter: the node constraints, then the GPU reasons (they say the most about GPU
// pods), CPU, memory and the pod count.
Reason check_node(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod);
// The same filters against the node's capacity, as if it were empty.
Reason check_empty_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                        const PodRequest& pod);

// Why a pod fits nowhere: nodes rejected per reason.
struct FilterDiagnosis {
  std::array<std::uint32_t, kReasonCount> nodes_by_reason{};
  std::uint32_t nodes_checked = 0;

  void add(Reason r) {
    ++nodes_by_reason[static_cast<std::size_t>(r)];
    ++nodes_checked;
  }
  // "1213 nodes: 900 lack a GPU with >= 810 free milli, 313 have the wrong GPU model"
  [[nodiscard]] std::string explain(const PodRequest& pod) const;
};

// Short, stable names for machine-readable output ("gpu-model", "cpu", ...).
const char* reason_key(Reason r);
// What a node rejected for this reason lacks, phrased for this pod.
std::string reason_phrase(Reason r, const PodRequest& pod);

}  // namespace gpuorch::sched
