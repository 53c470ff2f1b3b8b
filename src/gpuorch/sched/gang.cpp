#include "gpuorch/sched/gang.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace gpuorch::sched {
namespace {

// Reserves every member in turn, restricted to `nodes` when given; undoes them all on a failure.
// On success the reservations stay applied and are returned.
std::optional<std::vector<cluster::Placement>> try_members(
    cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver,
    const std::vector<workload::PodSpec>& members, const std::vector<std::string>* nodes,
    std::size_t* failed, Decision* failure) {
  std::vector<cluster::Placement> done;
  done.reserve(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    workload::PodSpec m = members[i];
    if (nodes != nullptr) m.constraints.node_names = *nodes;
    // decide + apply rather than schedule: a what-if is not an arrival a policy should learn from.
    const Decision d = scheduler.decide(resolver.resolve(m));
    if (d.outcome == Outcome::kPlaced) cluster.apply(d.placement);
    if (d.outcome != Outcome::kPlaced) {
      for (auto it = done.rbegin(); it != done.rend(); ++it) cluster.release(*it);
      if (failed != nullptr) *failed = i;
      if (failure != nullptr) *failure = d;
      return std::nullopt;
    }
    done.push_back(d.placement);
  }
  return done;
}

std::size_t distinct_nodes(const std::vector<cluster::Placement>& ps) {
  std::set<cluster::NodeIndex> nodes;
  for (const auto& p : ps) nodes.insert(p.node);
  return nodes.size();
}

// A domain that cannot hold the gang's whole-GPU, CPU and memory demand even on its free
// resources is skipped before any what-if (most hostname-level domains for a large gang).
bool could_hold(const cluster::Cluster& c, const std::vector<cluster::NodeIndex>& nodes,
                const std::vector<workload::PodSpec>& members) {
  std::int64_t gpus = 0, cpu = 0, mem = 0;
  for (const auto& m : members) {
    if (!m.gpu_share()) gpus += m.gpu_count;
    cpu += m.cpu_milli;
    mem += m.memory_mib;
  }
  std::int64_t free_gpus = 0, free_cpu = 0, free_mem = 0;
  for (const auto n : nodes) {
    free_gpus += c.fully_free_gpus(n);
    free_cpu += c.cpu_free(n);
    free_mem += c.memory_free(n);
  }
  return free_gpus >= gpus && free_cpu >= cpu && free_mem >= mem;
}

}  // namespace

std::map<std::string, std::vector<cluster::NodeIndex>> topology_domains(
    const cluster::Cluster& cluster, const std::string& level) {
  std::map<std::string, std::vector<cluster::NodeIndex>> domains;
  for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
    for (const auto& [k, v] : cluster.spec(n).labels) {
      if (k == level) domains[v].push_back(n);
    }
  }
  return domains;
}

GangDecision place_gang(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver,
                        const std::vector<workload::PodSpec>& members,
                        const std::vector<std::string>& topology_levels,
                        std::span<const std::uint32_t> tie_break_rank) {
  GangDecision out;
  // Innermost level first: the lowest level that can hold the gang wins.
  for (auto level = topology_levels.rbegin(); level != topology_levels.rend(); ++level) {
    const auto domains = topology_domains(cluster, *level);
    struct Best {
      std::string domain;
      std::size_t nodes = 0;
      std::uint32_t rank = 0;
      std::vector<cluster::Placement> placements;
    };
    std::optional<Best> best;
    for (const auto& [value, nodes] : domains) {
      if (!could_hold(cluster, nodes, members)) continue;
      std::vector<std::string> names;
      names.reserve(nodes.size());
      for (const auto n : nodes) names.push_back(cluster.spec(n).name);
      std::sort(names.begin(), names.end());
      auto placed = try_members(cluster, scheduler, resolver, members, &names, nullptr, nullptr);
      if (!placed) continue;
      // Measured, then undone: the domains compete on the same cluster state.
      for (auto it = placed->rbegin(); it != placed->rend(); ++it) cluster.release(*it);
      const std::size_t used = distinct_nodes(*placed);
      std::uint32_t rank = UINT32_MAX;
      for (const auto n : nodes) {
        rank = std::min(rank, tie_break_rank.empty() ? n : tie_break_rank[n]);
      }
      if (!best || used < best->nodes || (used == best->nodes && rank < best->rank)) {
        best = Best{*level + "=" + value, used, rank, std::move(*placed)};
      }
    }
    if (best) {
      // Applied again exactly as measured (the state is the one it was measured in).
      for (const auto& p : best->placements) cluster.apply(p);
      out.placed = true;
      out.placements = std::move(best->placements);
      out.domain = std::move(best->domain);
      return out;
    }
  }
  auto placed =
      try_members(cluster, scheduler, resolver, members, nullptr, &out.failed_member, &out.failure);
  if (placed) {
    out.placed = true;
    out.placements = std::move(*placed);
  }
  return out;
}

}  // namespace gpuorch::sched
