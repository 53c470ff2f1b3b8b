// Tiresias as the Pollux artifact runs it (timeline-protocol.md §9.1): two-queue discretised
// least-attained-service with gang allocation; a job moves to the second queue once its requested
// GPUs x wall time since it was first marked running reaches 16 GPU-hours; no promotion back.
#include <algorithm>
#include <vector>

#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Tiresias final : public TimelinePolicy {
 public:
  explicit Tiresias(const PolicyOptions& o) : total_gpus_(o.total_gpus) {}

  Allocations schedule(Seconds now, std::span<Job* const> active, cluster::Cluster&) override {
    // Job id -> position in `active` (ids are dense: a table, not a map, for the Philly trace).
    for (const Job* j : active) {
      const std::size_t id = j->spec().id;
      if (id >= state_.size()) state_.resize(id + 1);
    }
    std::vector<std::size_t>& index = index_;
    if (index.size() < state_.size()) index.resize(state_.size(), kNone);
    for (std::size_t i = 0; i < active.size(); ++i) index[active[i]->spec().id] = i;
    auto forget = [&](std::vector<std::size_t>& q) {
      std::erase_if(q, [&](std::size_t id) { return index[id] == kNone; });
    };
    forget(q0_);
    forget(q1_);
    for (const Job* j : active) {
      State& s = state_[j->spec().id];
      if (!s.seen) {
        s.seen = true;
        q0_.push_back(j->spec().id);
      }
    }
    for (const Job* j : active) {
      State& s = state_[j->spec().id];
      if (s.running) s.executed += now - s.last_check;
      s.last_check = now;
      if (s.running && s.queue == 0 && s.executed * j->spec().replicas >= kThresholdGpuSeconds) {
        s.queue = 1;
        q0_.erase(std::find(q0_.begin(), q0_.end(), j->spec().id));
        q1_.push_back(j->spec().id);
      }
    }
    int budget = total_gpus_;
    std::vector<std::size_t> order(q0_);
    order.insert(order.end(), q1_.begin(), q1_.end());
    for (const std::size_t id : order) {
      const Job* j = active[index[id]];
      State& s = state_[id];
      s.running = j->spec().replicas <= budget;
      if (s.running) budget -= j->spec().replicas;
    }
    Allocations out = current_allocations(active);
    for (const std::size_t id : order) {
      if (!state_[id].running) release(out[index[id]]);
    }
    for (const std::size_t id : order) {
      const std::size_t i = index[id];
      if (state_[id].running && out[i].empty()) {
        place(*active[i], active[i]->spec().replicas, sched::ReplicaSpread::kMostFreeFirst, out[i]);
      }
    }
    for (const Job* j : active) index[j->spec().id] = kNone;
    return out;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  static constexpr Seconds kThresholdGpuSeconds = 16 * 3600;
  struct State {
    bool seen = false;
    bool running = false;
    int queue = 0;
    Seconds executed = 0;
    Seconds last_check = 0;
  };
  int total_gpus_;
  std::vector<State> state_;  // by job id
  std::vector<std::size_t> index_;
  std::vector<std::size_t> q0_, q1_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_tiresias(const PolicyOptions& options) {
  return std::make_unique<Tiresias>(options);
}

}  // namespace gpuorch::sim
