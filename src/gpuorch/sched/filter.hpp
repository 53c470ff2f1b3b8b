#pragma once
// Filters: can this pod run on this node now? Each rejection names the filter (an id into the
// filter registry, sched/framework/filter_registry.hpp), and the rejections over all nodes add up
// to the explanation a pending pod gets.
#include <cstdint>
#include <string>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/framework/filter_id.hpp"
#include "gpuorch/sched/framework/filter_registry.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/workload/node_constraints.hpp"

namespace gpuorch::sched {

// The first filter that rejects the node, in the registry's order (the node-stage verdicts the
// request carries, then the resource filters), or kFits.
FilterId check_node(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod);
// The same filters against the node's capacity, as if it were empty.
FilterId check_empty_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                          const PodRequest& pod);
// The node-stage filters alone (cordon, affinity, taints, ...): what RequestResolver precomputes
// per constraint set and node.
FilterId check_node_constraints(const cluster::NodeSpec& node,
                                const workload::NodeConstraints& pod);
// Whether some registered (not built-in) filter is node-stage: then a pod without constraints may
// still be excluded by a node's labels, so RequestResolver cannot skip it.
[[nodiscard]] bool node_filters_registered();

// Why a pod fits nowhere: nodes rejected per filter.
struct FilterDiagnosis {
  FilterCounts nodes_by_filter{};
  std::uint32_t nodes_checked = 0;

  void add(FilterId r) {
    ++nodes_by_filter[filter_index(r)];
    ++nodes_checked;
  }
  [[nodiscard]] std::uint32_t nodes(FilterId r) const { return nodes_by_filter[filter_index(r)]; }
  // The filter that rejected the most nodes (the earlier in the registry on a tie), kFits when
  // none rejected any.
  [[nodiscard]] FilterId most_rejections() const;
  // "1213 nodes: 900 lack a GPU with >= 810 free milli, 313 have the wrong GPU model"
  [[nodiscard]] std::string explain(const PodRequest& pod) const;
};

}  // namespace gpuorch::sched
