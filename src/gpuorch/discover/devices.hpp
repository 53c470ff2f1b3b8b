#pragma once
// Device backends: each adds what it finds to the Host. PCI placement and attributes are filled
// later, in one place (discover.cpp), for every device alike.
#include <string>
#include <vector>

#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/topology/host.hpp"
#include "gpuorch/topology/links.hpp"

namespace gpuorch::discover {

// NVIDIA GPUs from NVML when given, else from /proc/driver/nvidia/gpus, else from sysfs alone.
void find_nvidia_gpus(const Tree& tree, Nvml* nvml, topology::Host& host,
                      std::vector<topology::DirectLink>& links);
// AMD GPUs from /sys/class/drm and the KFD topology (xGMI links).
void find_amd_gpus(const Tree& tree, topology::Host& host,
                   std::vector<topology::DirectLink>& links);
// RDMA NICs from /sys/class/infiniband.
void find_rdma_nics(const Tree& tree, topology::Host& host);
// GFD's family name for a CUDA compute capability ("hopper"); "undefined" when unknown.
std::string nvidia_family(int cc_major, int cc_minor);
// "mlx5_10" after "mlx5_9".
bool natural_less(const std::string& a, const std::string& b);

}  // namespace gpuorch::discover
