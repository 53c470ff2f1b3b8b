#include "gpuorch/topology/links.hpp"

#include <algorithm>

namespace gpuorch::topology {
namespace {

const PciLocation& location(const Host& h, std::size_t i) {
  return i < h.gpus.size() ? h.gpus[i].pci : h.nics[i - h.gpus.size()].pci;
}

int numa(const Host& h, std::size_t i) {
  return i < h.gpus.size() ? h.gpus[i].numa_node : h.nics[i - h.gpus.size()].numa_node;
}

}  // namespace

void compute_links(Host& host, const std::vector<DirectLink>& direct) {
  host.links.clear();
  const std::size_t n = host.device_count();
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      Link l;
      l.a = static_cast<int>(a);
      l.b = static_cast<int>(b);
      l.pcie = pcie_path(location(host, a), numa(host, a), location(host, b), numa(host, b));
      l.path = l.pcie;
      if (b < host.gpus.size()) {
        // Through NVSwitches every pair gets the smaller of the two GPUs' switch-port counts, as
        // nvidia-smi reports NV18 between every pair of an HGX H100 board.
        l.nvlinks = std::min(host.gpus[a].nvswitch_links, host.gpus[b].nvswitch_links);
        for (const auto& d : direct) {
          const bool match =
              (static_cast<std::size_t>(d.gpu_a) == a && static_cast<std::size_t>(d.gpu_b) == b) ||
              (static_cast<std::size_t>(d.gpu_a) == b && static_cast<std::size_t>(d.gpu_b) == a);
          if (!match) continue;
          if (d.kind == Path::kNvLink) l.nvlinks += d.count;
          if (d.kind == Path::kXgmi) {
            l.xgmi_weight = d.weight;
            l.xgmi_bandwidth_mbps = d.bandwidth_mbps;
          }
        }
        if (l.xgmi_weight > 0) l.path = Path::kXgmi;
        if (l.nvlinks > 0) l.path = Path::kNvLink;
      }
      host.links.push_back(l);
    }
  }
}

}  // namespace gpuorch::topology
