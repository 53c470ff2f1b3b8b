// Optimus+Oracle as the Pollux artifact runs it (timeline-protocol.md §9.2): one GPU per job
// first, then greedy marginal gains of one more GPU, (T(R) - T(R+1)) x remaining iterations,
// with the true step time T on a packed placement; the batch stays the workload's. The job layer
// does the greedy within each queue's share (sched/jobs/elastic_sizing.hpp) and places the
// replicas through the scheduler core, most free nodes first, smaller jobs first.
#include <algorithm>

#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Optimus final : public TimelinePolicy {
 public:
  explicit Optimus(const PolicyOptions& o)
      : per_node_(o.gpus_per_node),
        run_(o.queues, std::string(sched::spread_policy(sched::ReplicaSpread::kMostFreeFirst))) {}
  [[nodiscard]] bool rigid() const override { return false; }
  [[nodiscard]] bool needs_profiles() const override { return true; }

  Allocations schedule(Seconds now, std::span<Job* const> active,
                       cluster::Cluster& cluster) override {
    run_.states(active);
    std::vector<sched::jobs::ElasticDemand> demands(active.size());
    for (std::size_t i = 0; i < active.size(); ++i) {
      const Job& j = *active[i];
      const AppProfile& app = *j.app();
      const int max_r = app.name() == "ncf" ? 1 : j.spec().batch / app.min_local();
      const double remaining = j.remaining_iterations();
      // The time the rest of the job takes on r GPUs, negated: a GPU more is worth the time it
      // saves, (T(r) - T(r + 1)) x remaining iterations.
      auto& v = demands[i].value;
      v.assign(static_cast<std::size_t>(std::max(max_r, 1)) + 1, 0.0);
      for (int r = 1; r < static_cast<int>(v.size()); ++r) {
        v[static_cast<std::size_t>(r)] = -step_time(j, r) * remaining;
      }
    }
    JobLayerRun::Sizing how;
    how.sizing.min_first = true;  // one GPU per job first, in submission order
    how.sizing.single_steps = true;
    how.larger_first = false;
    return run_.sized_round(cluster, now, std::move(demands), how);
  }

 private:
  double step_time(const Job& j, int r) {
    const AppProfile& app = *j.app();
    const BatchConfig b = fixed_batch_config(app, r, j.spec().batch, true);
    const StepTime st = app.throughput(packed_placement(r, per_node_), b.local);
    return st.step + b.accum * (st.step - st.sync);
  }

  int per_node_;
  JobLayerRun run_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options) {
  return std::make_unique<Optimus>(options);
}

}  // namespace gpuorch::sim
