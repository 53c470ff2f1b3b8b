#pragma once
// CPUs, NUMA nodes and the PCI tree through hwloc: the live host, or the hwloc.xml of a
// recording (what `lstopo --of xml` and `gpuorch topo --record` write).
#include <memory>
#include <optional>
#include <string>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::discover {

class HwlocTopology {
 public:
  // nullopt with `why` set when hwloc cannot load.
  static std::unique_ptr<HwlocTopology> live(std::string& why);
  static std::unique_ptr<HwlocTopology> from_xml(const std::string& path, std::string& why);
  ~HwlocTopology();
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  // Overrides logical_cpus, cores, packages and each NUMA node's CPUs and memory; keeps what
  // sysfs gave for the rest (distances, MemTotal).
  void fill_cpus(topology::Host& host) const;
  // The PCI function's place in hwloc's tree; nullopt when hwloc did not keep it.
  [[nodiscard]] std::optional<topology::PciLocation> pci(const std::string& address) const;
  // The CPUs and NUMA node nearest the PCI function.
  [[nodiscard]] topology::IdSet local_cpus(const std::string& address) const;
  [[nodiscard]] int numa_node(const std::string& address) const;
  // The whole topology as XML (for `topo --record`).
  [[nodiscard]] std::optional<std::string> export_xml() const;

  struct Impl;  // hwloc's handle; public only so the loader in the .cpp can build one

 private:
  explicit HwlocTopology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuorch::discover
