#pragma once
// The model (resources, health, allocations) in the kubelet API's messages.
#include "deviceplugin/v1beta1/api.pb.h"
#include "gpuorch/k8s/deviceplugin/allocate.hpp"
#include "gpuorch/k8s/deviceplugin/health.hpp"

namespace gpuorch::k8s {

// Every advertised device with its health and NUMA node (no TopologyInfo when unknown).
v1beta1::ListAndWatchResponse device_list(const topology::Host& host, const Resource& r,
                                          const HealthState& health);
void to_proto(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse& out);

}  // namespace gpuorch::k8s
