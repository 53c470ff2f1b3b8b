#pragma once
// PCI functions as sysfs shows them: address normalisation, ancestry (the bridges above a
// device, from the canonical /sys/devices path) and the attributes discovery needs.
#include <cstdint>
#include <optional>
#include <string>

#include "gpuorch/discover/tree.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::discover {

// "00000000:19:00.0" (NVML), "0000:19:00.0" or "19:00.0" → "0000:19:00.0"; nullopt if malformed.
std::optional<std::string> normalize_pci_address(const std::string& text);
bool is_pci_address(const std::string& text);

struct PciAttributes {
  std::uint32_t vendor = 0, device = 0, pci_class = 0;
  int numa_node = -1;
  topology::IdSet local_cpus;
  topology::PcieLink link;
};

// The device's location from the sysfs path of sys/bus/pci/devices/<address>.
topology::PciLocation pci_location_sysfs(const Tree& tree, const std::string& address);
// Attributes under sys/bus/pci/devices/<address>/; unreadable ones are reported and left unset.
PciAttributes pci_attributes(const Tree& tree, const std::string& address);
// "32.0 GT/s PCIe" → 5 (generation); 0 when unknown.
int pcie_generation(const std::string& speed);

}  // namespace gpuorch::discover
