// Optimus+Oracle as the Pollux artifact runs it (timeline-protocol.md §9.2): one GPU per job
// first, then greedy marginal gains of one more GPU, (T(R) - T(R+1)) x remaining iterations,
// with the true step time T on a packed placement; the batch stays the workload's. The job layer
// does the greedy within each queue's share (sched/jobs/elastic_sizing.hpp) and places the
// replicas through the scheduler core, most free nodes first, smaller jobs first.
#include <algorithm>
#include <map>
#include <span>
#include <utility>

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

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    run_.states(active);
    std::vector<sched::jobs::ElasticDemand> demands(active.size());
    for (std::size_t i = 0; i < active.size(); ++i) {
      const Job& j = *active[i];
      const AppProfile& app = *j.app();
      // More GPUs than the cluster has are worth nothing to the search.
      const int max_r =
          std::min(app.name() == "ncf" ? 1 : j.spec().batch / app.min_local(), cluster.gpu_total());
      const double remaining = j.remaining_iterations();
      // The time the rest of the job takes on r GPUs, negated: a GPU more is worth the time it
      // saves, (T(r) - T(r + 1)) x remaining iterations.
      const std::span<const double> t = step_times(app, j.spec().batch, std::max(max_r, 1));
      auto& v = demands[i].value;
      v.assign(t.size(), 0.0);
      for (std::size_t r = 1; r < t.size(); ++r) v[r] = -t[r] * remaining;
    }
    JobLayerRun::Sizing how;
    how.sizing.min_first = true;  // one GPU per job first, in submission order
    how.sizing.single_steps = true;
    how.larger_first = false;
    return run_.sized_round(cluster, now, std::move(demands), how);
  }

 private:
  // The step time on r = 1 .. most GPUs (index r; 0 unused) of an application at a fixed
  // batch: the same for every job of that kind, so computed once.
  std::span<const double> step_times(const AppProfile& app, int batch, int most) {
    auto& t = step_times_[{&app, batch}];
    for (int r = static_cast<int>(t.size()); r <= most; ++r) {
      if (r == 0) {
        t.push_back(0);
        continue;
      }
      const BatchConfig b = fixed_batch_config(app, r, batch, true);
      const StepTime st = app.throughput(packed_placement(r, per_node_), b.local);
      t.push_back(st.step + b.accum * (st.step - st.sync));
    }
    return {t.data(), static_cast<std::size_t>(most) + 1};
  }

  int per_node_;
  std::map<std::pair<const AppProfile*, int>, std::vector<double>> step_times_;
  JobLayerRun run_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options) {
  return std::make_unique<Optimus>(options);
}

}  // namespace gpuorch::sim
