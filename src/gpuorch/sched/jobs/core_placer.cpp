#include "gpuorch/sched/jobs/core_placer.hpp"

#include <fmt/format.h>

namespace gpuorch::sched::jobs {

GangPlacer core_placer(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver) {
  return [&cluster, &scheduler, &resolver](
             const workload::JobSpec& job, int count, std::span<const cluster::Placement> near,
             PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
    ReplicaGang gang;
    gang.replica = job.replica;
    gang.count = count;
    gang.topology_levels = job.topology_levels;
    gang.running = near;
    gang.placement_per_replica = true;  // the job layer counts and preempts replicas one by one
    auto d = place_replica_gang(cluster, scheduler, resolver, gang);
    if (d.placed) return std::move(d.placements);
    if (why != nullptr) {
      why->infeasible = d.failure.outcome == Outcome::kInfeasible;
      if (why->explain) {
        why->message = fmt::format("{} of {} replica(s) found room: {}", d.placeable, count,
                                   d.failure.diagnosis.explain(resolver.resolve(job.replica)));
      }
    }
    return std::nullopt;
  };
}

}  // namespace gpuorch::sched::jobs
