#include "gpuorch/sim/timeline_policy.hpp"

#include <algorithm>

#include "gpuorch/sched/replica_gang.hpp"
#include "gpuorch/sim/timeline_queued.hpp"

namespace gpuorch::sim {

void ReplicaPlacer::release(std::span<const cluster::Placement> placements) {
  sched::release_placements(*cluster_, placements);
}

Reallocations TimelinePolicy::allocate(Seconds now, std::span<Job* const> active,
                                       ReplicaPlacer& placer, const TickEvents& events) {
  events_ = &events;
  Reallocations out = schedule(now, active, placer.cluster());
  events_ = nullptr;
  return out;
}

std::vector<int> packed_placement(int gpus, int per_node) {
  std::vector<int> p;
  for (int left = gpus; left > 0; left -= per_node) p.push_back(std::min(left, per_node));
  return p;
}

std::vector<std::string> timeline_policy_names() {
  return {"fifo", "sjf", "tiresias", "optimus", "pollux", "lasgo"};
}

std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options) {
  // The rigid orders are the job layer's (sched/jobs/), with every job in one default queue;
  // tiresias:over-quota=rank gives what is over the queues' quotas by its order across them.
  if (name == "fifo" || name == "sjf" || name == "tiresias" || name == "tiresias:over-quota=rank") {
    QueuedOptions q;
    q.order = name.substr(0, name.find(':'));
    q.over_quota_by_rank = name != q.order;
    q.queues = options.queues;
    q.policy = options;
    return make_queued(q);
  }
  // The cluster scheduler's rule (`gpuorch scheduler --queues`): one round per waiting job.
  if (name == "fifo:per-job") return make_fifo_per_job(options);
  if (name == "fifo:per-job:elastic") return make_fifo_per_job(options, ElasticGangs{});
  if (name == "optimus") return make_optimus(options);
  if (name == "pollux") return make_pollux(options);
  if (name == "default" || name == "lasgo") return make_lasgo(options, "");
  // Ablations of the default: lasgo:<part>=off (docs/sim-timeline.md).
  if (name.rfind("lasgo:", 0) == 0) return make_lasgo(options, name.substr(6));
  return nullptr;
}

}  // namespace gpuorch::sim
