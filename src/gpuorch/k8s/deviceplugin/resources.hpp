#pragma once
// What the device plugin advertises: from a topology::Host and the config, the extended
// resources (one per kubelet registration: nvidia.com/gpu, nvidia.com/mig-3g.40gb, amd.com/gpu,
// their renamed shared variants) and the devices of each, with replicas for time-slicing and MPS
// in NVIDIA's `<id>::<n>` form.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s {

inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

// One physical thing a container can get: a whole GPU or one MIG device.
struct PhysicalDevice {
  std::string id;  // what the kubelet sees before replication: GPU/MIG UUID, or the AMD PCI address
  int gpu = 0;     // index into Host::gpus
  int mig = -1;    // index into that GPU's MIG instances; -1 = the whole GPU
  std::int64_t memory_mib = 0;
  std::vector<std::int64_t> numa_nodes;  // empty: no NUMA preference (numa_node unknown / -1)
};

struct AdvertisedDevice {
  std::string id;    // PhysicalDevice::id, plus "::<replica>" when shared
  int physical = 0;  // index into Resource::physical
  int replica = -1;  // -1 when not shared
};

struct Resource {
  std::string name;  // "nvidia.com/gpu"
  topology::Vendor vendor = topology::Vendor::kNvidia;
  SharingKind sharing = SharingKind::kNone;
  int replicas = 1;
  bool fail_requests_greater_than_one = false;
  std::vector<PhysicalDevice> physical;
  std::vector<AdvertisedDevice> devices;

  // The socket file name under the device plugin directory: "gpuorch-nvidia.com-gpu.sock".
  [[nodiscard]] std::string socket_name() const;
};

enum class VendorFilter { kAll, kNvidia, kAmd };

// Throws base::InputError when the config cannot apply to this host (single strategy over
// different MIG profiles, MPS over MIG devices).
std::vector<Resource> plan_resources(const topology::Host& host, const PluginConfig& config,
                                     VendorFilter vendors = VendorFilter::kAll);

// The physical device behind an advertised ID ("GPU-…::3" → "GPU-…"), or nothing.
const PhysicalDevice* find_physical(const Resource& r, const std::string& advertised_id);
std::string strip_replica(const std::string& id);

}  // namespace gpuorch::k8s
