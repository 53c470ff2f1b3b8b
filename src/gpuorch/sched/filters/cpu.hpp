#pragma once
// CPU milli, kube-scheduler's NodeResourcesFit for cpu: GPU nodes often run out of CPU first.
#include <fmt/format.h>

#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool cpu_free(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  return cluster.cpu_free(n) >= pod.cpu_milli;
}
inline bool cpu_empty(const cluster::Cluster& cluster, cluster::NodeIndex n,
                      const PodRequest& pod) {
  return cluster.spec(n).cpu_milli >= pod.cpu_milli;
}

inline constexpr FilterPlugin kCpu{
    .name = "cpu",
    .filter = cpu_free,
    .filter_empty = cpu_empty,
    .phrase =
        [](const PodRequest& pod) { return fmt::format("lack {} free CPU milli", pod.cpu_milli); },
    .fix = "lower the CPU request, or free CPU on a GPU node",
};

}  // namespace gpuorch::sched::filters
