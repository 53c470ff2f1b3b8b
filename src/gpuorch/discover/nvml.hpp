#pragma once
// NVIDIA's management library, seen through what gpuorch asks of it. Two sources answer the same
// questions: the live libnvidia-ml.so.1 loaded with dlopen (no CUDA or NVML at build time), and a
// recording (nvml.json in a recorded tree, written by `gpuorch topo --record`).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/diagnostics.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::discover {

struct NvmlLink {
  int link = 0;
  bool active = false;
  std::string remote_type;        // "gpu", "switch", "ibmnpu" or "unknown"
  std::string remote_pci_bus_id;  // for "gpu": the peer's bus id
};

struct NvmlMigInstance {
  int gpu_instance = -1, compute_instance = -1;
  std::string uuid, name;
  std::uint64_t memory_total_bytes = 0;
  std::optional<topology::MigAttributes> attributes;
};

struct NvmlDevice {
  unsigned index = 0;
  std::string name, uuid, pci_bus_id;
  std::uint64_t memory_total_bytes = 0;
  int cc_major = -1, cc_minor = -1;
  int minor_number = -1;
  std::vector<NvmlLink> nvlinks;
  int mig_current = -1, mig_pending = -1;  // -1: MIG not supported
  std::vector<NvmlMigInstance> mig_instances;
};

// One MIG instance's share of a reading (memory is all NVML gives per instance).
struct NvmlMigSample {
  int gpu_instance = -1;
  std::optional<std::uint64_t> memory_used_bytes, memory_total_bytes;
};

// GPM activity over the time since the previous reading (Hopper and later; NVML's GPM API). The
// first reading of a device has none: GPM needs two samples.
struct NvmlGpm {
  std::optional<double> graphics_util, sm_util, sm_occupancy, tensor_util, dram_bw_util;  // %
  std::optional<double> fp64_util, fp32_util, fp16_util;                                  // %
  std::optional<double> pcie_tx_mibps, pcie_rx_mibps, nvlink_tx_mibps, nvlink_rx_mibps;   // MiB/s
};

// One reading; a field NVML could not give stays empty.
struct NvmlSample {
  std::optional<unsigned> gpu_util, mem_copy_util;
  std::optional<std::uint64_t> memory_used_bytes, memory_total_bytes, memory_reserved_bytes;
  std::optional<unsigned> temperature_c, memory_temperature_c, power_mw, sm_clock_mhz,
      mem_clock_mhz;
  std::optional<unsigned> pcie_tx_kbps, pcie_rx_kbps;
  std::optional<std::uint64_t> energy_mj, nvlink_tx_kib, nvlink_rx_kib, pcie_replays;
  std::optional<unsigned> encoder_util, decoder_util;  // %
  std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable, row_remap_failure,
      row_remap_pending;
  std::optional<unsigned long long> last_xid;  // recordings only; live XIDs come from events
  NvmlGpm gpm;
  std::vector<NvmlMigSample> mig;
  std::string error;  // non-empty when the device could not be read at all
};

class Nvml {
 public:
  virtual ~Nvml() = default;
  [[nodiscard]] virtual std::string source() const = 0;  // "libnvidia-ml.so.1" or the file
  [[nodiscard]] virtual std::string driver_version() const = 0;
  [[nodiscard]] virtual int cuda_driver_version() const = 0;
  [[nodiscard]] virtual std::vector<NvmlDevice> devices() = 0;
  // Not thread-safe: one sampler thread owns the Nvml while sampling.
  virtual NvmlSample sample(unsigned index) = 0;
};

// dlopen()s `library` (default "libnvidia-ml.so.1") and initialises NVML; nullptr with `why`
// (one line: the dlopen or nvmlInit error) when there is no usable NVML.
std::unique_ptr<Nvml> open_live_nvml(const std::string& library, std::string& why);
// Reads a recording; nullptr when the file is missing, or (reported to diag) malformed.
std::unique_ptr<Nvml> open_recorded_nvml(const std::string& path, const std::string& display,
                                         Diagnostics& diag);
// The recording format open_recorded_nvml reads, with `samples` readings per device.
nlohmann::ordered_json record_nvml(Nvml& nvml, int samples);

}  // namespace gpuorch::discover
