#pragma once
// A job's speed learned from what it has run, as Pollux learns it (timeline-protocol.md §8):
// every new (nodes, replicas, per-GPU batch) reported refits the throughput model; the gradient
// statistics the job last reported give the statistical efficiency of any batch size; the goodput
// at a GPU and node count is the best over the artifact's 50 geometric batch candidates (§8.3).
// Before the first sample the model is not known() and callers use the linear prior.
//
// The throughput part (how long a step takes where) depends on the model being trained and the
// hardware, not on the job's progress, so it may be shared by the jobs of one application
// (`JobSpeedups` with pooling): a new job of an application the cluster has run starts from what
// its predecessors measured instead of exploring from one GPU. The gradient statistics stay the
// job's own.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "gpuorch/sched/jobs/measured_steps.hpp"
#include "gpuorch/sched/jobs/speedup_model.hpp"
#include "gpuorch/sched/jobs/throughput_fit.hpp"

namespace gpuorch::sched::jobs {

// Step times reported at distinct configurations and the throughput model fitted to them.
class ThroughputFit {
 public:
  // `measured`: where a GPU and node count has been run, correction() is the mean ratio of the
  // measured step time to the model's there, so a configuration that ran slower or faster than
  // the smooth model says keeps its measured speed. `carry` (with `measured`): a GPU count not
  // run takes the correction of the nearest count run on as many nodes (the model's error there
  // is likelier to persist than to vanish).
  explicit ThroughputFit(bool measured = false, bool carry = false)
      : measured_(measured), carry_(carry) {}
  // Step times measured by the other jobs of the same model (`measured` only): a GPU and node
  // count this job has not run takes the correction of what they measured there against this
  // job's fit, before any `carry`; what this job measures goes there too.
  void share_steps(std::shared_ptr<MeasuredSteps> steps) { steps_ = std::move(steps); }
  // One fit to every job of the same model: the exchange terms this job has not seen (across
  // nodes; inside one node; and the overlap when it has seen no exchange at all) are taken from
  // it at each refit instead of the artifact's floor, since they depend on the model's gradients
  // and the network, not on the job; what this job measures goes there too.
  void share_network(std::shared_ptr<ThroughputFit> pool) { network_ = std::move(pool); }
  // Adds a configuration not seen before and refits; false (nothing changes) otherwise.
  bool observe(const ThroughputSample& sample);
  [[nodiscard]] bool empty() const { return samples_.empty(); }
  [[nodiscard]] std::size_t samples() const { return samples_.size(); }
  [[nodiscard]] const ThroughputParams& params() const { return params_; }
  // Measured over model step time at (gpus, nodes) with `local` samples per GPU, interpolated
  // in log batch between the batches measured there (the nearest one outside them); 1 where
  // nothing was measured at that GPU and node count.
  [[nodiscard]] double correction(int gpus, int nodes, double local) const;
  // Whether a step time was measured at (gpus, nodes), by this job or, when shared, another.
  [[nodiscard]] bool measured_at(int gpus, int nodes) const;
  // Whether any reported configuration ran across nodes / on several GPUs of one node.
  [[nodiscard]] bool across_nodes() const { return across_nodes_; }
  [[nodiscard]] bool inside_node() const { return inside_node_; }
  // The most GPUs measured by this job or, when shared, another (measured_at's counts).
  [[nodiscard]] int largest_measured() const;
  // The most GPUs any reported configuration had.
  [[nodiscard]] int max_replicas() const { return max_replicas_; }
  // Changes whenever params() or correction() may have: memos keyed on it stay valid.
  [[nodiscard]] std::uint64_t version() const {
    return version_ + (steps_ ? steps_->version() : 0);
  }

 private:
  using Ratios = std::vector<std::pair<int, double>>;  // (local batch, measured / model), by batch
  // The ratios at (gpus, nodes): this job's, else the shared steps' against this fit (cached
  // until version() changes); nullptr where neither measured.
  [[nodiscard]] const Ratios* ratios_at(int gpus, int nodes) const;

  bool measured_;
  bool carry_;
  std::map<std::tuple<int, int, int>, ThroughputSample> samples_;  // by nodes, replicas, batch
  std::map<std::pair<int, int>, Ratios> correction_;               // by (replicas, nodes)
  std::shared_ptr<MeasuredSteps> steps_;
  std::shared_ptr<ThroughputFit> network_;
  bool across_nodes_ = false;
  bool inside_node_ = false;
  mutable std::map<std::pair<int, int>, Ratios> shared_ratios_;
  mutable std::uint64_t shared_ratios_version_ = 0;
  ThroughputParams params_;
  int max_replicas_ = 0;
  std::uint64_t version_ = 0;
};

class FittedSpeedup final : public SpeedupModel {
 public:
  // A model with its own throughput fit (`measured` as ThroughputFit's).
  explicit FittedSpeedup(const BatchRange& range, bool measured = false, bool carry = false)
      : FittedSpeedup(range, std::make_shared<ThroughputFit>(measured, carry)) {}
  // A model whose throughput fit is shared (by the jobs of one application).
  FittedSpeedup(const BatchRange& range, std::shared_ptr<ThroughputFit> fit)
      : range_(range), fit_(std::move(fit)) {}

  [[nodiscard]] bool known() const override { return !fit_->empty() && stats_.has_value(); }
  double goodput(int gpus, int nodes) override;
  void observe(const ThroughputSample& sample) override;
  void observe(const GradientStats& stats) override;

  [[nodiscard]] const ThroughputParams& params() const { return fit_->params(); }
  [[nodiscard]] std::size_t samples() const { return fit_->samples(); }
  [[nodiscard]] const ThroughputFit& fit() const { return *fit_; }
  [[nodiscard]] bool measured(int gpus, int nodes) const override {
    return fit_->measured_at(gpus, nodes);
  }
  [[nodiscard]] int largest_measured() const override { return fit_->largest_measured(); }

 private:
  // Predicted goodput (samples per second at the initial batch's efficiency) of one batch
  // configuration: throughput R a (k + 1) / step time, times gain / scale.
  [[nodiscard]] double config_goodput(int gpus, int nodes, int local, int accum) const;

  BatchRange range_;
  std::shared_ptr<ThroughputFit> fit_;
  std::optional<GradientStats> stats_;
  std::map<std::pair<int, int>, double> memo_;  // (gpus, nodes) while memo_version_ holds
  std::uint64_t memo_version_ = 0;
};

}  // namespace gpuorch::sched::jobs
