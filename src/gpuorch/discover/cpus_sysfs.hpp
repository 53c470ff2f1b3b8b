#pragma once
// CPUs, NUMA nodes and memory from sysfs/procfs: the fallback when hwloc cannot load, and the
// source of what hwloc does not keep (node distances, MemTotal).
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::discover {

// Fills online_cpus, logical_cpus, memory_mib, numa_nodes (with distances) and, when the per-CPU
// topology files are there, cores and packages.
void read_cpus_sysfs(const Tree& tree, topology::Host& host);

}  // namespace gpuorch::discover
