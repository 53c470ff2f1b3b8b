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
      r.gpus.push_back(nvidia(g, static_cast<unsigned>(nvml_index_[i])));
    } else {
      GpuSample s;
      s.gpu = g.index;
      s.error = nvml_ ? "not known to NVML" : "NVML not available";
      r.gpus.push_back(s);
    }
  }
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

GpuSample Sampler::nvidia(const topology::Gpu& g, unsigned nvml_index) {
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
