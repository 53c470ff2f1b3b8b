#include "gpuorch/discover/discover.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <filesystem>

#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/cpus_sysfs.hpp"
#include "gpuorch/discover/devices.hpp"
#include "gpuorch/discover/pci.hpp"
#include "gpuorch/topology/links.hpp"

namespace gpuorch::discover {
namespace fs = std::filesystem;
namespace {

struct Placement {
  topology::PciLocation pci;
  PciAttributes attr;
  bool present = false;
};

Placement place(const Tree& tree, const HwlocTopology* hw, const std::string& address,
                const std::string& what) {
  Placement p;
  p.pci.address = address;
  if (!tree.exists("sys/bus/pci/devices/" + address)) {
    tree.problem("sys/bus/pci/devices/" + address, what + " is not in sysfs");
    return p;
  }
  p.present = true;
  p.attr = pci_attributes(tree, address);
  if (hw) {
    if (auto loc = hw->pci(address)) p.pci = std::move(*loc);
  }
  if (!p.pci.known) p.pci = pci_location_sysfs(tree, address);
  if (p.attr.local_cpus.empty() && hw) p.attr.local_cpus = hw->local_cpus(address);
  return p;
}

std::string hostname(const Tree& tree) {
  if (auto h = tree.line("proc/sys/kernel/hostname")) return *h;
  if (tree.live()) {
    std::array<char, 256> buf{};
    if (gethostname(buf.data(), buf.size() - 1) == 0) return buf.data();
  }
  return {};
}

}  // namespace

Discovery discover_host(const Options& options) {
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) {
    base::fail_input(options.root, 0, "not a directory");
  }
  if (!fs::is_directory(fs::path(options.root) / "sys", ec)) {
    base::fail_input(options.root, 0, "not a recorded sysfs tree (no sys/ in it)");
  }
  Diagnostics diag;
  const Tree tree(options.root, &diag);
  Discovery out;
  topology::Host& host = out.host;
  host.hostname = hostname(tree);
  host.machine = tree.line("sys/class/dmi/id/product_name").value_or("");
  read_cpus_sysfs(tree, host);

  std::unique_ptr<HwlocTopology> hw;
  std::string why;
  if (tree.live()) {
    hw = HwlocTopology::live(why);
    if (!hw) host.notes.push_back("hwloc: " + why + "; CPUs and PCI paths read from sysfs");
  } else if (tree.exists("hwloc.xml")) {
    hw = HwlocTopology::from_xml(tree.absolute("hwloc.xml").string(), why);
    if (!hw) tree.problem("hwloc.xml", why + "; CPUs and PCI paths read from sysfs instead");
  } else {
    host.notes.push_back("no hwloc.xml in the recorded tree: CPUs and PCI paths read from sysfs");
  }
  if (hw) hw->fill_cpus(host);

  std::string nvml_why = "disabled (--no-nvml)";
  if (options.use_nvml) {
    if (tree.live()) {
      out.nvml = open_live_nvml(options.nvml_library, nvml_why);
    } else if (tree.exists("nvml.json")) {
      out.nvml =
          open_recorded_nvml(tree.absolute("nvml.json").string(), tree.display("nvml.json"), diag);
      if (!out.nvml) nvml_why = "the recorded nvml.json is unusable";
    } else {
      nvml_why = "no nvml.json in the recorded tree";
    }
  }
  std::vector<topology::DirectLink> direct;
  find_nvidia_gpus(tree, out.nvml.get(), host, direct);
  const std::size_t nvidia = host.gpus.size();
  find_amd_gpus(tree, host, direct);
  find_rdma_nics(tree, host);

  for (auto& g : host.gpus) {
    Placement p = place(tree, hw.get(), g.pci.address, fmt::format("GPU{}", g.index));
    g.pci = std::move(p.pci);
    g.numa_node = p.attr.numa_node;
    g.local_cpus = std::move(p.attr.local_cpus);
    g.pcie = p.attr.link;
    g.pci_class = p.attr.pci_class;
    if (p.attr.device) g.pci_device_id = p.attr.device;
    if (g.model.empty()) g.model = fmt::format("NVIDIA [10de:{:04x}]", g.pci_device_id);
  }
  for (auto& n : host.nics) {
    Placement p = place(tree, hw.get(), n.pci.address, n.name);
    n.pci = std::move(p.pci);
    n.numa_node = p.attr.numa_node;
    n.local_cpus = std::move(p.attr.local_cpus);
  }
  topology::compute_links(host, direct);

  if (host.gpus.empty()) {
    host.notes.push_back(fmt::format(
        "no GPU found: NVML {}; no NVIDIA GPU in /proc/driver/nvidia or sysfs; no AMD GPU in "
        "/sys/class/drm",
        out.nvml ? "reports none" : "not available (" + nvml_why + ")"));
  } else if (nvidia > 0 && !out.nvml) {
    host.notes.push_back(fmt::format(
        "NVML not available ({}): NVIDIA GPUs read from {}; memory, compute capability, NVLink "
        "and MIG profiles unknown",
        nvml_why, host.gpus.front().source == "procfs" ? "/proc/driver/nvidia" : "sysfs"));
  }
  if (host.nics.empty()) host.notes.push_back("no RDMA NIC in /sys/class/infiniband");
  out.problems = diag.problems();
  return out;
}

}  // namespace gpuorch::discover
