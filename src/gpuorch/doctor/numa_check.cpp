// A process is compared with the GPUs it has open: its allowed CPUs should be those GPUs' local
// cores (what `gpuorch launch --bind cores` sets), and its memory should sit on their NUMA nodes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gpuorch/doctor/numa.hpp"

namespace gpuorch::doctor {
namespace {

// More than this share of a process's resident pages away from its GPUs' nodes is a problem:
// a few remote pages (shared libraries) are normal, most of the heap remote is not.
constexpr double kRemoteShareLimit = 0.5;

const topology::Gpu* gpu_by_minor(const topology::Host& host, int minor) {
  for (const auto& g : host.gpus) {
    if (g.minor == minor) return &g;
  }
  return nullptr;
}

std::string who(const GpuProcess& p) { return fmt::format("pid {} ({})", p.pid, p.command); }

topology::IdSet unite(const topology::IdSet& a, const topology::IdSet& b) {
  topology::IdSet out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string main_policy(const GpuProcess& p) {
  std::string best = "unknown";
  long long most = 0;
  for (const auto& [policy, n] : p.policies) {
    if (n > most) {
      most = n;
      best = policy;
    }
  }
  return best;
}

void check_process(const topology::Host& host, const GpuProcess& p, std::vector<Finding>& out) {
  std::vector<std::string> gpus;
  topology::IdSet near_cpus, near_nodes;
  for (const int minor : p.gpu_minors) {
    const auto* g = gpu_by_minor(host, minor);
    if (!g) {
      gpus.push_back(fmt::format("/dev/nvidia{} (not in the topology)", minor));
      continue;
    }
    gpus.push_back(fmt::format("GPU{} (NUMA node {}, cores {})", g->index, g->numa_node,
                               topology::format_id_list(g->local_cpus)));
    near_cpus = unite(near_cpus, g->local_cpus);
    if (g->numa_node >= 0) near_nodes = unite(near_nodes, {g->numa_node});
  }
  const std::string uses = fmt::format("{} uses {}", who(p), fmt::join(gpus, ", "));
  if (near_cpus.empty()) {
    out.push_back({Severity::kInfo, "numa.process", uses,
                   "the GPU's NUMA node is unknown (single-node host or VM)", ""});
    return;
  }
  bool problem = false;
  const auto near_allowed = topology::intersect(p.cpus_allowed, near_cpus);
  const std::size_t far = p.cpus_allowed.size() - near_allowed.size();
  if (!p.cpus_allowed.empty() && far > 0) {
    problem = true;
    out.push_back(
        {Severity::kWarning, "numa.cpu-affinity",
         fmt::format("{} may run on cores of another NUMA node than its GPU: host-to-device "
                     "copies and the data loader cross the socket link, and step time varies",
                     who(p)),
         fmt::format("{}; Cpus_allowed_list {}: {} of {} allowed cores are not near its GPU", uses,
                     topology::format_id_list(p.cpus_allowed), far, p.cpus_allowed.size()),
         fmt::format("bind it to cores {} (gpuorch launch --bind cores; or numactl "
                     "--cpunodebind={} --membind={})",
                     topology::format_id_list(near_cpus), topology::format_id_list(near_nodes),
                     topology::format_id_list(near_nodes))});
  }
  long long total = 0, remote = 0;
  std::vector<std::string> per_node;
  for (const auto& [node, pages] : p.pages) {
    total += pages;
    if (!std::binary_search(near_nodes.begin(), near_nodes.end(), node)) remote += pages;
    per_node.push_back(fmt::format("N{}={}", node, pages));
  }
  const bool mems_exclude =
      !p.mems_allowed.empty() && topology::intersect(p.mems_allowed, near_nodes).empty();
  const double share = total > 0 ? static_cast<double>(remote) / static_cast<double>(total) : 0;
  // A GPU whose NUMA node the firmware does not report (-1: most VMs, single-socket hosts) has no
  // "other" node: every page would look remote (seen on the H200 VM, docs/hardware/h200-doctor).
  if (!near_nodes.empty() && (mems_exclude || share > kRemoteShareLimit)) {
    problem = true;
    out.push_back(
        {Severity::kWarning, "numa.memory",
         fmt::format("{} keeps {:.0f}% of its memory on another NUMA node than its GPU{}", who(p),
                     100 * share, mems_exclude ? " (its GPU's node is not even allowed)" : ""),
         fmt::format(
             "{}; numa_maps pages {}, main policy {}; Mems_allowed_list {}", uses,
             per_node.empty() ? std::string("none") : fmt::format("{}", fmt::join(per_node, " ")),
             main_policy(p), topology::format_id_list(p.mems_allowed)),
         fmt::format("bind its memory to node {} (gpuorch launch --bind cores binds memory too; or "
                     "numactl --membind={})",
                     topology::format_id_list(near_nodes), topology::format_id_list(near_nodes))});
  }
  if (!problem) {
    out.push_back(
        {Severity::kInfo, "numa.process", uses,
         fmt::format(
             "Cpus_allowed_list {}, numa_maps pages {}", topology::format_id_list(p.cpus_allowed),
             per_node.empty() ? std::string("none") : fmt::format("{}", fmt::join(per_node, " "))),
         ""});
  }
}

}  // namespace

std::vector<Finding> check_numa(const topology::Host& host, const std::vector<GpuProcess>& procs) {
  std::vector<Finding> out;
  if (procs.empty()) {
    out.push_back({Severity::kInfo, "numa.process", "no process has a GPU open",
                   "no /proc/PID/fd link to /dev/nvidiaN (run as root to see every user's)", ""});
  }
  for (const auto& p : procs) check_process(host, p, out);
  return out;
}

}  // namespace gpuorch::doctor
