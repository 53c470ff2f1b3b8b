// First come, first served, all or nothing, never preempted: the head of the queue waits until
// its GPUs are free and everything behind it waits too (no backfilling), the baseline a plain
// batch queue gives.
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Fifo final : public TimelinePolicy {
 public:
  Allocations schedule(Seconds, std::span<Job* const> active, cluster::Cluster&) override {
    Allocations out = current_allocations(active);
    for (std::size_t i = 0; i < active.size(); ++i) {
      if (!out[i].empty()) continue;
      if (!place(*active[i], active[i]->spec().replicas, sched::ReplicaSpread::kFewestNodes,
                 out[i])) {
        break;
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_fifo() { return std::make_unique<Fifo>(); }

}  // namespace gpuorch::sim
