#pragma once
// What one container gets for a set of device IDs, as NVIDIA's and AMD's plugins give it
// (reference §2.4, §4.1): NVIDIA_VISIBLE_DEVICES in the configured device-list strategies, MPS
// limits and directories for MPS replicas, /dev/kfd and the DRI nodes for AMD.
#include <map>
#include <string>
#include <vector>

#include "gpuorch/k8s/deviceplugin/resources.hpp"

namespace gpuorch::k8s {

struct MountSpec {
  std::string container_path, host_path;
  bool read_only = false;
};
struct DeviceNode {
  std::string container_path, host_path, permissions;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::vector<DeviceNode> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
};

struct AllocateOptions {
  const PluginConfig* config = nullptr;  // strategies; defaults when null
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins/";
  std::string response_id;  // names the CDI annotation; any unique text
};

// Throws std::invalid_argument with the message the kubelet shows for an unknown ID or a request
// too large for a shared resource; the whole request fails, as the API asks.
ContainerAllocation allocate(const topology::Host& host, const Resource& resource,
                             const std::vector<std::string>& device_ids,
                             const AllocateOptions& options);

// The physical devices behind `device_ids`, each once, in request order (two replicas of one GPU
// are one GPU).
std::vector<const PhysicalDevice*> physical_devices(const Resource& resource,
                                                    const std::vector<std::string>& device_ids);

}  // namespace gpuorch::k8s
