// lasgo, gpuorch's own policy (`--policy default`): least attained service first, goodput for
// the rest. Each job is worth w = 1 / (1 + attained GPU-hours / 16), so jobs that
// have had little service (most of them short: training times are heavy-tailed) come first, as
// in Tiresias, but elastically: GPUs go where the weighted speedup per added GPU is largest
// (the job layer's greedy sizing over GPU counts within each queue's share, the job's goodput at
// each count with its best batch: from its fitted model, or the measured profiles with
// `--speedup-model oracle`), a changed allocation pays for its restart, and replicas are packed
// on the fewest nodes with single-node jobs best-fit into the holes (fragmentation). Cost per tick:
// O(jobs x max GPUs), a few microseconds per job, so it decides at 10,000 GPUs as it does at 64.
//
// Ablations (`lasgo:<part>=off`, docs/sim-timeline.md): las (w = 1), packing (most-free-first
// spread), batch (the workload's fixed batch), restart (no restart cost in the search),
// measured (fitted model only, no correction by measured step times), explore (fitted model
// only, no exploration cap; `explore=double`: the cap without the user's request), move (a
// resized job grows and shrinks next to its running replicas instead of being placed anew);
// `lasgo:share=app` shares the fitted throughput among the jobs of one application;
// `lasgo:scale=H` sets the GPU-hours at which a job's weight halves (16 was the best of
// 0.25..64 on the artifact's load-1.0 workloads; the same as Tiresias's demotion threshold).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "gpuorch/sim/timeline_goodput.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

struct Parts {
  double service_scale_gpu_hours = 16.0;
  bool las = true;
  bool packing = true;
  bool batch = true;
  bool restart = true;
  // With a fitted model, how far a job may go beyond what it has run (below).
  enum class Explore : std::uint8_t { kNone, kDouble, kRequest } explore = Explore::kRequest;
  bool measured = true;  // fitted models keep the measured speed where the job has run
  bool move = true;      // a resized job is placed anew, packed (off: it grows in place)
  bool share = false;    // fitted throughput shared by the jobs of one application
};

class Lasgo final : public TimelinePolicy {
 public:
  Lasgo(const PolicyOptions& o, Parts parts)
      : total_(o.total_gpus),
        per_node_(o.gpus_per_node),
        parts_(parts),
        speedups_(o.speedup, o.gpus_per_node, parts.measured, parts.share),
        run_(o.queues, std::string(sched::spread_policy(
                           parts.packing ? sched::ReplicaSpread::kFewestNodes
                                         : sched::ReplicaSpread::kMostFreeFirst))) {}
  [[nodiscard]] BatchRule batch_rule() const override {
    return parts_.batch ? BatchRule::kGoodput : BatchRule::kFixed;
  }
  [[nodiscard]] bool rigid() const override { return false; }
  [[nodiscard]] bool needs_profiles() const override { return true; }

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    const std::size_t n = active.size();
    run_.states(active);
    std::vector<sched::jobs::ElasticDemand> demands(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Job& j = *active[i];
      const AppProfile& app = *j.app();
      SpeedupModel& model = speedups_.of(j, parts_.batch);
      int cap = app.name() == "ncf" ? 1 : std::min(total_, app.max_batch() / app.min_local());
      if (speedups_.source() == SpeedupSource::kFitted && parts_.explore != Parts::Explore::kNone) {
        // A model fitted to a few GPUs extrapolates optimistically (exchange costs it has not
        // seen are taken as nil), so a job grows at most to twice what it has run, or to what
        // its user asked for: a request is a configuration somebody tuned.
        const int start = parts_.explore == Parts::Explore::kRequest ? j.spec().replicas : 1;
        cap = std::min(cap, std::max(2 * j.max_profiled_replicas(), start));
      }
      const double w =
          parts_.las ? 1.0 / (1.0 + j.attained_service() / 3600.0 / parts_.service_scale_gpu_hours)
                     : 1.0;
      // A restart idles the job's GPUs for 30 s of the next interval(s).
      const double age = double(now - j.spec().submit);
      const double keep = parts_.restart
                              ? std::max(age - 30.0 * std::max(j.restarts(), 0), 0.0) / (age + 30.0)
                              : 1.0;
      auto& v = demands[i].value;
      v.resize(static_cast<std::size_t>(cap) + 1);
      for (int r = 0; r <= cap; ++r) {
        double s = speedup(model, r, packed_nodes(r, per_node_), 1, 1);
        if (r != j.gpus()) s *= keep;
        v[static_cast<std::size_t>(r)] = w * s;
      }
    }
    JobLayerRun::Sizing how;
    how.repack = parts_.move;
    return run_.sized_round(cluster, now, std::move(demands), how);
  }

 private:
  int total_;
  int per_node_;
  Parts parts_;
  JobSpeedups speedups_;
  JobLayerRun run_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_lasgo(const PolicyOptions& options,
                                           const std::string& variant) {
  Parts p;
  if (variant == "las=off") {
    p.las = false;
  } else if (variant == "packing=off") {
    p.packing = false;
  } else if (variant == "batch=off") {
    p.batch = false;
  } else if (variant == "restart=off") {
    p.restart = false;
  } else if (variant == "explore=off") {
    p.explore = Parts::Explore::kNone;
  } else if (variant == "move=off") {
    p.move = false;
  } else if (variant == "measured=off") {
    p.measured = false;
  } else if (variant == "share=app") {
    p.share = true;
  } else if (variant == "explore=double") {
    p.explore = Parts::Explore::kDouble;
  } else if (variant.rfind("scale=", 0) == 0) {
    // The attained service (GPU-hours) at which a job's weight halves.
    char* end = nullptr;
    p.service_scale_gpu_hours = std::strtod(variant.c_str() + 6, &end);
    if (*end != '\0' || !(p.service_scale_gpu_hours > 0)) return nullptr;
  } else if (!variant.empty()) {
    return nullptr;
  }
  return std::make_unique<Lasgo>(options, p);
}

}  // namespace gpuorch::sim
