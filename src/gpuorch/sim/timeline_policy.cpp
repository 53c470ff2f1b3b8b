#include "gpuorch/sim/timeline_policy.hpp"

#include <algorithm>

namespace gpuorch::sim {

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

Allocations realize_counts(std::span<Job* const> active, const std::vector<int>& counts,
                           cluster::Cluster& cluster, sched::ReplicaSpread spread) {
  Allocations out = current_allocations(active);
  std::vector<std::size_t> moved;
  for (std::size_t i = 0; i < active.size(); ++i) {
    if (active[i]->gpus() == counts[i]) continue;
    sched::release_all(cluster, out[i]);
    out[i].clear();
    if (counts[i] > 0) moved.push_back(i);
  }
  std::stable_sort(moved.begin(), moved.end(),
                   [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
  for (const std::size_t i : moved) {
    auto p = sched::place_replicas(cluster, counts[i], spread);
    if (p) out[i] = std::move(*p);
  }
  return out;
}

std::vector<std::string> timeline_policy_names() {
  return {"fifo", "sjf", "tiresias", "optimus", "pollux", "lasgo"};
}

std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options) {
  if (name == "fifo") return make_fifo();
  if (name == "sjf") return make_sjf(options);
  if (name == "tiresias") return make_tiresias(options);
  if (name == "optimus") return make_optimus(options);
  if (name == "pollux") return make_pollux(options);
  if (name == "default" || name == "lasgo") return make_lasgo(options, "");
  // Ablations of the default: lasgo:<part>=off (docs/sim-timeline.md).
  if (name.rfind("lasgo:", 0) == 0) return make_lasgo(options, name.substr(6));
  return nullptr;
}

}  // namespace gpuorch::sim
