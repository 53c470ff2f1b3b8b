#pragma once
// The kubelet's maxPods (kube-scheduler's NodeResourcesFit for pods). 0 = no limit (traces); a
// negative allocatable admits nothing. An empty node runs no pod, so it always passes.
#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool pod_slot_free(const cluster::Cluster& cluster, cluster::NodeIndex n,
                          const PodRequest&) {
  const int max_pods = cluster.spec(n).max_pods;
  return max_pods == 0 || (max_pods > 0 && cluster.pod_count(n) < max_pods);
}

inline constexpr FilterPlugin kPodCount{
    .name = "pods",
    .filter = pod_slot_free,
    .phrase = [](const PodRequest&) -> std::string { return "run their maximum number of pods"; },
    .fix = "the nodes run their maximum number of pods (maxPods): free pod slots",
};

}  // namespace gpuorch::sched::filters
