#include "gpuorch/topology/labels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gpuorch/topology/link_scores.hpp"

namespace gpuorch::topology {
namespace {

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Version "550.54.15" split at dots; missing parts are empty.
std::vector<std::string> split_version(const std::string& v) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t dot = v.find('.', start);
    parts.push_back(v.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

void nvidia_labels(const Host& h, const std::vector<const Gpu*>& gpus, Labels& out) {
  const Gpu& g = *gpus.front();
  if (!h.driver_version.empty()) {
    const auto v = split_version(h.driver_version);
    const std::string major = v.size() > 0 ? v[0] : "";
    const std::string minor = v.size() > 1 ? v[1] : "";
    const std::string rev = v.size() > 2 ? v[2] : "";
    out.emplace_back("nvidia.com/cuda.driver-version.full", label_value(h.driver_version));
    out.emplace_back("nvidia.com/cuda.driver-version.major", major);
    out.emplace_back("nvidia.com/cuda.driver-version.minor", minor);
    out.emplace_back("nvidia.com/cuda.driver-version.revision", rev);
    // Deprecated names that older selectors still use.
    out.emplace_back("nvidia.com/cuda.driver.major", major);
    out.emplace_back("nvidia.com/cuda.driver.minor", minor);
    out.emplace_back("nvidia.com/cuda.driver.rev", rev);
  }
  if (h.cuda_driver_version > 0) {
    const int major = h.cuda_driver_version / 1000;
    const int minor = (h.cuda_driver_version % 1000) / 10;
    out.emplace_back("nvidia.com/cuda.runtime-version.full", fmt::format("{}.{}", major, minor));
    out.emplace_back("nvidia.com/cuda.runtime-version.major", std::to_string(major));
    out.emplace_back("nvidia.com/cuda.runtime-version.minor", std::to_string(minor));
    out.emplace_back("nvidia.com/cuda.runtime.major", std::to_string(major));
    out.emplace_back("nvidia.com/cuda.runtime.minor", std::to_string(minor));
  }
  if (g.cc_major >= 0) {
    out.emplace_back("nvidia.com/gpu.compute.major", std::to_string(g.cc_major));
    out.emplace_back("nvidia.com/gpu.compute.minor", std::to_string(g.cc_minor));
  }
  out.emplace_back("nvidia.com/gpu.count", std::to_string(gpus.size()));
  out.emplace_back("nvidia.com/gpu.family", g.family.empty() ? "undefined" : g.family);
  if (!h.machine.empty()) out.emplace_back("nvidia.com/gpu.machine", label_value(h.machine));
  if (g.memory_mib > 0) out.emplace_back("nvidia.com/gpu.memory", std::to_string(g.memory_mib));
  // PCI class 0x0300xx is a VGA (display) controller, 0x0302xx a 3D (compute) controller.
  out.emplace_back("nvidia.com/gpu.mode", (g.pci_class >> 8) == 0x0300 ? "graphics" : "compute");
  out.emplace_back("nvidia.com/gpu.product", label_value(g.model));
  out.emplace_back("nvidia.com/gpu.replicas", "1");
  out.emplace_back("nvidia.com/gpu.sharing-strategy", "none");
  bool mig_capable = false;
  for (const Gpu* x : gpus) mig_capable = mig_capable || x->mig.capable;
  out.emplace_back("nvidia.com/mig.capable", mig_capable ? "true" : "false");
  out.emplace_back("nvidia.com/mps.capable", "false");
}

// The node labeller's two forms: amd.com/gpu.<kind>=<value> when every GPU agrees, otherwise
// amd.com/gpu.<kind>.<value>=<count>; the beta.amd.com/ form always has the counted key.
void amd_property(const std::string& kind, const std::vector<std::string>& values, Labels& out) {
  std::map<std::string, int> counts;
  for (const auto& v : values) {
    if (!v.empty()) ++counts[v];
  }
  if (counts.empty()) return;
  for (const auto& [v, n] : counts) {
    out.emplace_back(fmt::format("beta.amd.com/gpu.{}.{}", kind, v), std::to_string(n));
    if (counts.size() > 1) {
      out.emplace_back(fmt::format("amd.com/gpu.{}.{}", kind, v), std::to_string(n));
    }
  }
  if (counts.size() == 1) {
    out.emplace_back(fmt::format("amd.com/gpu.{}", kind), counts.begin()->first);
    out.emplace_back(fmt::format("beta.amd.com/gpu.{}", kind), counts.begin()->first);
  }
}

void amd_labels(const Host& h, const std::vector<const Gpu*>& gpus, Labels& out) {
  std::vector<std::string> family, device, product, vram, cu, simd;
  for (const Gpu* g : gpus) {
    family.push_back(g->family);
    device.push_back(fmt::format("{:04x}", g->pci_device_id));
    product.push_back(label_value(g->model, '_'));
    // Rounded to GiB with the "G" suffix, as the labeller writes it.
    vram.push_back(g->memory_mib > 0 ? fmt::format("{}G", (g->memory_mib + 512) / 1024) : "");
    cu.push_back(g->compute_units > 0 ? std::to_string(g->compute_units) : "");
    simd.push_back(g->simd_count > 0 ? std::to_string(g->simd_count) : "");
  }
  amd_property("family", family, out);
  amd_property("device-id", device, out);
  amd_property("product-name", product, out);
  amd_property("vram", vram, out);
  amd_property("cu-count", cu, out);
  amd_property("simd-count", simd, out);
  if (!h.driver_version.empty()) {
    out.emplace_back("amd.com/gpu.driver-version", label_value(h.driver_version));
  }
  out.emplace_back("amd.com/compute-partitioning-supported", "false");
  out.emplace_back("amd.com/memory-partitioning-supported", "false");
}

// The weakest GPU-to-GPU connection: what a job spanning every GPU of the node gets.
std::string gpu_interconnect(const Host& h) {
  const Link* weakest = nullptr;
  for (const auto& l : h.links) {
    if (static_cast<std::size_t>(l.b) >= h.gpus.size()) continue;
    if (!weakest || l.path > weakest->path ||
        (l.path == weakest->path && l.nvlinks < weakest->nvlinks)) {
      weakest = &l;
    }
  }
  return weakest ? to_string(weakest->path, weakest->nvlinks) : "";
}

}  // namespace

std::string label_value(const std::string& text, char space) {
  std::string v;
  for (char c : text) {
    if (c == ' ') {
      v += space;
    } else {
      v += (alnum(c) || c == '-' || c == '_' || c == '.') ? c : '-';
    }
  }
  if (v.size() > 63) v.resize(63);
  while (!v.empty() && !alnum(v.back())) v.pop_back();
  std::size_t start = 0;
  while (start < v.size() && !alnum(v[start])) ++start;
  return v.substr(start);
}

std::string short_model(const std::string& name) {
  std::string n = name;
  for (const char* prefix : {"NVIDIA ", "Tesla ", "AMD ", "Radeon "}) {
    const std::string p = prefix;
    if (n.rfind(p, 0) == 0) n = n.substr(p.size());
  }
  return label_value(n);
}

Labels node_labels(const Host& h) {
  Labels out;
  std::vector<const Gpu*> nvidia, amd;
  for (const auto& g : h.gpus) (g.vendor == Vendor::kNvidia ? nvidia : amd).push_back(&g);
  if (!nvidia.empty()) nvidia_labels(h, nvidia, out);
  if (!amd.empty()) amd_labels(h, amd, out);
  out.emplace_back("gpuorch.io/cpu.count", std::to_string(h.logical_cpus));
  out.emplace_back("gpuorch.io/numa.nodes", std::to_string(h.numa_nodes.size()));
  out.emplace_back("gpuorch.io/gpu.count", std::to_string(h.gpus.size()));
  if (!h.gpus.empty()) {
    out.emplace_back("gpuorch.io/gpu.vendor", to_string(h.gpus.front().vendor));
    out.emplace_back("gpuorch.io/gpu.model", short_model(h.gpus.front().model));
    const std::string ic = gpu_interconnect(h);
    if (!ic.empty()) out.emplace_back("gpuorch.io/gpu.interconnect", ic);
    int mig_gpus = 0;
    for (const auto& g : h.gpus) mig_gpus += g.mig.enabled ? 1 : 0;
    if (mig_gpus > 0) out.emplace_back("gpuorch.io/mig.enabled-gpus", std::to_string(mig_gpus));
  }
  if (!h.nics.empty()) {
    double rate = 0;
    std::set<std::string> layers;
    for (const auto& n : h.nics) {
      for (const auto& p : n.ports) {
        rate = std::max(rate, p.rate_gbps);
        if (!p.link_layer.empty()) layers.insert(p.link_layer == "InfiniBand" ? "ib" : "roce");
      }
    }
    out.emplace_back("gpuorch.io/rdma.nics", std::to_string(h.nics.size()));
    if (rate > 0) out.emplace_back("gpuorch.io/rdma.rate-gbps", fmt::format("{}", rate));
    if (layers.size() == 1) out.emplace_back("gpuorch.io/rdma.link-layer", *layers.begin());
  }
  std::sort(out.begin(), out.end());
  return out;
}

cluster::NodeSpec node_spec(const Host& h) {
  cluster::NodeSpec spec;
  spec.name = h.hostname;
  spec.cpu_milli = static_cast<std::int64_t>(h.logical_cpus) * 1000;
  spec.memory_mib = h.memory_mib;
  spec.gpu_count = static_cast<int>(h.gpus.size());
  if (!h.gpus.empty()) {
    spec.gpu_model = short_model(h.gpus.front().model);
    spec.gpu_memory_mib = h.gpus.front().memory_mib;
    // The YAML inventory adds the same label, so both routes give one cluster::Node.
    spec.labels.emplace_back("gpu-model", spec.gpu_model);
  }
  for (auto& kv : node_labels(h)) spec.labels.push_back(std::move(kv));
  const std::size_t n = h.gpus.size();
  bool known = false;
  for (std::size_t a = 0; a < n && !known; ++a) {
    for (std::size_t b = a + 1; b < n && !known; ++b) known = h.link(a, b) != nullptr;
  }
  if (n >= 2 && known) spec.gpu_links = gpu_link_scores(h);
  return spec;
}

std::string inventory_yaml(const cluster::NodeSpec& spec) {
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + '"';
  };
  std::string out = "# gpuorch inventory (docs/inputs.md), from `gpuorch topo --node-spec`\n";
  out += "nodes:\n";
  out +=
      fmt::format("  - name: {}\n    count: 1\n", quoted(spec.name.empty() ? "host" : spec.name));
  out += fmt::format("    cpu_milli: {}\n    memory_mib: {}\n", spec.cpu_milli, spec.memory_mib);
  if (spec.gpu_count > 0) {
    out += fmt::format("    gpu:\n      model: {}\n      count: {}\n", quoted(spec.gpu_model),
                       spec.gpu_count);
    if (spec.gpu_memory_mib > 0) out += fmt::format("      memory_mib: {}\n", spec.gpu_memory_mib);
    const auto n = static_cast<std::size_t>(spec.gpu_count);
    if (spec.gpu_links.size() == n * n) {
      out += "      links:  # GPU link scores (docs/topology.md)\n";
      for (std::size_t a = 0; a < n; ++a) {
        std::vector<int> row;
        for (std::size_t b = 0; b < n; ++b) row.push_back(spec.gpu_links[a * n + b]);
        out += fmt::format("        - [{}]\n", fmt::join(row, ", "));
      }
    }
  }
  bool header = false;
  for (const auto& [k, v] : spec.labels) {
    if (k == "gpu-model") continue;  // the loader adds it from gpu.model
    if (!header) out += "    labels:\n";
    header = true;
    out += fmt::format("      {}: {}\n", k, quoted(v));
  }
  return out;
}

}  // namespace gpuorch::topology
