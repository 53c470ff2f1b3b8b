// Pollux (timeline-protocol.md §9.3), with its search replaced: the artifact runs NSGA-II over
// GPU-per-node matrices; here a greedy search over GPU counts maximises the same objective, the
// harmonic mean of each job's speedup over an equal share (s + 0.001, restart penalty
// (age - 30 restarts) / (age + 30) on a changed allocation), under the same exploration cap
// (at most twice the largest GPU count a job has run on) and with the same per-job
// goodput-optimal batch. Speedups come from each job's model fitted online to what it has run
// (`--speedup-model fitted`, the artifact's) or from the measured profiles (`oracle`); a job
// never run has the artifact's prior, R GPUs worth R / fair share. The job layer sizes the jobs
// by these values within each queue's share (sched/jobs/elastic_sizing.hpp) and places them
// through the scheduler core by the fewest-nodes rule (Pollux's speedup depends on nodes and
// GPUs, and packing is what its search converges to); a job that grows keeps its replicas.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpuorch/sim/timeline_goodput.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Pollux final : public TimelinePolicy {
 public:
  explicit Pollux(const PolicyOptions& o)
      : total_(o.total_gpus),
        per_node_(o.gpus_per_node),
        speedups_(o.speedup, o.gpus_per_node),
        run_(o.queues, std::string(sched::spread_policy(sched::ReplicaSpread::kFewestNodes))) {}
  [[nodiscard]] BatchRule batch_rule() const override { return BatchRule::kGoodput; }
  [[nodiscard]] bool rigid() const override { return false; }
  [[nodiscard]] bool needs_profiles() const override { return true; }

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    const std::size_t n = active.size();
    const int fair = static_cast<int>((total_ + n - 1) / n);
    run_.states(active);
    std::vector<sched::jobs::ElasticDemand> demands(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Job& j = *active[i];
      const AppProfile& app = *j.app();
      int cap = app.name() == "ncf" ? 1
                                    : std::min({std::max(2 * j.max_profiled_replicas(), 1), total_,
                                                app.max_batch() / app.min_local()});
      SpeedupModel& model = speedups_.of(j, true);
      // Speedups relative to an equal share on one node, as the artifact rebases them (the
      // oracle, which can only read real placements, packs a share larger than a node).
      const int base = std::min(fair, total_);
      // The artifact's rule: a job never placed has no model yet.
      const bool prior = j.max_profiled_replicas() == 0;
      const double age = double(now - j.spec().submit);
      const double penalty = std::max(age - 30.0 * std::max(j.restarts(), 0), 0.0) / (age + 30.0);
      auto& v = demands[i].value;
      v.resize(static_cast<std::size_t>(cap) + 1);
      for (int r = 0; r <= cap; ++r) {
        double s = 0;
        if (r > 0) {
          s = prior ? double(r) / fair : speedup(model, r, packed_nodes(r, per_node_), base, 1);
        }
        s /= 4.0;
        if (r != j.gpus()) s *= penalty;
        v[static_cast<std::size_t>(r)] = -1.0 / (s + 0.001);
      }
    }
    return run_.sized_round(cluster, now, std::move(demands), JobLayerRun::Sizing{});
  }

 private:
  int total_;
  int per_node_;
  JobSpeedups speedups_;
  JobLayerRun run_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_pollux(const PolicyOptions& options) {
  return std::make_unique<Pollux>(options);
}

}  // namespace gpuorch::sim
