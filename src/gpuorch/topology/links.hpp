#pragma once
// Fills Host::links for every pair of devices from the PCI locations and the GPU-to-GPU links
// that discovery saw (NVLink peers, NVSwitch ports, xGMI).
#include <cstdint>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

struct DirectLink {
  int gpu_a = 0, gpu_b = 0;         // GPU indices into Host::gpus
  Path kind = Path::kNvLink;        // kNvLink or kXgmi
  int count = 0;                    // NVLinks between the pair
  int weight = 0;                   // xGMI: KFD io_link weight
  std::int64_t bandwidth_mbps = 0;  // xGMI: KFD max_bandwidth (MB/s)
};

void compute_links(Host& host, const std::vector<DirectLink>& direct);

}  // namespace gpuorch::topology
