#pragma once
// A synthetic cluster of any size with a plausible fleet mix, for `sim scale`: 8-GPU servers
// dominate (about 92 % of nodes), with 4-, 2- and 1-GPU nodes and several GPU generations;
// CPU and memory per node follow common server configurations.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::sim {

// `count` nodes; the same seed gives the same nodes. About 7.6 GPUs per node on average.
std::vector<cluster::NodeSpec> synthetic_cluster(std::size_t count, std::uint64_t seed);

}  // namespace gpuorch::sim
