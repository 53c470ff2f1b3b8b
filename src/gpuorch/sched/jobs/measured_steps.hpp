#pragma once
// The step times the jobs of one model have measured, by GPU count, node count and per-GPU batch:
// what a cluster learns from its jobs' reports about a model it runs again and again. A step's
// time depends on the model and the hardware, not on how far a job has trained, so a job that has
// not run 8 GPUs on 2 nodes may take the time another job of the same model measured there
// instead of extrapolating its own fit (ThroughputFit::share_steps). Gradient statistics, which
// do depend on a job's progress, are not kept here.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "gpuorch/sched/jobs/speedup_model.hpp"

namespace gpuorch::sched::jobs {

class MeasuredSteps {
 public:
  // (local batch, step time) at one GPU and node count, by batch.
  using Points = std::vector<std::pair<int, double>>;

  // Adds a configuration not measured before; false (nothing changes) otherwise.
  bool add(const ThroughputSample& sample);
  // What was measured at `gpus` on `nodes`; nullptr for nothing.
  [[nodiscard]] const Points* at(int gpus, int nodes) const;
  // Every GPU and node count measured, with its points.
  [[nodiscard]] const std::map<std::pair<int, int>, Points>& all() const { return steps_; }
  // Changes whenever a configuration is added.
  [[nodiscard]] std::uint64_t version() const { return version_; }

 private:
  std::map<std::pair<int, int>, Points> steps_;  // by (gpus, nodes)
  std::uint64_t version_ = 0;
};

}  // namespace gpuorch::sched::jobs
