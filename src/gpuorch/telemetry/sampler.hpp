#pragma once
// One reading of every GPU of a Host: NVIDIA through NVML (live or recorded), AMD through the
// amdgpu sysfs files. A GPU that cannot be read gives ok=false and a reason, never an exception.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::telemetry {

struct GpuSample {
  int gpu = 0;
  bool ok = false;
  std::string error;
  std::optional<double> gpu_util, mem_copy_util;  // percent
  std::optional<double> memory_used_mib, memory_total_mib;
  std::optional<double> temperature_c, power_w, sm_clock_mhz, mem_clock_mhz;
  std::optional<double> pcie_tx_kbps, pcie_rx_kbps;        // KB/s, as NVML reports them
  std::optional<double> energy_mj;                         // cumulative
  std::optional<double> nvlink_tx_bytes, nvlink_rx_bytes;  // cumulative
};

struct Round {
  std::chrono::system_clock::time_point time;
  double duration_s = 0;  // how long reading every GPU took
  std::vector<GpuSample> gpus;
};

class Sampler {
 public:
  // `root` is the tree the Host was discovered from (AMD counters are read from it).
  Sampler(const topology::Host& host, std::unique_ptr<discover::Nvml> nvml,
          std::filesystem::path root);
  Round sample();
  [[nodiscard]] bool has_nvml() const { return nvml_ != nullptr; }

 private:
  GpuSample nvidia(const topology::Gpu& g, unsigned nvml_index);
  GpuSample amd(const topology::Gpu& g) const;

  std::vector<topology::Gpu> gpus_;
  std::vector<int> nvml_index_;  // per GPU: its NVML index, -1 for AMD
  std::unique_ptr<discover::Nvml> nvml_;
  std::filesystem::path root_;
};

}  // namespace gpuorch::telemetry
