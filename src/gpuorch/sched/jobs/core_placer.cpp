#include "gpuorch/sched/jobs/core_placer.hpp"

#include <fmt/format.h>

namespace gpuorch::sched::jobs {
namespace {

// One placement per replica out of the gang's placements (a node's whole-GPU replicas come as
// one placement holding all their GPUs).
std::vector<cluster::Placement> per_replica(const workload::PodSpec& replica,
                                            const std::vector<cluster::Placement>& placed) {
  std::vector<cluster::Placement> out;
  const std::size_t k = std::size_t(std::max(replica.gpu_count, 0));
  for (const auto& p : placed) {
    const std::size_t n = k == 0 ? 1 : p.gpus.size() / k;
    for (std::size_t i = 0; i < n; ++i) {
      cluster::Placement r;
      r.node = p.node;
      r.cpu_milli = replica.cpu_milli;
      r.memory_mib = replica.memory_mib;
      r.gpu_milli = p.gpu_milli;
      if (k > 0) {
        r.gpus.assign(p.gpus.begin() + std::ptrdiff_t(i * k),
                      p.gpus.begin() + std::ptrdiff_t((i + 1) * k));
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace

GangPlacer core_placer(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver) {
  return [&cluster, &scheduler, &resolver](
             const workload::JobSpec& job, int count, std::span<const cluster::Placement> near,
             PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
    ReplicaGang gang;
    gang.replica = job.replica;
    gang.count = count;
    gang.topology_levels = job.topology_levels;
    gang.running = near;
    auto d = place_replica_gang(cluster, scheduler, resolver, gang);
    if (!d.placed) {
      if (why != nullptr) {
        why->infeasible = d.failure.outcome == Outcome::kInfeasible;
        if (why->explain) {
          why->message = fmt::format("{} of {} replica(s) found room: {}", d.placeable, count,
                                     d.failure.diagnosis.explain(resolver.resolve(job.replica)));
        }
      }
      return std::nullopt;
    }
    // Bound again one pod per replica, so each can be preempted on its own.
    release_placements(cluster, d.placements);
    auto pods = per_replica(job.replica, d.placements);
    for (const auto& p : pods) cluster.apply(p);
    return pods;
  };
}

}  // namespace gpuorch::sched::jobs
