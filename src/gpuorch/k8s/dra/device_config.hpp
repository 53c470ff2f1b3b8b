#pragma once
// Which of a claim's configurations applies to which allocated device, as the DRA API defines it
// (resource.k8s.io/v1 DeviceAllocationConfiguration): the allocation carries the DeviceClasses'
// configurations (`source: FromClass`) and the claim's own (`FromClaim`); the claim's take
// precedence over the classes', and within one source a later entry over an earlier one. An entry
// with `requests` applies only to those requests (a main request's name covers its subrequests,
// "gpus" covers "gpus/h200"); without, to all. Configurations of other drivers are theirs.
#include <nlohmann/json.hpp>
#include <vector>

#include "gpuorch/k8s/dra/claim_allocation.hpp"
#include "gpuorch/k8s/dra/gpu_config.hpp"

namespace gpuorch::k8s::dra {

// One GpuConfig per device of `devices`, in order (the default, no sharing, where none applies).
// Every configuration of `driver` in the allocation is read, also one that applies to no device
// here, so a mistake is reported at once rather than on another node. Throws ConfigError
// ("config[1] (FromClaim): GpuConfig sharing.strategy: ...").
[[nodiscard]] std::vector<GpuConfig> device_configs(const nlohmann::json& claim,
                                                    const std::vector<AllocatedDevice>& devices,
                                                    const std::string& driver);

}  // namespace gpuorch::k8s::dra
