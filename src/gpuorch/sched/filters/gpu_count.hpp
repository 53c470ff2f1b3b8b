#pragma once
// A whole-GPU pod needs that many GPUs with nothing on them: a GPU shared with another pod is not
// a whole GPU.
#include <fmt/format.h>

#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool gpu_count_free(const cluster::Cluster& cluster, cluster::NodeIndex n,
                           const PodRequest& pod) {
  return pod.cpu_only() || pod.gpu_share() || cluster.fully_free_gpus(n) >= pod.gpu_count;
}
inline bool gpu_count_empty(const cluster::Cluster& cluster, cluster::NodeIndex n,
                            const PodRequest& pod) {
  return pod.cpu_only() || cluster.spec(n).gpu_count >= pod.gpu_count;
}

inline constexpr FilterPlugin kGpuCount{
    .name = "gpu-count",
    .filter = gpu_count_free,
    .filter_empty = gpu_count_empty,
    .phrase =
        [](const PodRequest& pod) {
          return fmt::format("lack {} free whole GPU{}", pod.gpu_count,
                             pod.gpu_count == 1 ? "" : "s");
        },
    .fix =
        "free GPUs (finish or preempt lower-priority pods), ask for fewer GPUs, or add GPU nodes",
};

}  // namespace gpuorch::sched::filters
