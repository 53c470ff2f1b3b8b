#pragma once
// Allocate follows the scheduler: `gpuorch scheduler` and `gpuorch extender` record the GPUs they
// chose on the pod (gpuorch.io/gpus, and gpuorch.io/gpu-milli for a share) in the Binding. The
// kubelet's Allocate names only device IDs, not the pod, so the plugin finds the pod itself: the
// pods bound to its node (fieldSelector spec.nodeName), not finished, with recorded GPUs that
// this resource has and as many as the container asks for, not yet marked allocated; the oldest
// first (the kubelet admits pods in about the order they were bound). The claim is a conditional
// write of gpuorch.io/gpus-allocated on the pod (its resourceVersion), so two pods racing on one
// node never get one pod's GPUs, whether the two Allocate calls come to this process or to two.
// A request no recorded pod matches keeps the kubelet's choice (a pod of another scheduler).
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/deviceplugin/allocate.hpp"
#include "gpuorch/k8s/deviceplugin/resources.hpp"

namespace gpuorch::k8s {

// Written by the plugin once it handed out a pod's recorded GPUs: the device IDs.
inline constexpr const char* kGpusAllocatedAnnotation = "gpuorch.io/gpus-allocated";

struct ScheduledChoice {
  std::string pod;                      // "namespace/name"
  std::vector<int> gpus;                // recorded GPU indices (Host::gpus)
  std::int64_t gpu_milli = 0;           // a share of gpus[0]; 0 for whole GPUs
  std::vector<std::string> device_ids;  // the resource's device IDs for them
};

class ScheduledAllocations {
 public:
  ScheduledAllocations(ApiClient& api, std::string node_name,
                       std::function<void(const std::string&)> log = {});

  // The pod a gpuorch scheduler placed that this request is for, claimed on the API server;
  // nothing when no such pod waits (the caller keeps the kubelet's devices). `requested` are the
  // kubelet's device IDs (their count is what the container asks for). Throws only on a broken
  // API server answer; an unreachable server is logged and falls back.
  std::optional<ScheduledChoice> claim(const Resource& r,
                                       const std::vector<std::string>& requested);
  // The same pod's devices without claiming it, when all are among `available`
  // (GetPreferredAllocation: the kubelet then asks Allocate for exactly these).
  std::optional<std::vector<std::string>> preferred(const Resource& r,
                                                    const std::vector<std::string>& available,
                                                    int size);

  [[nodiscard]] const std::string& node_name() const { return node_; }

 private:
  std::vector<ScheduledChoice> waiting(const Resource& r, std::size_t size,
                                       std::vector<nlohmann::json>* objects);
  void log(const std::string& line) const;

  ApiClient& api_;
  std::string node_;
  std::function<void(const std::string&)> log_;
  std::mutex mutex_;  // one claim at a time in this process
};

// The share's enforcement on top of what allocate() gives the devices: with MPS, the pod's share
// of the GPU's SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and memory (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)
// instead of the replica's 1/R; with time-slicing nothing bounds it (docs/device-plugin.md).
// Always: GPUORCH_GPU_MILLI and the pod the GPUs were recorded for, for the workload to see.
void apply_scheduled_share(const topology::Host& host, const Resource& r,
                           const ScheduledChoice& choice, ContainerAllocation& a);

}  // namespace gpuorch::k8s
