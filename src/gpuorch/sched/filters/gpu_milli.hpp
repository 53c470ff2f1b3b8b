#pragma once
// A shared-GPU pod needs its share free on one GPU: a share never spans GPUs. An empty node's
// GPUs are whole, so it always passes.
#include <fmt/format.h>

#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool gpu_milli_free(const cluster::Cluster& cluster, cluster::NodeIndex n,
                           const PodRequest& pod) {
  return !pod.gpu_share() || cluster.max_gpu_milli_left(n) >= pod.gpu_milli;
}

inline constexpr FilterPlugin kGpuMilli{
    .name = "gpu-milli",
    .filter = gpu_milli_free,
    .phrase =
        [](const PodRequest& pod) {
          return fmt::format("lack a GPU with >= {} free milli", pod.gpu_milli);
        },
    .fix = "ask for a smaller GPU share, or wait for shared GPUs to free up",
};

}  // namespace gpuorch::sched::filters
