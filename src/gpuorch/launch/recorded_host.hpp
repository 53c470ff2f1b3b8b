#pragma once
// `gpuorch launch --topology FILE`: a host recorded with `gpuorch topo --json`, read back with
// what placement needs: CPUs and cores, each NUMA node's and device's CPUs, GPUs, NICs with their
// port states, and the links between devices.
#include <string>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::launch {

// Throws base::InputError ("file: where: what") on unreadable or malformed input.
topology::Host load_recorded_host(const std::string& path);

}  // namespace gpuorch::launch
