#pragma once
// A job's speed learned from what it has run, as Pollux learns it (timeline-protocol.md §8):
// every new (nodes, replicas, per-GPU batch) the job reports refits the throughput model; the
// gradient statistics it last reported give the statistical efficiency of any batch size; the
// goodput at a GPU and node count is the best over the artifact's 50 geometric batch candidates
// (§8.3). Before the first sample the model is not known() and callers use the linear prior.
#include <map>
#include <optional>
#include <utility>

#include "gpuorch/sim/timeline_speedup_fit.hpp"
#include "gpuorch/sim/timeline_speedup_model.hpp"

namespace gpuorch::sim {

class FittedSpeedup final : public SpeedupModel {
 public:
  // `measured`: where the job has run a GPU and node count, scale the model's step time there
  // by what the job measured (the mean ratio over its samples there), so a configuration that
  // ran slower or faster than the smooth model says keeps its measured speed.
  explicit FittedSpeedup(const BatchRange& range, bool measured = false)
      : range_(range), measured_(measured) {}

  [[nodiscard]] bool known() const override { return !samples_.empty() && stats_.has_value(); }
  double goodput(int gpus, int nodes) override;
  void observe(const ThroughputSample& sample) override;
  void observe(const GradientStats& stats) override;

  [[nodiscard]] const ThroughputParams& params() const { return params_; }
  [[nodiscard]] std::size_t samples() const { return samples_.size(); }

 private:
  // Predicted goodput (samples per second at the initial batch's efficiency) of one batch
  // configuration: throughput R a (k + 1) / step time, times gain / scale.
  [[nodiscard]] double config_goodput(int gpus, int nodes, int local, int accum) const;

  BatchRange range_;
  bool measured_;
  std::map<std::pair<int, int>, double> correction_;  // (replicas, nodes): measured / model
  std::map<std::tuple<int, int, int>, ThroughputSample> samples_;  // by nodes, replicas, batch
  std::optional<GradientStats> stats_;
  ThroughputParams params_;
  std::map<std::pair<int, int>, double> memo_;  // (gpus, nodes) until the model changes
};

}  // namespace gpuorch::sim
