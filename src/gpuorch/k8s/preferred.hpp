#pragma once
// GetPreferredAllocation: which `size` devices, from those the kubelet offers (already filtered
// to the Topology Manager's NUMA choice) and including `must_include`, a container should get.
// The rule (docs/device-plugin.md): whole GPUs and MIG devices go to the set whose pairs are
// best connected (NVLink/xGMI first, then the PCIe path, then the same NUMA node): the highest
// weakest pair, then the highest sum; among equal sets, the one least connected to the devices
// left over, so good cliques stay whole for later requests. The search is the scheduler core's
// GPU picker (sched::pick_connected). Replicas of shared GPUs are spread over the least used GPUs.
#include <string>
#include <vector>

#include "gpuorch/k8s/resources.hpp"

namespace gpuorch::k8s {

// How well two physical devices of `r` are connected; larger is better (table in the docs).
int pair_score(const topology::Host& host, const Resource& r, const PhysicalDevice& a,
               const PhysicalDevice& b);

// Throws std::invalid_argument for unknown IDs or a size smaller than must_include.
std::vector<std::string> preferred_allocation(const topology::Host& host, const Resource& r,
                                              const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size);

}  // namespace gpuorch::k8s
