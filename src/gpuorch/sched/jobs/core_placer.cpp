#include "gpuorch/sched/jobs/core_placer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpuorch::sched::jobs {

GangPlacer core_placer(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver) {
  return [&cluster, &scheduler, &resolver](
             const workload::JobSpec& job, int count, std::span<const cluster::Placement> near,
             PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
    std::vector<workload::PodSpec> members(std::size_t(std::max(count, 0)), job.replica);
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i].name = fmt::format("{}-{}", job.name, i);
    }
    if (!near.empty()) {
      // Next to the running replicas first: the same nodes, as one more gang of them.
      auto beside = members;
      std::vector<std::string> nodes;
      for (const auto& p : near) nodes.push_back(cluster.spec(p.node).name);
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      for (auto& m : beside) m.constraints.node_names = nodes;
      auto d = place_gang(cluster, scheduler, resolver, beside, {});
      if (d.placed) return std::move(d.placements);
    }
    auto d = place_gang(cluster, scheduler, resolver, members, job.topology_levels);
    if (d.placed) return std::move(d.placements);
    if (why != nullptr && d.failed_member < members.size()) {
      why->infeasible = d.failure.outcome == Outcome::kInfeasible;
      why->message =
          fmt::format("replica {} of {}: {}", d.failed_member + 1, count,
                      d.failure.diagnosis.explain(resolver.resolve(members[d.failed_member])));
    }
    return std::nullopt;
  };
}

}  // namespace gpuorch::sched::jobs
