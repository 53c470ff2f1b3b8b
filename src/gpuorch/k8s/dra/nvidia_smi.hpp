#pragma once
// The GPU settings sharing changes, through nvidia-smi as NVIDIA's DRA driver changes them
// (cmd/gpu-kubelet-plugin/nvlib.go: setComputeMode, setTimeSlice): NVML has the compute mode but
// no call for the time slice, which only nvidia-smi's compute-policy sets. Both need root (the
// driver's DaemonSet runs as root).
#include <chrono>
#include <string>

namespace gpuorch::k8s::dra {

struct NvidiaSmi {
  std::string path;  // empty: not found; every call then throws saying so
  std::chrono::milliseconds timeout{30000};
};

// `nvidia-smi -i UUID -c MODE` (DEFAULT, EXCLUSIVE_PROCESS). Throws std::runtime_error with
// nvidia-smi's own words when it fails.
void set_compute_mode(const NvidiaSmi& smi, const std::string& uuid, const std::string& mode);
// `nvidia-smi compute-policy -i UUID --set-timeslice N` (0 Default, 1 Short, 2 Medium, 3 Long).
void set_time_slice(const NvidiaSmi& smi, const std::string& uuid, int interval);

}  // namespace gpuorch::k8s::dra
