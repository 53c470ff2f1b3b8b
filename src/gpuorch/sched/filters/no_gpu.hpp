#pragma once
// A GPU pod needs a node with GPUs at all; said apart from "too few free" because adding GPU
// nodes, not waiting, is the fix.
#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool has_gpu(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  return pod.cpu_only() || cluster.gpu_count(n) != 0;
}
inline bool has_gpu_empty(const cluster::Cluster& cluster, cluster::NodeIndex n,
                          const PodRequest& pod) {
  return pod.cpu_only() || cluster.spec(n).gpu_count != 0;
}

inline constexpr FilterPlugin kNoGpu{
    .name = "no-gpu",
    .filter = has_gpu,
    .filter_empty = has_gpu_empty,
    .phrase = [](const PodRequest&) -> std::string { return "have no GPU"; },
    .fix =
        "free GPUs (finish or preempt lower-priority pods), ask for fewer GPUs, or add GPU nodes",
};

}  // namespace gpuorch::sched::filters
