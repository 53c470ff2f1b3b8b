#pragma once
// The `nvidia-smi topo -m` view of a Host: tab-separated, same column names, so people and the
// comparison script (scripts/hw/compare_topo.py) read both the same way.
#include <string>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

// The matrix, the legend, the NIC legend, then MIG instances and NUMA nodes when present.
std::string render_matrix(const Host& host);
// "0-55,112-167" style CPU affinity of a GPU, and the NUMA nodes it is local to ("0", "N/A").
std::string cpu_affinity(const Host& host, const Gpu& gpu);
std::string numa_affinity(const Host& host, const Gpu& gpu);

}  // namespace gpuorch::topology
