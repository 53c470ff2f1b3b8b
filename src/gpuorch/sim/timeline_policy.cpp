#include "gpuorch/sim/timeline_policy.hpp"

#include <algorithm>
#include <cassert>

#include "gpuorch/sim/timeline_queued.hpp"

namespace gpuorch::sim {

ReplicaPlacer::ReplicaPlacer(cluster::Cluster& cluster)
    : cluster_(&cluster),
      resolver_(cluster),
      most_free_(sched::make_policy(sched::spread_policy(sched::ReplicaSpread::kMostFreeFirst),
                                    sched::PolicyContext{&cluster})),
      tightest_(sched::make_policy(sched::spread_policy(sched::ReplicaSpread::kFewestNodes),
                                   sched::PolicyContext{&cluster})),
      spread_(cluster, *most_free_),
      pack_(cluster, *tightest_) {}

sched::ReplicaGangDecision ReplicaPlacer::place(const Job& job, int count,
                                                sched::ReplicaSpread spread,
                                                std::span<const cluster::Placement> running) {
  sched::ReplicaGang gang;
  gang.replica = job.spec().replica;
  gang.count = count;
  gang.topology_levels = job.spec().topology_levels;
  gang.running = running;
  gang.placement_per_replica = false;
  sched::Scheduler& s = spread == sched::ReplicaSpread::kMostFreeFirst ? spread_ : pack_;
  return sched::place_replica_gang(*cluster_, s, resolver_, gang);
}

void ReplicaPlacer::release(std::span<const cluster::Placement> placements) {
  sched::release_placements(*cluster_, placements);
}

Allocations TimelinePolicy::allocate(Seconds now, std::span<Job* const> active,
                                     ReplicaPlacer& placer) {
  placer_ = &placer;
  Allocations out = schedule(now, active, placer.cluster());
  placer_ = nullptr;
  return out;
}

bool TimelinePolicy::place(const Job& job, int count, sched::ReplicaSpread spread,
                           std::vector<cluster::Placement>& out) {
  assert(placer_ != nullptr && "placements are made inside allocate()");
  sched::ReplicaGangDecision d = placer_->place(job, count, spread);
  if (d.placed) out = std::move(d.placements);
  return d.placed;
}

void TimelinePolicy::release(std::vector<cluster::Placement>& placements) {
  assert(placer_ != nullptr && "placements are released inside allocate()");
  placer_->release(placements);
  placements.clear();
}

Allocations current_allocations(std::span<Job* const> active) {
  Allocations out;
  out.reserve(active.size());
  for (const Job* j : active) out.push_back(j->placements());
  return out;
}

std::vector<int> packed_placement(int gpus, int per_node) {
  std::vector<int> p;
  for (int left = gpus; left > 0; left -= per_node) p.push_back(std::min(left, per_node));
  return p;
}

Allocations TimelinePolicy::realize_counts(std::span<Job* const> active,
                                           const std::vector<int>& counts,
                                           cluster::Cluster& cluster, sched::ReplicaSpread spread) {
  assert(placer_ != nullptr && &cluster == &placer_->cluster());
  (void)cluster;
  Allocations out = current_allocations(active);
  std::vector<std::size_t> moved;
  for (std::size_t i = 0; i < active.size(); ++i) {
    if (active[i]->gpus() == counts[i]) continue;
    release(out[i]);
    if (counts[i] > 0) moved.push_back(i);
  }
  std::stable_sort(moved.begin(), moved.end(),
                   [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
  for (const std::size_t i : moved) place(*active[i], counts[i], spread, out[i]);
  return out;
}

std::vector<std::string> timeline_policy_names() {
  return {"fifo", "sjf", "tiresias", "optimus", "pollux", "lasgo"};
}

std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options) {
  // The rigid orders are the job layer's (sched/jobs/), with every job in one default queue.
  if (name == "fifo" || name == "sjf" || name == "tiresias") {
    QueuedOptions q;
    q.order = name;
    q.policy = options;
    return make_queued(q);
  }
  if (name == "optimus") return make_optimus(options);
  if (name == "pollux") return make_pollux(options);
  if (name == "default" || name == "lasgo") return make_lasgo(options, "");
  // Ablations of the default: lasgo:<part>=off (docs/sim-timeline.md).
  if (name.rfind("lasgo:", 0) == 0) return make_lasgo(options, name.substr(6));
  return nullptr;
}

}  // namespace gpuorch::sim
