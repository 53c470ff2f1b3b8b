#pragma once
// `gpuorch doctor numa`: whether each process using a GPU runs on the cores and memory next to
// it, and whether the kubelet's Topology and CPU Managers would keep GPU pods that way.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::doctor {

struct GpuProcess {
  int pid = 0;
  std::string command;                        // /proc/PID/comm
  std::vector<int> gpu_minors;                // /dev/nvidiaN it has open
  topology::IdSet cpus_allowed;               // Cpus_allowed_list
  topology::IdSet mems_allowed;               // Mems_allowed_list
  std::map<int, long long> pages;             // NUMA node -> resident pages, summed over numa_maps
  std::map<std::string, long long> policies;  // "default", "bind:1" -> mappings with it
};

// The N of every /dev/nvidiaN that process `pid` has open (sorted, once each; not nvidiactl,
// nvidia-uvm); empty when it has none or its fds cannot be read, and for this process itself on
// the live host (it may hold them through NVML). doctor utilisation uses it too.
std::vector<int> gpu_minors_open(const discover::Tree& tree, int pid);

// Whether a process of this /proc/PID/comm holds GPU files to manage the GPUs, not to compute on
// them (nvidia-persistenced, nv-hostengine, dcgm-exporter, nvidia-smi, NVIDIA's device plugin):
// such a holder is neither a job to bind nor a sign that a GPU is in use.
bool gpu_manager(const std::string& command);

// Processes with a /dev/nvidiaN open, from /proc/PID/fd (so it needs no NVML and sees processes
// of every container on the host when run as root), GPU managers left out. Unreadable processes are
// skipped: they may have exited, or belong to another user.
std::vector<GpuProcess> find_gpu_processes(const discover::Tree& tree);

std::vector<Finding> check_numa(const topology::Host& host, const std::vector<GpuProcess>& procs);

// The kubelet's KubeletConfiguration (YAML or JSON): cpuManagerPolicy, topologyManagerPolicy,
// topologyManagerScope, memoryManagerPolicy. Throws base::InputError "file:line: ..." when it
// is not YAML or not a KubeletConfiguration.
std::vector<Finding> check_kubelet_config(const std::string& path);

}  // namespace gpuorch::doctor
