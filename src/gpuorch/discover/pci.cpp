#include "gpuorch/discover/pci.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

namespace gpuorch::discover {
namespace {

bool hex(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> normalize_pci_address(const std::string& text) {
  // [domain:]bus:device.function, hex.
  const std::size_t dot = text.rfind('.');
  const std::size_t c2 = text.rfind(':');
  if (dot == std::string::npos || c2 == std::string::npos || c2 > dot) return std::nullopt;
  const std::size_t c1 = c2 == 0 ? std::string::npos : text.rfind(':', c2 - 1);
  const std::string domain = c1 == std::string::npos ? "0" : text.substr(0, c1);
  const std::string bus = text.substr(c1 == std::string::npos ? 0 : c1 + 1,
                                      c2 - (c1 == std::string::npos ? 0 : c1 + 1));
  const std::string dev = text.substr(c2 + 1, dot - c2 - 1);
  const std::string fn = text.substr(dot + 1);
  if (!hex(domain) || !hex(bus) || !hex(dev) || !hex(fn) || domain.size() > 8 || bus.size() > 2 ||
      dev.size() > 2 || fn.size() > 1) {
    return std::nullopt;
  }
  const unsigned long d = std::strtoul(domain.c_str(), nullptr, 16);
  if (d > 0xffff) return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", d, std::strtoul(bus.c_str(), nullptr, 16),
                     std::strtoul(dev.c_str(), nullptr, 16), std::strtoul(fn.c_str(), nullptr, 16));
}

bool is_pci_address(const std::string& text) {
  const auto n = normalize_pci_address(text);
  return n && *n == text;
}

topology::PciLocation pci_location_sysfs(const Tree& tree, const std::string& address) {
  topology::PciLocation loc;
  loc.address = address;
  const auto real = tree.resolve("sys/bus/pci/devices/" + address);
  if (!real) return loc;
  // sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/.../0000:19:00.0
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start < real->size()) {
    const std::size_t slash = real->find('/', start);
    parts.push_back(
        real->substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.size() < 4 || parts[0] != "sys" || parts[1] != "devices" ||
      parts[2].rfind("pci", 0) != 0 || parts.back() != address) {
    tree.problem(
        "sys/bus/pci/devices/" + address,
        fmt::format("does not lead to a PCI device under sys/devices (leads to {})", *real));
    return loc;
  }
  loc.host_bridge = parts[2];
  for (std::size_t i = 3; i + 1 < parts.size(); ++i) {
    // Virtual layers (e.g. Hyper-V's VMBus ids) are not bridges.
    if (is_pci_address(parts[i])) loc.bridges.push_back(parts[i]);
  }
  loc.known = true;
  return loc;
}

int pcie_generation(const std::string& speed) {
  const double gts = std::atof(speed.c_str());
  if (gts >= 60) return 6;
  if (gts >= 30) return 5;
  if (gts >= 15) return 4;
  if (gts >= 7.5) return 3;
  if (gts >= 4.5) return 2;
  if (gts >= 2) return 1;
  return 0;
}

PciAttributes pci_attributes(const Tree& tree, const std::string& address) {
  PciAttributes a;
  const std::string dir = "sys/bus/pci/devices/" + address + "/";
  auto u32 = [](std::optional<std::int64_t> v) {
    return v && *v >= 0 && *v <= 0xffffffff ? static_cast<std::uint32_t>(*v) : 0u;
  };
  a.vendor = u32(tree.integer(dir + "vendor", true));
  a.device = u32(tree.integer(dir + "device", true));
  a.pci_class = u32(tree.integer(dir + "class"));
  if (const auto n = tree.integer(dir + "numa_node")) {
    if (*n >= -1 && *n < 1024) {
      a.numa_node = static_cast<int>(*n);
    } else {
      tree.problem(dir + "numa_node", fmt::format("NUMA node {} out of range", *n));
    }
  }
  if (const auto l = tree.line(dir + "local_cpulist")) {
    if (auto ids = topology::parse_id_list(*l)) {
      a.local_cpus = std::move(*ids);
    } else {
      tree.problem(dir + "local_cpulist", "expected a CPU list, found " + quote_content(*l));
    }
  } else if (const auto m = tree.line(dir + "local_cpus")) {
    if (auto ids = topology::parse_id_mask(*m)) {
      a.local_cpus = std::move(*ids);
    } else {
      tree.problem(dir + "local_cpus", "expected a CPU mask, found " + quote_content(*m));
    }
  }
  if (const auto s = tree.line(dir + "current_link_speed")) a.link.gen = pcie_generation(*s);
  if (const auto s = tree.line(dir + "max_link_speed")) a.link.max_gen = pcie_generation(*s);
  auto width = [&](const std::string& name) {
    const auto w = tree.integer(dir + name);
    return w && *w >= 0 && *w <= 64 ? static_cast<int>(*w) : 0;
  };
  a.link.width = width("current_link_width");
  a.link.max_width = width("max_link_width");
  return a;
}

}  // namespace gpuorch::discover
