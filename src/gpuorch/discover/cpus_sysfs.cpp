#include "gpuorch/discover/cpus_sysfs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

namespace gpuorch::discover {
namespace {

std::optional<int> node_number(const std::string& name) {
  if (name.size() < 5 || name.rfind("node", 0) != 0) return std::nullopt;
  int v = 0;
  const auto [p, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), v);
  if (ec != std::errc() || p != name.data() + name.size()) return std::nullopt;
  return v;
}

// "Node 0 MemTotal:       1056345000 kB" (node meminfo) or "MemTotal: ... kB" (/proc/meminfo).
std::optional<std::int64_t> mem_total_kb(const Tree& tree, const std::string& rel) {
  const auto text = tree.text(rel);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find("MemTotal:");
    if (at == std::string::npos) continue;
    std::istringstream fields(line.substr(at + 9));
    std::int64_t kb = -1;
    std::string unit;
    if (fields >> kb >> unit && kb >= 0 && unit == "kB") return kb;
    tree.problem(rel, "malformed MemTotal line " + quote_content(line));
    return std::nullopt;
  }
  tree.problem(rel, "no MemTotal line");
  return std::nullopt;
}

}  // namespace

void read_cpus_sysfs(const Tree& tree, topology::Host& host) {
  const std::string cpu_dir = "sys/devices/system/cpu/";
  if (const auto online = tree.line(cpu_dir + "online", true)) {
    if (auto ids = topology::parse_id_list(*online)) {
      host.online_cpus = std::move(*ids);
    } else {
      tree.problem(cpu_dir + "online", "expected a CPU list, found " + quote_content(*online));
    }
  }
  if (const auto kb = mem_total_kb(tree, "proc/meminfo")) host.memory_mib = *kb / 1024;

  const std::string node_dir = "sys/devices/system/node/";
  std::vector<int> ids;
  for (const auto& name : tree.list(node_dir)) {
    if (const auto n = node_number(name)) ids.push_back(*n);
  }
  std::sort(ids.begin(), ids.end());
  for (int id : ids) {
    topology::NumaNode node;
    node.id = id;
    const std::string d = fmt::format("{}node{}/", node_dir, id);
    if (const auto l = tree.line(d + "cpulist", true)) {
      if (auto cpus = topology::parse_id_list(*l)) {
        node.cpus = std::move(*cpus);
      } else {
        tree.problem(d + "cpulist", "expected a CPU list, found " + quote_content(*l));
      }
    }
    if (const auto kb = mem_total_kb(tree, d + "meminfo")) node.memory_mib = *kb / 1024;
    if (const auto l = tree.line(d + "distance")) {
      std::istringstream in(*l);
      int v = 0;
      while (in >> v) node.distances.push_back(v);
      if (!in.eof() || node.distances.size() != ids.size()) {
        tree.problem(d + "distance",
                     fmt::format("expected {} distances, found {}", ids.size(), quote_content(*l)));
        node.distances.clear();
      }
    }
    host.numa_nodes.push_back(std::move(node));
  }
  if (host.numa_nodes.empty()) {
    // A kernel without NUMA: one node holding every CPU.
    topology::NumaNode node;
    node.cpus = host.online_cpus;
    node.memory_mib = host.memory_mib;
    host.numa_nodes.push_back(std::move(node));
  }
  if (host.online_cpus.empty()) {
    for (const auto& n : host.numa_nodes) {
      host.online_cpus.insert(host.online_cpus.end(), n.cpus.begin(), n.cpus.end());
    }
    std::sort(host.online_cpus.begin(), host.online_cpus.end());
  }
  host.logical_cpus = static_cast<int>(host.online_cpus.size());

  // Cores and sockets, when the per-CPU topology is there (live hosts; recordings keep hwloc.xml).
  std::set<std::pair<int, int>> cores;
  std::set<int> packages;
  for (int cpu : host.online_cpus) {
    const std::string t = fmt::format("{}cpu{}/topology/", cpu_dir, cpu);
    const auto pkg = tree.integer(t + "physical_package_id");
    const auto core = tree.integer(t + "core_id");
    if (!pkg || !core) {
      cores.clear();
      packages.clear();
      break;
    }
    packages.insert(static_cast<int>(*pkg));
    cores.emplace(static_cast<int>(*pkg), static_cast<int>(*core));
  }
  host.cores = static_cast<int>(cores.size());
  host.packages = static_cast<int>(packages.size());
}

}  // namespace gpuorch::discover
