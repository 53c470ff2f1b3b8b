#include "gpuorch/sim/timeline_speedup_fitted.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuorch::sim {
namespace {

int ceil_eps(double x) { return static_cast<int>(std::ceil(x - 1e-8)); }

}  // namespace

void FittedSpeedup::observe(const ThroughputSample& sample) {
  const auto key = std::make_tuple(sample.nodes, sample.replicas, sample.local_batch);
  if (!samples_.emplace(key, sample).second) return;
  std::vector<ThroughputSample> all;
  all.reserve(samples_.size());
  for (const auto& [k, s] : samples_) all.push_back(s);
  params_ = fit_throughput(all);
  memo_.clear();
  if (!measured_) return;
  correction_.clear();
  std::map<std::pair<int, int>, std::pair<double, int>> sum;
  for (const auto& s : all) {
    auto& [ratio, count] = sum[{s.replicas, s.nodes}];
    ratio += s.step_time / sync_step_time(params_, s.nodes, s.replicas, s.local_batch);
    ++count;
  }
  for (const auto& [where, v] : sum) correction_[where] = v.first / v.second;
}

void FittedSpeedup::observe(const GradientStats& stats) {
  if (stats_ == stats) return;
  stats_ = stats;
  memo_.clear();
}

double FittedSpeedup::config_goodput(int gpus, int nodes, int local, int accum) const {
  const double batch = double(gpus) * local * (accum + 1);
  const double scale = batch / range_.init_batch;
  const double denom = stats_->var / scale + stats_->sqr;
  const double gain = denom > 0 ? (stats_->var + stats_->sqr) / denom : 1.0;
  double step = step_time(params_, nodes, gpus, local, accum);
  if (const auto it = correction_.find({gpus, nodes}); it != correction_.end()) step *= it->second;
  return gain / step;
}

double FittedSpeedup::goodput(int gpus, int nodes) {
  if (gpus <= 0 || !known()) return 0;
  const auto key = std::make_pair(gpus, nodes);
  if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
  double best = 0;
  if (range_.fixed_batch > 0) {
    // The artifact's micro-batching of a fixed global batch (timeline-protocol.md §6.1).
    const int local = ceil_eps(double(range_.fixed_batch) / gpus);
    int accum = ceil_eps(double(local) / range_.max_local) - 1;
    if (gpus == 1 && range_.fixed_batch > range_.init_batch) accum = std::max(accum, 1);
    int a = ceil_eps(double(local) / (accum + 1));
    a = std::max(1, std::min(a, range_.max_batch / (gpus * (accum + 1))));
    best = config_goodput(gpus, nodes, a, accum);
  } else {
    const double lo = std::max(double(range_.init_batch), double(range_.min_local) * gpus);
    const double hi = range_.max_batch;
    constexpr int kCandidates = 50;
    for (int i = 0; i < kCandidates; ++i) {
      const double local = lo * std::pow(hi / lo, double(i) / (kCandidates - 1)) / gpus;
      int accum = ceil_eps(local / range_.max_local) - 1;
      if (gpus == 1 && local > range_.init_batch + 1e-8) accum = std::max(accum, 1);
      const int a = ceil_eps(local / (accum + 1));
      if (a < range_.min_local || a > range_.max_local) continue;
      best = std::max(best, config_goodput(gpus, nodes, a, accum));
    }
  }
  memo_.emplace(key, best);
  return best;
}

}  // namespace gpuorch::sim
