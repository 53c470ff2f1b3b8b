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
  void raw(const std::string& text) { out_ += text; }
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

namespace {

// dcgm-exporter's labels of one entity (a GPU, or one MIG instance of it), in its order: gpu,
// UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], Hostname, then the workload's
// container, namespace, pod, then label-type fields (DCGM_FI_DRIVER_VERSION).
std::string entity_labels(const topology::Host& host, const topology::Gpu& g, const MigSample* mig,
                          const PodRef* pod, const std::string& attributes) {
  const std::string device = g.vendor == topology::Vendor::kNvidia
                                 ? fmt::format("nvidia{}", g.minor >= 0 ? g.minor : g.index)
                                 : fmt::format("card{}", g.minor >= 0 ? g.minor : g.index);
  std::string out = fmt::format(
      "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"{}\",modelName=\"{}\"", g.index,
      escape_label(g.uuid), dcgm_bus_id(g.pci.address), device, escape_label(g.model));
  if (mig != nullptr) {
    out += fmt::format(",GPU_I_PROFILE=\"{}\",GPU_I_ID=\"{}\"", escape_label(mig->profile),
                       mig->gpu_instance);
  }
  out += fmt::format(",Hostname=\"{}\"", escape_label(host.hostname));
  if (pod != nullptr) {
    out += fmt::format(",container=\"{}\",namespace=\"{}\",pod=\"{}\"",
                       escape_label(pod->container), escape_label(pod->ns), escape_label(pod->pod));
  }
  return out + attributes;
}

// The containers holding a device; one empty entry (no pod labels) when none does.
std::vector<const PodRef*> holders(const RenderOptions& o, const std::string& id) {
  std::vector<const PodRef*> out;
  if (const auto it = o.pods.find(id); !id.empty() && it != o.pods.end()) {
    for (const auto& p : it->second) out.push_back(&p);
  }
  if (out.empty()) out.push_back(nullptr);
  return out;
}

}  // namespace

std::string render_metrics(const topology::Host& host, const Round& round,
                           const ExporterHealth& health, const RenderOptions& options) {
  Writer w;
  std::vector<std::string> labels;  // per GPU, for gpuorch's own families
  for (const auto& g : host.gpus) labels.push_back(entity_labels(host, g, nullptr, nullptr, ""));

  std::string attributes;  // label-type fields, on every DCGM series
  for (const auto& c : options.collectors) {
    if (c.type == "label" && c.field->name == "DCGM_FI_DRIVER_VERSION") {
      attributes +=
          fmt::format(",DCGM_FI_DRIVER_VERSION=\"{}\"", escape_label(host.driver_version));
    }
  }
  // Each GPU's DCGM labels, one set per container holding it: the same for every field, so
  // formatted once per round rather than once per series.
  std::vector<std::vector<std::string>> gpu_series_labels(host.gpus.size());
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    const topology::Gpu& g = host.gpus[i];
    const std::string gpu_id =
        options.pods_by_device_name && g.minor >= 0 ? fmt::format("nvidia{}", g.minor) : g.uuid;
    for (const PodRef* p : holders(options, gpu_id)) {
      gpu_series_labels[i].push_back(entity_labels(host, g, nullptr, p, attributes));
    }
  }
  for (const auto& c : options.collectors) {
    const DcgmField& f = *c.field;
    if (f.value == nullptr) continue;  // a label, or no NVML source (docs/telemetry.md says why)
    std::string series;
    for (const auto& s : round.gpus) {
      if (static_cast<std::size_t>(s.gpu) >= host.gpus.size()) continue;
      const topology::Gpu& g = host.gpus[static_cast<std::size_t>(s.gpu)];
      if (const auto& v = s.*f.value) {
        for (const auto& l : gpu_series_labels[static_cast<std::size_t>(s.gpu)]) {
          series += fmt::format("{}{{{}}} {}\n", f.name, l, *v);
        }
      }
      if (f.mig_value == nullptr) continue;
      for (const auto& m : s.mig) {
        const auto& v = m.*f.mig_value;
        if (!v) continue;
        for (const PodRef* p : holders(options, m.uuid)) {
          series +=
              fmt::format("{}{{{}}} {}\n", f.name, entity_labels(host, g, &m, p, attributes), *v);
        }
      }
    }
    // A family no GPU reports is left out, as dcgm-exporter leaves out fields DCGM has no value
    // for (blank values).
    if (series.empty()) continue;
    w.family(std::string(f.name).c_str(), c.type.c_str(), c.help.c_str());
    w.raw(series);
  }
  for (const auto& m :
       std::initializer_list<std::pair<const char*, std::optional<double> GpuSample::*>>{
           {"gpuorch_nvlink_tx_bytes_total", &GpuSample::nvlink_tx_bytes},
           {"gpuorch_nvlink_rx_bytes_total", &GpuSample::nvlink_rx_bytes}}) {
    bool any = false;
    for (const auto& s : round.gpus) any = any || (s.*m.second).has_value();
    if (!any) continue;
    w.family(m.first, "counter",
             m.first == std::string_view("gpuorch_nvlink_tx_bytes_total")
                 ? "NVLink data bytes sent, all links."
                 : "NVLink data bytes received, all links.");
    for (const auto& s : round.gpus) {
      if (const auto& v = s.*m.second; v && static_cast<std::size_t>(s.gpu) < labels.size()) {
        w.sample(m.first, labels[static_cast<std::size_t>(s.gpu)], *v);
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
