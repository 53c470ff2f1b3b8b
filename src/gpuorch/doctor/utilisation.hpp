#pragma once
// `gpuorch doctor utilisation`: whether each GPU is kept busy, and when it is not, the likely
// cause on the host side. A window of samples (NVML per GPU, /proc per process that has a GPU
// open and its child processes, /proc/stat) is taken live or read from a recording, so the same
// analysis runs on a real host and on the fixtures of CI. docs/doctor.md names the thresholds.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/finding.hpp"

namespace gpuorch::doctor {

struct UtilGpu {   // a GPU of the window
  int index = 0;   // NVML index
  int minor = -1;  // N of /dev/nvidiaN, how processes are matched to it
  std::string name;
  std::optional<double> memory_total_mib;
};

struct UtilGpuReading {  // one NVML reading of a GPU; what NVML could not give stays empty
  int index = 0;
  std::optional<double> sm_util;  // utilization.gpu, percent of time a kernel ran
  std::optional<double> memory_used_mib;
  std::optional<double> pcie_rx_mbps, pcie_tx_mbps;  // MB/s; RX is host to device
};

struct UtilProcess {  // a process with a GPU open, or a child of one (a DataLoader worker)
  int pid = 0, ppid = 0;
  std::string command;
  std::vector<int> gpu_minors;                // /dev/nvidiaN it has open
  std::map<int, std::uint64_t> thread_ticks;  // thread id -> utime + stime, clock ticks
};

struct UtilSnapshot {
  double t = 0;                               // seconds since the first snapshot
  std::uint64_t cpu_total = 0, cpu_idle = 0;  // /proc/stat "cpu", ticks (idle includes iowait)
  std::vector<UtilGpuReading> gpus;
  std::vector<UtilProcess> processes;
};

struct UtilRecording {
  double ticks_per_second = 100;  // sysconf(_SC_CLK_TCK) of the host recorded
  int cpus = 0;                   // online CPUs
  std::vector<UtilGpu> gpus;
  std::vector<UtilSnapshot> snapshots;
};

// The defaults docs/doctor.md documents; only starved_below has a flag.
struct UtilThresholds {
  double starved_below = 60;       // %: average SM utilisation under which a used GPU is starved
  double main_pegged = 0.85;       // cores: a main thread this busy is pegged
  double busy_thread = 0.5;        // cores: a thread this busy counts as busy
  int few_busy_threads = 2;        // (a) needs fewer other busy threads than this
  double host_saturated = 0.90;    // (c) host CPU busy fraction
  double alternating_stddev = 20;  // (b) SM utilisation standard deviation, percentage points
  double burst_ratio = 4;          // (b) peak PCIe RX >= this x the median RX ...
  double burst_min_mbps = 100;     // ... and at least this many MB/s
};

// One finding per GPU (util.idle, util.busy, or a starved GPU with its likely cause:
// util.loader-bound, util.cpu-bound, util.copy-bound, util.launch-bound) after util.host.
// Needs at least 2 snapshots.
std::vector<Finding> check_utilisation(const UtilRecording& r, const UtilThresholds& t = {});

// The recording format (gpuorch.doctor-utilisation/v1) and its reader; the reader throws
// base::InputError "FILE: where: what" on anything malformed.
nlohmann::ordered_json utilisation_json(const UtilRecording& r);
UtilRecording read_utilisation(const std::string& path);

// Samples every `interval` seconds for `seconds` (seconds / interval + 1 snapshots): NVML for
// the GPUs, `tree` (the live "/" or a recorded one) for /proc.
UtilRecording sample_utilisation(const discover::Tree& tree, discover::Nvml& nvml, double seconds,
                                 double interval);

}  // namespace gpuorch::doctor
