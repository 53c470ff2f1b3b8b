#pragma once
// What a claim's GpuConfigs ask of the node, worked out before anything is changed, so a
// configuration the node cannot honour fails Prepare with nothing done: the whole GPUs whose
// time slice is to be set, and the devices one MPS control daemon serves (NVIDIA's driver starts
// one per claim and configuration; gpuorch one per claim, so a claim whose devices ask for two
// different MPS configurations is refused by name).
#include <string>
#include <vector>

#include "gpuorch/k8s/dra/checkpoint.hpp"
#include "gpuorch/k8s/dra/gpu_config.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s::dra {

// `devices`: the slice's device names of the claim ("gpu-3", "gpu-7-mig-1-0"), `configs` the
// GpuConfig of each (device_configs). Returns the sharing without `mps_root` (the preparer's to
// choose). Throws ConfigError: time-slicing asked of a MIG instance (its interval is the GPU's),
// any sharing of a device that is not NVIDIA's, two MPS configurations in one claim, a
// per-device pinned memory limit whose key names none of the MPS devices.
[[nodiscard]] PreparedSharing plan_sharing(const topology::Host& host,
                                           const std::vector<std::string>& devices,
                                           const std::vector<GpuConfig>& configs);

}  // namespace gpuorch::k8s::dra
