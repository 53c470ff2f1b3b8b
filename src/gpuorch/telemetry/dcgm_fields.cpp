#include "gpuorch/telemetry/dcgm_fields.hpp"

namespace gpuorch::telemetry {
namespace {

using S = GpuSample;

// Why a field has no NVML source; shown once at start-up and in docs/telemetry.md.
constexpr std::string_view kVgpuOnly =
    "vGPU guest licensing: NVML gives it only inside a licensed vGPU guest, not on bare metal or "
    "passthrough";
constexpr std::string_view kDcgmPolicy =
    "DCGM's own accounting (violation time, retired pages, ECC totals); not in gpuorch's NVML "
    "readings yet";

std::vector<DcgmField> make_fields() {
  return {
      // Clocks
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", &S::sm_clock_mhz, {}},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", &S::mem_clock_mhz, {}},
      // Temperature
      {"DCGM_FI_DEV_MEMORY_TEMP",
       "gauge",
       "Memory temperature (in C).",
       &S::memory_temperature_c,
       {}},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", &S::temperature_c, {}},
      // Power
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", &S::power_w, {}},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
       "counter",
       "Total energy consumption since boot (in mJ).",
       &S::energy_mj,
       {}},
      // PCIe
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
       "counter",
       "Total number of PCIe retries.",
       &S::pcie_replays,
       {}},
      {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
       "counter",
       "Total number of bytes transmitted through PCIe TX (in KB) via NVML.",
       &S::pcie_tx_kbps,
       {}},
      {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
       "counter",
       "Total number of bytes received through PCIe RX (in KB) via NVML.",
       &S::pcie_rx_kbps,
       {}},
      // Utilization
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", &S::gpu_util, {}},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", &S::mem_copy_util, {}},
      {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", &S::enc_util, {}},
      {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", &S::dec_util, {}},
      // Errors and violations
      {"DCGM_FI_DEV_XID_ERRORS",
       "gauge",
       "Value of the last XID error encountered.",
       &S::last_xid,
       {}},
      {"DCGM_FI_DEV_POWER_VIOLATION", "counter",
       "Throttling duration due to power constraints (in ns).", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_THERMAL_VIOLATION", "counter",
       "Throttling duration due to thermal constraints (in ns).", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "counter",
       "Throttling duration due to sync-boost constraints (in ns).", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "counter",
       "Throttling duration due to board limit constraints (in ns).", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_LOW_UTIL_VIOLATION", "counter",
       "Throttling duration due to low utilization (in ns).", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_RELIABILITY_VIOLATION", "counter",
       "Throttling duration due to reliability constraints (in ns).", nullptr, kDcgmPolicy},
      // Memory usage
      {"DCGM_FI_DEV_FB_FREE",
       "gauge",
       "Framebuffer memory free (in MiB).",
       &S::memory_free_mib,
       {},
       &MigSample::memory_free_mib},
      {"DCGM_FI_DEV_FB_USED",
       "gauge",
       "Framebuffer memory used (in MiB).",
       &S::memory_used_mib,
       {},
       &MigSample::memory_used_mib},
      {"DCGM_FI_DEV_FB_RESERVED",
       "gauge",
       "Framebuffer memory reserved (in MiB).",
       &S::memory_reserved_mib,
       {}},
      // ECC and retired pages
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
       "Total number of single-bit volatile ECC errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
       "Total number of double-bit volatile ECC errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter",
       "Total number of single-bit persistent ECC errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter",
       "Total number of double-bit persistent ECC errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_RETIRED_SBE", "counter",
       "Total number of retired pages due to single-bit errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_RETIRED_DBE", "counter",
       "Total number of retired pages due to double-bit errors.", nullptr, kDcgmPolicy},
      {"DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement.",
       nullptr, kDcgmPolicy},
      // NVLink
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
       "gauge",
       "Total number of NVLink bandwidth counters for all lanes.",
       &S::nvlink_mb_per_s,
       {}},
      // vGPU
      {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", nullptr, kVgpuOnly},
      // Remapped rows
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
       "counter",
       "Number of remapped rows for uncorrectable errors",
       &S::rows_uncorrectable,
       {}},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
       "counter",
       "Number of remapped rows for correctable errors",
       &S::rows_correctable,
       {}},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE",
       "gauge",
       "Whether remapping of rows has failed",
       &S::row_remap_failure,
       {}},
      // Static configuration, shown as a label on every series
      {"DCGM_FI_DRIVER_VERSION", "label", "Driver Version", nullptr, {}},
      // Datacenter profiling (DCP) fields: NVML's GPM metrics on Hopper and later
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE",
       "gauge",
       "Ratio of time the graphics engine is active.",
       &S::gr_engine_active,
       {}},
      {"DCGM_FI_PROF_SM_ACTIVE",
       "gauge",
       "The ratio of cycles an SM has at least 1 warp assigned.",
       &S::sm_active,
       {}},
      {"DCGM_FI_PROF_SM_OCCUPANCY",
       "gauge",
       "The ratio of number of warps resident on an SM.",
       &S::sm_occupancy,
       {}},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
       "gauge",
       "Ratio of cycles the tensor (HMMA) pipe is active.",
       &S::tensor_active,
       {}},
      {"DCGM_FI_PROF_DRAM_ACTIVE",
       "gauge",
       "Ratio of cycles the device memory interface is active sending or receiving data.",
       &S::dram_active,
       {}},
      {"DCGM_FI_PROF_PIPE_FP64_ACTIVE",
       "gauge",
       "Ratio of cycles the fp64 pipes are active.",
       &S::fp64_active,
       {}},
      {"DCGM_FI_PROF_PIPE_FP32_ACTIVE",
       "gauge",
       "Ratio of cycles the fp32 pipes are active.",
       &S::fp32_active,
       {}},
      {"DCGM_FI_PROF_PIPE_FP16_ACTIVE",
       "gauge",
       "Ratio of cycles the fp16 pipes are active.",
       &S::fp16_active,
       {}},
      {"DCGM_FI_PROF_PCIE_TX_BYTES",
       "gauge",
       "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
       "payloads - in bytes per second.",
       &S::pcie_tx_bytes_per_s,
       {}},
      {"DCGM_FI_PROF_PCIE_RX_BYTES",
       "gauge",
       "The rate of data received over the PCIe bus - including both protocol headers and data "
       "payloads - in bytes per second.",
       &S::pcie_rx_bytes_per_s,
       {}},
  };
}

// The uncommented lines of dcgm-exporter 4.8.3's etc/default-counters.csv, in order.
constexpr std::string_view kDefaults[] = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
};

}  // namespace

const std::vector<DcgmField>& dcgm_fields() {
  static const std::vector<DcgmField> fields = make_fields();
  return fields;
}

const DcgmField* find_dcgm_field(std::string_view name) {
  for (const auto& f : dcgm_fields()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<Collector> default_collectors() {
  std::vector<Collector> out;
  for (const auto name : kDefaults) {
    const DcgmField* f = find_dcgm_field(name);
    out.push_back({f, std::string(f->type), std::string(f->help)});
  }
  return out;
}

}  // namespace gpuorch::telemetry
