// RDMA NICs (InfiniBand and RoCE) from /sys/class/infiniband: ports, state, rate, link layer.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "gpuorch/discover/devices.hpp"
#include "gpuorch/discover/pci.hpp"

namespace gpuorch::discover {
namespace {

// "4: ACTIVE" → "ACTIVE"
std::string after_colon(const std::string& s) {
  const std::size_t c = s.find(':');
  if (c == std::string::npos) return s;
  const std::size_t b = s.find_first_not_of(' ', c + 1);
  return b == std::string::npos ? std::string{} : s.substr(b);
}

}  // namespace

void find_rdma_nics(const Tree& tree, topology::Host& host) {
  auto names = tree.list("sys/class/infiniband");
  std::sort(names.begin(), names.end(), natural_less);
  for (const auto& name : names) {
    const std::string dir = "sys/class/infiniband/" + name + "/";
    const auto real = tree.resolve(dir + "device");
    if (!real) continue;  // not PCI (soft RoCE, ...): no place in the matrix
    const std::string addr = real->substr(real->rfind('/') + 1);
    if (!is_pci_address(addr)) continue;
    topology::Nic nic;
    nic.name = name;
    nic.pci.address = addr;
    nic.node_guid = tree.line(dir + "node_guid").value_or("");
    nic.firmware = tree.line(dir + "fw_ver").value_or("");
    auto ports = tree.list(dir + "ports");
    std::sort(ports.begin(), ports.end(), natural_less);
    for (const auto& p : ports) {
      const std::string pd = dir + "ports/" + p + "/";
      topology::NicPort port;
      char* end = nullptr;
      port.port = static_cast<int>(std::strtol(p.c_str(), &end, 10));
      if (p.empty() || *end != '\0') continue;
      port.state = after_colon(tree.line(pd + "state", true).value_or(""));
      port.phys_state = after_colon(tree.line(pd + "phys_state").value_or(""));
      if (const auto rate = tree.line(pd + "rate", true)) {
        // "400 Gb/sec (4X NDR)"
        port.rate_gbps = std::atof(rate->c_str());
        if (port.rate_gbps <= 0 && rate->find("Gb/sec") == std::string::npos) {
          tree.problem(pd + "rate", "expected '<N> Gb/sec ...', found " + quote_content(*rate));
        }
      }
      port.link_layer = tree.line(pd + "link_layer").value_or("");
      nic.ports.push_back(std::move(port));
    }
    host.nics.push_back(std::move(nic));
  }
}

}  // namespace gpuorch::discover
