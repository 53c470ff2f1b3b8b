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

// One MIG instance of a GPU (GPU instance id, as NVML and DCGM's GPU_I_ID number it).
struct MigSample {
  int gpu_instance = -1;
  std::string profile;  // "3g.40gb"
  std::string uuid;     // "MIG-…"
  std::optional<double> memory_used_mib, memory_total_mib, memory_free_mib;
};

struct GpuSample {
  int gpu = 0;
  bool ok = false;
  std::string error;
  std::optional<double> gpu_util, mem_copy_util, enc_util, dec_util;  // percent
  std::optional<double> memory_used_mib, memory_total_mib, memory_free_mib, memory_reserved_mib;
  std::optional<double> temperature_c, memory_temperature_c, power_w, sm_clock_mhz, mem_clock_mhz;
  std::optional<double> pcie_tx_kbps, pcie_rx_kbps;        // KB/s, as NVML reports them
  std::optional<double> energy_mj;                         // cumulative
  std::optional<double> nvlink_tx_bytes, nvlink_rx_bytes;  // cumulative
  std::optional<double> pcie_replays;                      // cumulative
  std::optional<double> rows_correctable, rows_uncorrectable, row_remap_failure;
  std::optional<double> last_xid;  // 0 until the GPU reports one
  // Activity ratios 0-1 over the last interval (NVML GPM), as DCGM's profiling fields give them.
  std::optional<double> gr_engine_active, sm_active, sm_occupancy, tensor_active, dram_active;
  std::optional<double> fp64_active, fp32_active, fp16_active;
  std::optional<double> pcie_tx_bytes_per_s, pcie_rx_bytes_per_s;
  std::optional<double> nvlink_mb_per_s;  // both directions, all links
  std::vector<MigSample> mig;
};

struct Round {
  std::chrono::system_clock::time_point time;
  double duration_s = 0;  // how long reading every GPU took
  std::vector<GpuSample> gpus;
};

// The last XID each GPU reported (by UUID); filled from NVML's events by XidLog (xid_log.hpp).
class XidSource {
 public:
  virtual ~XidSource() = default;
  [[nodiscard]] virtual std::optional<unsigned long long> last(const std::string& uuid) const = 0;
};

class Sampler {
 public:
  // `root` is the tree the Host was discovered from (AMD counters are read from it).
  Sampler(const topology::Host& host, std::unique_ptr<discover::Nvml> nvml,
          std::filesystem::path root);
  Round sample();
  [[nodiscard]] bool has_nvml() const { return nvml_ != nullptr; }
  // Live XIDs; without one, a recording's last_xid (or 0) is reported.
  void set_xid_source(std::shared_ptr<const XidSource> xids) { xids_ = std::move(xids); }

 private:
  GpuSample nvidia(const topology::Gpu& g, unsigned nvml_index, std::size_t slot);
  GpuSample amd(const topology::Gpu& g) const;

  std::vector<topology::Gpu> gpus_;
  std::vector<int> nvml_index_;  // per GPU: its NVML index, -1 for AMD
  std::unique_ptr<discover::Nvml> nvml_;
  std::filesystem::path root_;
  std::shared_ptr<const XidSource> xids_;
  // Per GPU: the NVLink byte counters (both directions) and when they were read, for a rate
  // when GPM gives none.
  struct NvlinkMark {
    std::chrono::steady_clock::time_point at;
    double bytes = 0;
  };
  std::vector<std::optional<NvlinkMark>> nvlink_marks_;
};

}  // namespace gpuorch::telemetry
