#pragma once
// The pod's allowed GPU models (nvidia.com/gpu.product affinity, a trace's model column).
#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched::filters {

inline bool gpu_model_allowed(const cluster::Cluster& cluster, cluster::NodeIndex n,
                              const PodRequest& pod) {
  return pod.cpu_only() || pod.allows(cluster.model(n));
}

inline constexpr FilterPlugin kGpuModel{
    .name = "gpu-model",
    .filter = gpu_model_allowed,
    .filter_empty = gpu_model_allowed,
    .phrase = [](const PodRequest&) -> std::string { return "have the wrong GPU model"; },
    .fix =
        "widen the GPU-model requirement (nvidia.com/gpu.product affinity) or add nodes of that "
        "model",
};

}  // namespace gpuorch::sched::filters
