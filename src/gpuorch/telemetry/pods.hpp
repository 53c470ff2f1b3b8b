#pragma once
// Which Kubernetes containers hold which devices, as the kubelet's pod-resources API reports them
// (k8s/kubelet/pod_resources.hpp reads it; the exporter only needs the answer). dcgm-exporter
// labels a GPU's series with `pod`, `namespace` and `container` from the same source.
#include <map>
#include <string>
#include <vector>

namespace gpuorch::telemetry {

struct PodRef {
  std::string pod, ns, container;
  bool operator==(const PodRef&) const = default;
};

// By device ID as the device plugin advertised it, replica suffix ("::3") removed: a GPU UUID,
// a MIG UUID, or (with --kubernetes-gpu-id-type device-name) "nvidia0".
using PodAssignments = std::map<std::string, std::vector<PodRef>>;

// "GPU-…::2" (a shared replica, NVIDIA's and gpuorch's naming) → "GPU-…".
inline std::string physical_device_id(const std::string& id) {
  const auto sep = id.find("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

}  // namespace gpuorch::telemetry
