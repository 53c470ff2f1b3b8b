// AMD GPUs: the amdgpu driver's DRM cards in sysfs for identity and memory, the KFD topology for
// compute units, the xGMI hive and the links between GPUs.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "gpuorch/discover/devices.hpp"
#include "gpuorch/discover/pci.hpp"

namespace gpuorch::discover {
namespace {

// KFD "properties" files: "name value" per line.
std::map<std::string, std::int64_t> properties(const Tree& tree, const std::string& rel) {
  std::map<std::string, std::int64_t> out;
  const auto text = tree.text(rel, true);
  if (!text) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string key;
    long long v = 0;
    // Values are unsigned 64-bit (hive_id, unique_id); keep the bits.
    unsigned long long u = 0;
    if (!(f >> key)) continue;
    std::string value;
    f >> value;
    char* end = nullptr;
    u = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') {
      tree.problem(rel, fmt::format("malformed line {}", quote_content(line)));
      return {};
    }
    v = static_cast<long long>(u);
    out[key] = v;
  }
  return out;
}

std::optional<int> card_number(const std::string& name) {
  if (name.size() < 5 || name.rfind("card", 0) != 0) return std::nullopt;
  for (std::size_t i = 4; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  }
  return std::atoi(name.c_str() + 4);
}

std::string gfx_name(std::int64_t version) {
  // gfx_target_version 90010 → gfx90a: major*10000 + minor*100 + stepping, stepping in hex.
  if (version <= 0) return {};
  return fmt::format("gfx{}{}{:x}", version / 10000, (version / 100) % 100, version % 100);
}

std::string amd_family(std::int64_t version) {
  // The node labeller's AMDGPU_FAMILY_* codes for the GFX generations gpuorch can name.
  switch (version / 10000) {
    case 9:
      return "AI";
    case 10:
      return "NV";
    default:
      return {};
  }
}

// The PCI address behind sys/class/drm/<name>/device.
std::optional<std::string> drm_address(const Tree& tree, const std::string& name) {
  const auto real = tree.resolve("sys/class/drm/" + name + "/device");
  if (!real) return std::nullopt;
  const std::string base = real->substr(real->rfind('/') + 1);
  if (!is_pci_address(base)) return std::nullopt;
  return base;
}

}  // namespace

void find_amd_gpus(const Tree& tree, topology::Host& host,
                   std::vector<topology::DirectLink>& links) {
  std::vector<std::pair<int, std::string>> cards;  // card number, PCI address
  for (const auto& name : tree.list("sys/class/drm")) {
    const auto n = card_number(name);
    if (!n) continue;
    const auto addr = drm_address(tree, name);
    if (!addr) continue;
    const auto vendor = tree.integer("sys/class/drm/" + name + "/device/vendor");
    if (!vendor || *vendor != 0x1002) continue;
    cards.emplace_back(*n, *addr);
  }
  std::sort(cards.begin(), cards.end());
  // Render minors by PCI address, to find each card's KFD node.
  std::map<int, std::string> render_of;
  for (const auto& name : tree.list("sys/class/drm")) {
    if (name.rfind("renderD", 0) != 0) continue;
    if (const auto addr = drm_address(tree, name)) render_of[std::atoi(name.c_str() + 7)] = *addr;
  }
  const std::size_t first = host.gpus.size();
  std::map<std::string, int> by_address;
  for (const auto& [card, addr] : cards) {
    topology::Gpu g;
    g.index = static_cast<int>(host.gpus.size());
    g.vendor = topology::Vendor::kAmd;
    g.pci.address = addr;
    g.minor = card;
    g.source = "sysfs";
    const std::string dev = "sys/class/drm/card" + std::to_string(card) + "/device/";
    g.model = tree.line(dev + "product_name").value_or("");
    g.uuid = tree.line(dev + "unique_id").value_or("");
    if (const auto vram = tree.integer(dev + "mem_info_vram_total")) {
      if (*vram > 0) g.memory_mib = *vram >> 20;
    }
    if (host.driver_version.empty()) {
      host.driver_version = tree.line(dev + "driver/module/version").value_or("");
    }
    by_address[addr] = g.index;
    host.gpus.push_back(std::move(g));
  }
  if (host.gpus.size() == first) return;

  // KFD nodes: GPUs have simd_count > 0; map them to cards through the render minor.
  const std::string kfd = "sys/class/kfd/kfd/topology/nodes/";
  std::map<int, int> gpu_of_node;  // KFD node id → GPU index
  std::vector<std::pair<int, std::string>> nodes;
  for (const auto& name : tree.list(kfd)) {
    char* end = nullptr;
    const long id = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0') continue;
    nodes.emplace_back(static_cast<int>(id), name);
  }
  for (const auto& [id, name] : nodes) {
    auto p = properties(tree, kfd + name + "/properties");
    if (p["simd_count"] <= 0) continue;
    const auto render = render_of.find(static_cast<int>(p["drm_render_minor"]));
    if (render == render_of.end() || !by_address.count(render->second)) continue;
    topology::Gpu& g = host.gpus[static_cast<std::size_t>(by_address[render->second])];
    gpu_of_node[id] = g.index;
    g.source = "sysfs+kfd";
    g.render_minor = static_cast<int>(p["drm_render_minor"]);
    g.gfx_target = gfx_name(p["gfx_target_version"]);
    g.family = amd_family(p["gfx_target_version"]);
    g.simd_count = static_cast<int>(p["simd_count"]);
    if (p["simd_per_cu"] > 0)
      g.compute_units = static_cast<int>(p["simd_count"] / p["simd_per_cu"]);
    g.xgmi_hive = static_cast<std::uint64_t>(p["hive_id"]);
    g.pci_device_id = static_cast<std::uint32_t>(p["device_id"]);
    if (g.model.empty())
      g.model = fmt::format("AMD {} [1002:{:04x}]", g.gfx_target, g.pci_device_id);
  }
  // xGMI io_links (type 11) between GPU nodes.
  constexpr std::int64_t kXgmi = 11;
  for (const auto& [id, gpu] : gpu_of_node) {
    const std::string links_dir = kfd + std::to_string(id) + "/io_links/";
    for (const auto& l : tree.list(links_dir)) {
      auto p = properties(tree, links_dir + l + "/properties");
      if (p.empty() || p["type"] != kXgmi) continue;
      const auto peer = gpu_of_node.find(static_cast<int>(p["node_to"]));
      if (peer == gpu_of_node.end() || peer->second <= gpu) continue;
      links.push_back({gpu, peer->second, topology::Path::kXgmi, 1, static_cast<int>(p["weight"]),
                       p["max_bandwidth"]});
    }
  }
}

}  // namespace gpuorch::discover
