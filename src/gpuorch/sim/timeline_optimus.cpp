// Optimus+Oracle as the Pollux artifact runs it (timeline-protocol.md §9.2): one GPU per job
// first, then greedy marginal gains of one more GPU, (T(R) - T(R+1)) x remaining iterations,
// with the true step time T on a packed placement; the batch stays the workload's.
#include <algorithm>
#include <numeric>

#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class Optimus final : public TimelinePolicy {
 public:
  explicit Optimus(const PolicyOptions& o) : per_node_(o.gpus_per_node), total_(o.total_gpus) {}
  [[nodiscard]] bool rigid() const override { return false; }
  [[nodiscard]] bool needs_profiles() const override { return true; }

  Allocations schedule(Seconds, std::span<Job* const> active, cluster::Cluster&) override {
    const std::size_t n = active.size();
    std::vector<int> gpus(n, 0);
    std::vector<double> gain(n, 0), remaining(n, 0);
    std::vector<int> max_r(n, 1);
    int left = total_;
    for (std::size_t i = 0; i < n && left > 0; ++i) {
      gpus[i] = 1;
      --left;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const AppProfile& app = *active[i]->app();
      max_r[i] = app.name() == "ncf" ? 1 : active[i]->spec().batch / app.min_local();
      remaining[i] = active[i]->remaining_iterations();
    }
    auto update_gain = [&](std::size_t i) {
      gain[i] = gpus[i] + 1 > max_r[i] || gpus[i] == 0
                    ? 0.0
                    : (step_time(*active[i], gpus[i]) - step_time(*active[i], gpus[i] + 1)) *
                          remaining[i];
    };
    for (std::size_t i = 0; i < n; ++i) update_gain(i);
    while (left > 0 && n > 0) {
      const auto best =
          static_cast<std::size_t>(std::max_element(gain.begin(), gain.end()) - gain.begin());
      if (!(gain[best] > 0)) break;
      ++gpus[best];
      --left;
      update_gain(best);
    }
    // Same count: keep the placement; the others are placed again, smallest first.
    Allocations out = current_allocations(active);
    std::vector<std::size_t> moved;
    for (std::size_t i = 0; i < n; ++i) {
      if (active[i]->gpus() != gpus[i]) {
        release(out[i]);
        moved.push_back(i);
      }
    }
    std::stable_sort(moved.begin(), moved.end(),
                     [&](std::size_t a, std::size_t b) { return gpus[a] < gpus[b]; });
    for (const std::size_t i : moved) {
      if (gpus[i] > 0) place(*active[i], gpus[i], sched::ReplicaSpread::kMostFreeFirst, out[i]);
    }
    return out;
  }

 private:
  double step_time(const Job& j, int r) {
    const AppProfile& app = *j.app();
    const BatchConfig b = fixed_batch_config(app, r, j.spec().batch, true);
    const StepTime st = app.throughput(packed_placement(r, per_node_), b.local);
    return st.step + b.accum * (st.step - st.sync);
  }

  int per_node_;
  int total_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options) {
  return std::make_unique<Optimus>(options);
}

}  // namespace gpuorch::sim
