#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "gpuorch/discover/devices.hpp"
#include "gpuorch/discover/pci.hpp"

namespace gpuorch::discover {
namespace {

// "Model: \t\t NVIDIA H100 80GB HBM3" lines: label, colon, value.
std::map<std::string, std::string> key_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto trim = [](std::string s) {
      const auto b = s.find_first_not_of(" \t\r");
      const auto e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
    };
    out[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  return out;
}

// MIG instances the driver exposes as capability files: .../gpu<minor>/mig/gi<G>/ci<C>/access.
std::vector<topology::MigInstance> procfs_mig(const Tree& tree, int minor) {
  std::vector<topology::MigInstance> out;
  const std::string dir = fmt::format("proc/driver/nvidia/capabilities/gpu{}/mig/", minor);
  for (const auto& gi : tree.list(dir)) {
    if (gi.rfind("gi", 0) != 0) continue;
    const int g = std::atoi(gi.c_str() + 2);
    for (const auto& ci : tree.list(dir + gi)) {
      if (ci.rfind("ci", 0) != 0) continue;
      topology::MigInstance m;
      m.gpu_instance = g;
      m.compute_instance = std::atoi(ci.c_str() + 2);
      out.push_back(m);
    }
  }
  return out;
}

std::string driver_from_procfs(const Tree& tree) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Release Build ..."
  const auto l = tree.line("proc/driver/nvidia/version");
  if (!l) return {};
  const std::size_t at = l->find("Kernel Module");
  if (at == std::string::npos) return {};
  std::istringstream in(l->substr(at + 13));
  std::string v;
  in >> v;
  return v;
}

void from_nvml(const Tree& tree, Nvml& nvml, topology::Host& host,
               std::vector<topology::DirectLink>& links) {
  host.driver_version = nvml.driver_version();
  host.cuda_driver_version = nvml.cuda_driver_version();
  const auto devices = nvml.devices();
  std::map<std::string, int> by_bus;
  const std::size_t first = host.gpus.size();
  for (const auto& d : devices) {
    topology::Gpu g;
    g.index = static_cast<int>(host.gpus.size());
    g.vendor = topology::Vendor::kNvidia;
    g.model = d.name;
    g.uuid = d.uuid;
    const auto addr = normalize_pci_address(d.pci_bus_id);
    if (!addr) {
      tree.problem(nvml.source(),
                   fmt::format("GPU {}: PCI bus id '{}' is malformed", d.index, d.pci_bus_id));
      continue;
    }
    g.pci.address = *addr;
    g.memory_mib = static_cast<std::int64_t>(d.memory_total_bytes >> 20);
    g.cc_major = d.cc_major;
    g.cc_minor = d.cc_minor;
    g.family = nvidia_family(d.cc_major, d.cc_minor);
    g.minor = d.minor_number;
    for (const auto& l : d.nvlinks) {
      if (!l.active) continue;
      ++g.nvlink_links;
      if (l.remote_type == "switch") ++g.nvswitch_links;
    }
    g.mig.capable = d.mig_current >= 0;
    g.mig.enabled = d.mig_current == 1;
    g.mig.pending_enabled = d.mig_pending == 1;
    for (const auto& m : d.mig_instances) {
      topology::MigInstance mi;
      mi.gpu_instance = m.gpu_instance;
      mi.compute_instance = m.compute_instance;
      mi.uuid = m.uuid;
      mi.memory_mib = static_cast<std::int64_t>(m.memory_total_bytes >> 20);
      mi.attributes = m.attributes;
      // "NVIDIA H100 80GB HBM3 MIG 3g.40gb": the profile follows "MIG ".
      const std::size_t at = m.name.rfind("MIG ");
      if (at != std::string::npos) mi.profile = m.name.substr(at + 4);
      g.mig.instances.push_back(std::move(mi));
    }
    g.source = "nvml";
    by_bus[g.pci.address] = g.index;
    host.gpus.push_back(std::move(g));
  }
  // NVLinks that end in another GPU (no NVSwitch): count them per pair.
  std::size_t k = 0;
  for (const auto& d : devices) {
    if (!normalize_pci_address(d.pci_bus_id)) continue;
    const int self = static_cast<int>(first + k++);
    std::map<int, int> peers;
    for (const auto& l : d.nvlinks) {
      if (!l.active || l.remote_type != "gpu") continue;
      const auto peer = normalize_pci_address(l.remote_pci_bus_id);
      if (peer && by_bus.count(*peer)) ++peers[by_bus[*peer]];
    }
    for (const auto& [peer, count] : peers) {
      // Each link is seen from both ends; keep the pair once.
      if (peer > self) links.push_back({self, peer, topology::Path::kNvLink, count, 0, 0});
    }
  }
}

}  // namespace

std::string nvidia_family(int major, int minor) {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return "ampere";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    default:
      return "undefined";
  }
}

void find_nvidia_gpus(const Tree& tree, Nvml* nvml, topology::Host& host,
                      std::vector<topology::DirectLink>& links) {
  if (nvml) {
    from_nvml(tree, *nvml, host, links);
    return;
  }
  // Without NVML: the driver's procfs entries, one directory per GPU named by PCI address.
  const std::string gpus_dir = "proc/driver/nvidia/gpus/";
  std::vector<std::string> addresses;
  for (const auto& name : tree.list(gpus_dir)) {
    if (const auto a = normalize_pci_address(name)) {
      addresses.push_back(*a);
    } else {
      tree.problem(gpus_dir + name, "not a PCI address");
    }
  }
  const bool procfs = !addresses.empty();
  if (!procfs) {
    // Not even the driver: NVIDIA display/3D controllers in sysfs.
    for (const auto& name : tree.list("sys/bus/pci/devices")) {
      const std::string dir = "sys/bus/pci/devices/" + name + "/";
      const auto vendor = tree.integer(dir + "vendor");
      const auto klass = tree.integer(dir + "class");
      if (vendor && *vendor == 0x10de && klass &&
          ((*klass >> 8) == 0x0300 || (*klass >> 8) == 0x0302)) {
        if (const auto a = normalize_pci_address(name)) addresses.push_back(*a);
      }
    }
  }
  std::sort(addresses.begin(), addresses.end());
  if (procfs) host.driver_version = driver_from_procfs(tree);
  for (const auto& addr : addresses) {
    topology::Gpu g;
    g.index = static_cast<int>(host.gpus.size());
    g.vendor = topology::Vendor::kNvidia;
    g.pci.address = addr;
    g.source = procfs ? "procfs" : "sysfs";
    if (procfs) {
      const std::string info = gpus_dir + addr + "/information";
      if (const auto text = tree.text(info, true)) {
        auto kv = key_values(*text);
        g.model = kv["Model"];
        g.uuid = kv["GPU UUID"];
        if (!kv["Device Minor"].empty()) g.minor = std::atoi(kv["Device Minor"].c_str());
        if (g.model.empty()) tree.problem(info, "no 'Model:' line");
      }
      if (g.minor >= 0) {
        g.mig.instances = procfs_mig(tree, g.minor);
        g.mig.enabled = !g.mig.instances.empty();
        g.mig.capable = g.mig.enabled;
      }
    }
    host.gpus.push_back(std::move(g));
  }
}

bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace gpuorch::discover
