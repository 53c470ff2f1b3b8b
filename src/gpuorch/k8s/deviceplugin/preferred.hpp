#pragma once
// GetPreferredAllocation: which `size` devices, from those the kubelet offers (already filtered
// to the Topology Manager's NUMA choice) and including `must_include`, a container should get.
// The rule (docs/device-plugin.md): whole GPUs and MIG devices go to the set whose pairs are
// best connected by topology::gpu_link_scores (the scheduler core's scale; two MIG devices of one
// GPU above any two GPUs): the highest weakest pair, then the highest sum; among equal sets, the
// one least connected to the devices left over, so good cliques stay whole for later requests.
// The search is the scheduler core's GPU picker (sched::pick_connected), so with every free GPU
// offered the plugin picks what the scheduler picked. Replicas of shared GPUs are spread over the
// least used GPUs.
#include <string>
#include <vector>

#include "gpuorch/k8s/deviceplugin/resources.hpp"

namespace gpuorch::k8s {

// Throws std::invalid_argument for unknown IDs or a size smaller than must_include.
std::vector<std::string> preferred_allocation(const topology::Host& host, const Resource& r,
                                              const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size);

}  // namespace gpuorch::k8s
