#include "gpuorch/telemetry/sampler.hpp"

#include <cstdlib>
#include <sstream>

#include "gpuorch/discover/pci.hpp"
#include "gpuorch/discover/tree.hpp"

namespace gpuorch::telemetry {

Sampler::Sampler(const topology::Host& host, std::unique_ptr<discover::Nvml> nvml,
                 std::filesystem::path root)
    : gpus_(host.gpus), nvml_(std::move(nvml)), root_(std::move(root)) {
  // NVML numbers devices its own way; match by PCI address, not by position.
  std::vector<std::string> nvml_bus;
  if (nvml_) {
    for (const auto& d : nvml_->devices()) {
      nvml_bus.push_back(discover::normalize_pci_address(d.pci_bus_id).value_or(""));
    }
  }
  for (const auto& g : gpus_) {
    int idx = -1;
    for (std::size_t i = 0; i < nvml_bus.size(); ++i) {
      if (nvml_bus[i] == g.pci.address) idx = static_cast<int>(i);
    }
    nvml_index_.push_back(g.vendor == topology::Vendor::kNvidia ? idx : -1);
  }
  nvlink_marks_.resize(gpus_.size());
}

Round Sampler::sample() {
  Round r;
  r.time = std::chrono::system_clock::now();
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i];
    if (g.vendor == topology::Vendor::kAmd) {
      r.gpus.push_back(amd(g));
    } else if (nvml_index_[i] >= 0) {
      r.gpus.push_back(nvidia(g, static_cast<unsigned>(nvml_index_[i]), i));
    } else {
      GpuSample s;
      s.gpu = g.index;
      s.error = nvml_ ? "not known to NVML" : "NVML not available";
      r.gpus.push_back(s);
    }
  }
  // DCGM's FB_FREE: what is neither used nor reserved, from the same reading.
  auto free_of = [](auto& m, std::optional<double> reserved) {
    if (m.memory_used_mib && m.memory_total_mib) {
      m.memory_free_mib = *m.memory_total_mib - *m.memory_used_mib - reserved.value_or(0);
    }
  };
  for (auto& s : r.gpus) {
    free_of(s, s.memory_reserved_mib);
    for (auto& m : s.mig) free_of(m, std::nullopt);
  }
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

GpuSample Sampler::nvidia(const topology::Gpu& g, unsigned nvml_index, std::size_t slot) {
  const discover::NvmlSample n = nvml_->sample(nvml_index);
  GpuSample s;
  s.gpu = g.index;
  s.error = n.error;
  s.ok = n.error.empty();
  auto d = [](const auto& v, double scale = 1.0) {
    return v ? std::optional<double>(static_cast<double>(*v) * scale) : std::nullopt;
  };
  s.gpu_util = d(n.gpu_util);
  s.mem_copy_util = d(n.mem_copy_util);
  s.memory_used_mib = d(n.memory_used_bytes, 1.0 / 1048576);
  s.memory_total_mib = d(n.memory_total_bytes, 1.0 / 1048576);
  // The total never changes; discovery knew it when this reading did not carry it.
  if (!s.memory_total_mib && g.memory_mib > 0)
    s.memory_total_mib = static_cast<double>(g.memory_mib);
  s.temperature_c = d(n.temperature_c);
  s.power_w = d(n.power_mw, 1e-3);
  s.sm_clock_mhz = d(n.sm_clock_mhz);
  s.mem_clock_mhz = d(n.mem_clock_mhz);
  s.pcie_tx_kbps = d(n.pcie_tx_kbps);
  s.pcie_rx_kbps = d(n.pcie_rx_kbps);
  s.energy_mj = d(n.energy_mj);
  s.nvlink_tx_bytes = d(n.nvlink_tx_kib, 1024.0);
  s.nvlink_rx_bytes = d(n.nvlink_rx_kib, 1024.0);
  s.enc_util = d(n.encoder_util);
  s.dec_util = d(n.decoder_util);
  s.memory_reserved_mib = d(n.memory_reserved_bytes, 1.0 / 1048576);
  s.memory_temperature_c = d(n.memory_temperature_c);
  s.pcie_replays = d(n.pcie_replays);
  s.rows_correctable = d(n.remapped_rows_correctable);
  s.rows_uncorrectable = d(n.remapped_rows_uncorrectable);
  s.row_remap_failure = d(n.row_remap_failure);
  // DCGM reports 0 until the GPU has had an XID; live events win over a recording's value.
  s.last_xid = static_cast<double>(n.last_xid.value_or(0));
  if (xids_) {
    if (const auto x = xids_->last(g.uuid)) s.last_xid = static_cast<double>(*x);
  }
  // GPM gives percentages; DCGM's profiling fields are ratios 0-1. Divided, not multiplied by
  // 0.01, so 51.95 % prints as 0.5195 rather than 0.5195000000000001.
  auto ratio = [](const std::optional<double>& percent) {
    return percent ? std::optional<double>(*percent / 100) : std::nullopt;
  };
  s.gr_engine_active = ratio(n.gpm.graphics_util);
  s.sm_active = ratio(n.gpm.sm_util);
  s.sm_occupancy = ratio(n.gpm.sm_occupancy);
  s.tensor_active = ratio(n.gpm.tensor_util);
  s.dram_active = ratio(n.gpm.dram_bw_util);
  s.fp64_active = ratio(n.gpm.fp64_util);
  s.fp32_active = ratio(n.gpm.fp32_util);
  s.fp16_active = ratio(n.gpm.fp16_util);
  // Bytes per second: GPM's MiB/s, else NVML's PCIe throughput (KB/s, a 20 ms window).
  s.pcie_tx_bytes_per_s =
      n.gpm.pcie_tx_mibps ? d(n.gpm.pcie_tx_mibps, 1048576.0) : d(n.pcie_tx_kbps, 1024.0);
  s.pcie_rx_bytes_per_s =
      n.gpm.pcie_rx_mibps ? d(n.gpm.pcie_rx_mibps, 1048576.0) : d(n.pcie_rx_kbps, 1024.0);
  // NVLink MB/s, both directions: GPM's, else the rate of the byte counters since last round.
  const auto now = std::chrono::steady_clock::now();
  if (n.gpm.nvlink_tx_mibps && n.gpm.nvlink_rx_mibps) {
    s.nvlink_mb_per_s = (*n.gpm.nvlink_tx_mibps + *n.gpm.nvlink_rx_mibps) * 1.048576;
  }
  if (s.nvlink_tx_bytes && s.nvlink_rx_bytes) {
    const double bytes = *s.nvlink_tx_bytes + *s.nvlink_rx_bytes;
    auto& mark = nvlink_marks_[slot];
    const double dt = mark ? std::chrono::duration<double>(now - mark->at).count() : 0;
    if (!s.nvlink_mb_per_s && mark && dt > 0 && bytes >= mark->bytes) {
      s.nvlink_mb_per_s = (bytes - mark->bytes) / dt / 1e6;
    }
    mark = NvlinkMark{now, bytes};
  }
  for (const auto& m : n.mig) {
    MigSample ms;
    ms.gpu_instance = m.gpu_instance;
    for (const auto& inst : g.mig.instances) {
      if (inst.gpu_instance == m.gpu_instance) {
        ms.profile = inst.profile;
        ms.uuid = inst.uuid;
      }
    }
    ms.memory_used_mib = d(m.memory_used_bytes, 1.0 / 1048576);
    ms.memory_total_mib = d(m.memory_total_bytes, 1.0 / 1048576);
    s.mig.push_back(std::move(ms));
  }
  return s;
}

GpuSample Sampler::amd(const topology::Gpu& g) const {
  GpuSample s;
  s.gpu = g.index;
  const discover::Tree tree(root_, nullptr);
  const std::string dir = "sys/bus/pci/devices/" + g.pci.address + "/";
  auto num = [&](const std::string& rel) -> std::optional<double> {
    const auto v = tree.integer(dir + rel);
    return v && *v >= 0 ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  };
  s.gpu_util = num("gpu_busy_percent");
  s.mem_copy_util = num("mem_busy_percent");
  if (const auto v = num("mem_info_vram_used")) s.memory_used_mib = *v / 1048576;
  if (const auto v = num("mem_info_vram_total")) s.memory_total_mib = *v / 1048576;
  for (const auto& hw : tree.list(dir + "hwmon")) {
    const std::string h = "hwmon/" + hw + "/";
    if (const auto t = num(h + "temp1_input")) s.temperature_c = *t / 1000;  // millidegrees
    // microwatts; newer kernels name the instantaneous reading power1_input
    if (const auto p = num(h + "power1_average")) {
      s.power_w = *p / 1e6;
    } else if (const auto pi = num(h + "power1_input")) {
      s.power_w = *pi / 1e6;
    }
    break;
  }
  // pp_dpm_sclk lists the clock levels and marks the current one with '*': "1: 1700Mhz *".
  auto current_level = [&](const std::string& rel) -> std::optional<double> {
    const auto text = tree.text(dir + rel);
    if (!text) return std::nullopt;
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find('*') == std::string::npos) continue;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) return std::nullopt;
      const double mhz = std::atof(line.c_str() + colon + 1);
      return mhz > 0 ? std::optional<double>(mhz) : std::nullopt;
    }
    return std::nullopt;
  };
  s.sm_clock_mhz = current_level("pp_dpm_sclk");
  s.mem_clock_mhz = current_level("pp_dpm_mclk");
  s.ok = s.gpu_util.has_value() || s.memory_used_mib.has_value();
  if (!s.ok) s.error = "no amdgpu counters in sysfs";
  return s;
}

}  // namespace gpuorch::telemetry
