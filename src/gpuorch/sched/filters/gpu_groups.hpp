#pragma once
// A pod whose GPUs are restricted to groups (Kubernetes DRA claims: the devices its selectors
// allow, all sharing one value of a matchAttribute constraint) needs that many free GPUs inside
// one group of the node; a node without a group for it has none.
#include <fmt/format.h>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool gpu_group_room(const cluster::Cluster& cluster, cluster::NodeIndex n,
                           const PodRequest& pod, bool empty) {
  if (pod.gpu_choice == 0 || pod.cpu_only()) return true;
  if (n >= pod.gpu_groups.size()) return false;
  const auto left = cluster.gpu_milli_left(n);
  for (const auto& group : pod.gpu_groups[n]) {
    int room = 0;
    for (const int g : group) {
      const auto at = static_cast<std::size_t>(g);
      if (at < left.size() && (empty || left[at] >= base::kMilliPerGpu)) ++room;
    }
    if (room >= pod.gpu_count) return true;
  }
  return false;
}

inline constexpr FilterPlugin kGpuGroups{
    .name = "gpu-groups",
    .filter = [](const cluster::Cluster& c, cluster::NodeIndex n,
                 const PodRequest& pod) { return gpu_group_room(c, n, pod, false); },
    .filter_empty = [](const cluster::Cluster& c, cluster::NodeIndex n,
                       const PodRequest& pod) { return gpu_group_room(c, n, pod, true); },
    .phrase =
        [](const PodRequest& pod) {
          return fmt::format("lack {} free GPU{} that the pod's device claims allow together",
                             pod.gpu_count, pod.gpu_count == 1 ? "" : "s");
        },
    .fix =
        "free GPUs of the claim's class on one node (within one value of its matchAttribute), "
        "widen the claim's selectors or constraints, or ask for fewer devices",
};

}  // namespace gpuorch::sched::filters
