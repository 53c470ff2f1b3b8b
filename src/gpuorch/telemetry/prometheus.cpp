#include "gpuorch/telemetry/prometheus.hpp"

#include <fmt/format.h>

#include "gpuorch/topology/matrix.hpp"

namespace gpuorch::telemetry {
namespace {

// DCGM shows the bus id with an 8-digit domain: "00000000:19:00.0".
std::string dcgm_bus_id(const std::string& address) {
  std::string upper;
  for (char c : address) upper += static_cast<char>(c >= 'a' && c <= 'f' ? c - 32 : c);
  return "0000" + upper;
}

class Writer {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const char* name, const std::string& labels, double value) {
    out_ += fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  void plain(const char* name, double value) { out_ += fmt::format("{} {}\n", name, value); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string render_sample_age(double seconds) {
  return fmt::format(
      "# HELP gpuorch_exporter_sample_age_seconds Seconds since the latest reading.\n"
      "# TYPE gpuorch_exporter_sample_age_seconds gauge\n"
      "gpuorch_exporter_sample_age_seconds {:.3f}\n",
      seconds);
}

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string render_metrics(const topology::Host& host, const Round& round,
                           const ExporterHealth& health) {
  Writer w;
  std::vector<std::string> labels;
  for (const auto& g : host.gpus) {
    const std::string device = g.vendor == topology::Vendor::kNvidia
                                   ? fmt::format("nvidia{}", g.minor >= 0 ? g.minor : g.index)
                                   : fmt::format("card{}", g.minor >= 0 ? g.minor : g.index);
    labels.push_back(fmt::format(
        "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"{}\",modelName=\"{}\",Hostname=\"{}\"",
        g.index, escape_label(g.uuid), dcgm_bus_id(g.pci.address), device, escape_label(g.model),
        escape_label(host.hostname)));
  }
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
    std::optional<double> GpuSample::*field;
    double scale;
  };
  const Metric metrics[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", &GpuSample::gpu_util, 1},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       &GpuSample::mem_copy_util, 1},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       &GpuSample::memory_used_mib, 1},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", &GpuSample::temperature_c, 1},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", &GpuSample::power_w, 1},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ).", &GpuSample::energy_mj, 1},
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", &GpuSample::sm_clock_mhz,
       1},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
       &GpuSample::mem_clock_mhz, 1},
      {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gauge", "PCIe Tx throughput (in KB/s).",
       &GpuSample::pcie_tx_kbps, 1},
      {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "gauge", "PCIe Rx throughput (in KB/s).",
       &GpuSample::pcie_rx_kbps, 1},
      {"gpuorch_nvlink_tx_bytes_total", "counter", "NVLink data bytes sent, all links.",
       &GpuSample::nvlink_tx_bytes, 1},
      {"gpuorch_nvlink_rx_bytes_total", "counter", "NVLink data bytes received, all links.",
       &GpuSample::nvlink_rx_bytes, 1},
  };
  for (const auto& m : metrics) {
    bool any = false;
    for (const auto& s : round.gpus) any = any || (s.*m.field).has_value();
    if (!any) continue;
    w.family(m.name, m.type, m.help);
    for (const auto& s : round.gpus) {
      if (const auto& v = s.*m.field; v && static_cast<std::size_t>(s.gpu) < labels.size()) {
        w.sample(m.name, labels[static_cast<std::size_t>(s.gpu)], *v * m.scale);
      }
    }
  }
  // FB_FREE is derived: DCGM reports it, NVML gives total and used.
  bool any_free = false;
  for (const auto& s : round.gpus) any_free = any_free || (s.memory_used_mib && s.memory_total_mib);
  if (any_free) {
    w.family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).");
    for (const auto& s : round.gpus) {
      if (s.memory_used_mib && s.memory_total_mib &&
          static_cast<std::size_t>(s.gpu) < labels.size()) {
        w.sample("DCGM_FI_DEV_FB_FREE", labels[static_cast<std::size_t>(s.gpu)],
                 *s.memory_total_mib - *s.memory_used_mib);
      }
    }
  }

  if (!host.gpus.empty()) {
    w.family("gpuorch_gpu_info", "gauge",
             "One per GPU: identity and placement (vendor, NUMA node, CPU affinity).");
    for (std::size_t i = 0; i < host.gpus.size(); ++i) {
      const auto& g = host.gpus[i];
      w.sample(
          "gpuorch_gpu_info",
          fmt::format("{},vendor=\"{}\",numa_node=\"{}\",cpu_affinity=\"{}\",mig=\"{}\"", labels[i],
                      topology::to_string(g.vendor), topology::numa_affinity(host, g),
                      topology::cpu_affinity(host, g), g.mig.enabled ? "enabled" : "disabled"),
          1);
    }
    w.family("gpuorch_gpu_sample_ok", "gauge", "1 when the GPU's latest reading succeeded.");
    for (const auto& s : round.gpus) {
      if (static_cast<std::size_t>(s.gpu) < labels.size()) {
        w.sample("gpuorch_gpu_sample_ok", labels[static_cast<std::size_t>(s.gpu)], s.ok ? 1 : 0);
      }
    }
  }
  if (!host.links.empty()) {
    w.family(
        "gpuorch_topology_link", "gauge",
        "One per device pair: the connection (nvidia-smi topo -m vocabulary); value = NVLinks.");
    for (const auto& l : host.links) {
      w.sample("gpuorch_topology_link",
               fmt::format("a=\"{}\",b=\"{}\",path=\"{}\",Hostname=\"{}\"",
                           host.device_name(static_cast<std::size_t>(l.a)),
                           host.device_name(static_cast<std::size_t>(l.b)),
                           topology::to_string(l.path, l.nvlinks), escape_label(host.hostname)),
               l.nvlinks);
    }
  }
  if (!host.nics.empty()) {
    w.family("gpuorch_nic_port_rate_gbps", "gauge", "RDMA port rate (Gb/s); state in labels.");
    for (const auto& n : host.nics) {
      for (const auto& p : n.ports) {
        w.sample(
            "gpuorch_nic_port_rate_gbps",
            fmt::format("nic=\"{}\",port=\"{}\",state=\"{}\",link_layer=\"{}\",Hostname=\"{}\"",
                        escape_label(n.name), p.port, escape_label(p.state),
                        escape_label(p.link_layer), escape_label(host.hostname)),
            p.rate_gbps);
      }
    }
  }
  w.family("gpuorch_exporter_sample_duration_seconds", "gauge",
           "How long the latest reading of every GPU took.");
  w.plain("gpuorch_exporter_sample_duration_seconds", round.duration_s);
  w.family("gpuorch_exporter_rounds_total", "counter", "Readings taken since start.");
  w.plain("gpuorch_exporter_rounds_total", static_cast<double>(health.rounds));
  w.family("gpuorch_exporter_gpu_errors_total", "counter", "Failed GPU readings since start.");
  w.plain("gpuorch_exporter_gpu_errors_total", static_cast<double>(health.gpu_errors));
  return w.take();
}

}  // namespace gpuorch::telemetry
