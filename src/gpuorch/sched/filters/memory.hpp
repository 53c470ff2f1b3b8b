#pragma once
// Memory, kube-scheduler's NodeResourcesFit for memory.
#include <fmt/format.h>

#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool memory_free(const cluster::Cluster& cluster, cluster::NodeIndex n,
                        const PodRequest& pod) {
  return cluster.memory_free(n) >= pod.memory_mib;
}
inline bool memory_empty(const cluster::Cluster& cluster, cluster::NodeIndex n,
                         const PodRequest& pod) {
  return cluster.spec(n).memory_mib >= pod.memory_mib;
}

inline constexpr FilterPlugin kMemory{
    .name = "memory",
    .filter = memory_free,
    .filter_empty = memory_empty,
    .phrase =
        [](const PodRequest& pod) {
          return fmt::format("lack {} MiB free memory", pod.memory_mib);
        },
    .fix = "lower the memory request, or free memory on a GPU node",
};

}  // namespace gpuorch::sched::filters
