#pragma once
// A synthetic cluster and workload with openb's composition (see openb_like.cpp).
#include <cstdint>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sim {

inline constexpr const char* kOpenbLikeLabel = "synthetic-openb-like";

// 1213 nodes, 6212 GPUs: openb's GPU nodes by model, GPU count, CPU and memory.
std::vector<cluster::NodeSpec> openb_like_nodes();
// `count` pods (0 = as many as openb's default trace, 8152) drawn from its pod-shape mix.
std::vector<workload::PodSpec> openb_like_pods(std::uint64_t seed, std::size_t count = 0);

}  // namespace gpuorch::sim
