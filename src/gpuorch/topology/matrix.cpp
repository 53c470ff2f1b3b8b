#include "gpuorch/topology/matrix.hpp"

#include <fmt/format.h>

namespace gpuorch::topology {

std::string cpu_affinity(const Host& host, const Gpu& gpu) {
  IdSet cpus = gpu.local_cpus;
  if (!host.online_cpus.empty()) cpus = intersect(cpus, host.online_cpus);
  if (cpus.empty() && gpu.numa_node >= 0) {
    for (const auto& n : host.numa_nodes) {
      if (n.id == gpu.numa_node) cpus = n.cpus;
    }
  }
  return cpus.empty() ? "N/A" : format_id_list(cpus);
}

std::string numa_affinity(const Host& host, const Gpu& gpu) {
  if (gpu.numa_node >= 0) return std::to_string(gpu.numa_node);
  // numa_node -1 (VMs, single-node hosts): the nodes whose CPUs the device is local to.
  IdSet nodes;
  for (const auto& n : host.numa_nodes) {
    if (!intersect(n.cpus, gpu.local_cpus).empty()) nodes.push_back(n.id);
  }
  return nodes.empty() ? "N/A" : format_id_list(nodes);
}

std::string render_matrix(const Host& host) {
  std::string out;
  for (const auto& note : host.notes) out += "note: " + note + '\n';
  if (!host.notes.empty()) out += '\n';
  const std::size_t n = host.device_count();
  if (n > 0) {
    out += '\t';
    for (std::size_t i = 0; i < n; ++i) out += host.device_name(i) + '\t';
    out += "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
    for (std::size_t a = 0; a < n; ++a) {
      out += host.device_name(a);
      for (std::size_t b = 0; b < n; ++b) {
        std::string cell = "X";
        if (a != b) {
          const Link* l = host.link(a, b);
          cell = l ? to_string(l->path, l->nvlinks) : "SYS";
        }
        out += fmt::format("\t {} ", cell);
      }
      if (a < host.gpus.size()) {
        const Gpu& g = host.gpus[a];
        out += fmt::format("\t{}\t{}\tN/A", cpu_affinity(host, g), numa_affinity(host, g));
      }
      out += '\n';
    }
    out += "\nLegend:\n\n";
    out += "  X    = Self\n";
    out +=
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
        "nodes (e.g., QPI/UPI)\n";
    out +=
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node\n";
    out +=
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n";
    out +=
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
        "Bridge)\n";
    out += "  PIX  = Connection traversing at most a single PCIe bridge\n";
    out += "  NV#  = Connection traversing a bonded set of # NVLinks\n";
    out += "  XGMI = Connection traversing AMD xGMI (Infinity Fabric) links\n";
    if (!host.nics.empty()) {
      out += "\nNIC Legend:\n\n";
      for (std::size_t i = 0; i < host.nics.size(); ++i) {
        out += fmt::format("  NIC{}: {}\n", i, host.nics[i].name);
      }
    }
  }
  bool any_mig = false;
  for (const auto& g : host.gpus) any_mig = any_mig || g.mig.enabled;
  if (any_mig) {
    out += "\nMIG instances:\n\n";
    for (const auto& g : host.gpus) {
      if (!g.mig.enabled) continue;
      for (const auto& m : g.mig.instances) {
        out += fmt::format("  GPU{} GI {} CI {}: {}{}\n", g.index, m.gpu_instance,
                           m.compute_instance, m.profile.empty() ? "unknown profile" : m.profile,
                           m.uuid.empty() ? "" : "  " + m.uuid);
      }
    }
  }
  if (!out.empty() && out.back() == '\n' && n > 0) out += '\n';
  out += fmt::format("NUMA nodes ({} CPUs{}):\n\n", host.logical_cpus,
                     host.packages > 0 ? fmt::format(", sockets: {}", host.packages) : "");
  for (const auto& node : host.numa_nodes) {
    out += fmt::format("  node {}: CPUs {}, {} MiB\n", node.id, format_id_list(node.cpus),
                       node.memory_mib);
  }
  return out;
}

}  // namespace gpuorch::topology
