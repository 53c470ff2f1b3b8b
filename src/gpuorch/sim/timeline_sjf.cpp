// Shortest job first with an oracle: waiting jobs start in order of their true run time on the
// GPUs they asked for (remaining iterations x step time), any that fits (backfilling); running
// jobs are never preempted.
#include <algorithm>
#include <numeric>

#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Sjf final : public TimelinePolicy {
 public:
  explicit Sjf(const PolicyOptions& o) : per_node_(o.gpus_per_node) {}

  Allocations schedule(Seconds, std::span<Job* const> active, cluster::Cluster& cluster) override {
    Allocations out = current_allocations(active);
    std::vector<std::size_t> waiting;
    std::vector<double> length(active.size(), 0);
    for (std::size_t i = 0; i < active.size(); ++i) {
      if (!out[i].empty()) continue;
      waiting.push_back(i);
      length[i] = run_time(*active[i]);
    }
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](std::size_t a, std::size_t b) { return length[a] < length[b]; });
    for (const std::size_t i : waiting) {
      if (cluster.fully_free_gpus_total() == 0) break;
      place(*active[i], active[i]->spec().replicas, sched::ReplicaSpread::kFewestNodes, out[i]);
    }
    return out;
  }

 private:
  [[nodiscard]] double run_time(const Job& j) const {
    if (j.app() == nullptr) return j.remaining_iterations();
    const int r = j.spec().replicas;
    const BatchConfig b = fixed_batch_config(*j.app(), r, j.spec().batch, false);
    const StepTime st = j.app()->throughput(packed_placement(r, per_node_), b.local);
    return j.remaining_iterations() * (st.step + b.accum * (st.step - st.sync));
  }
  int per_node_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_sjf(const PolicyOptions& options) {
  return std::make_unique<Sjf>(options);
}

}  // namespace gpuorch::sim
