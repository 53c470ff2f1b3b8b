#include "gpuorch/sched/jobs/fitted_speedup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <vector>

namespace gpuorch::sched::jobs {
namespace {

int ceil_eps(double x) { return static_cast<int>(std::ceil(x - 1e-8)); }

}  // namespace

bool ThroughputFit::observe(const ThroughputSample& sample) {
  if (steps_) steps_->add(sample);
  if (network_) network_->observe(sample);
  const auto key = std::make_tuple(sample.nodes, sample.replicas, sample.local_batch);
  if (!samples_.emplace(key, sample).second) return false;
  max_replicas_ = std::max(max_replicas_, sample.replicas);
  across_nodes_ |= sample.nodes > 1;
  inside_node_ |= sample.nodes == 1 && sample.replicas > 1;
  ++version_;
  std::vector<ThroughputSample> all;
  all.reserve(samples_.size());
  for (const auto& [k, s] : samples_) all.push_back(s);
  params_ = fit_throughput(all);
  if (network_) {
    const ThroughputParams& shared = network_->params();
    if (!across_nodes_ && !inside_node_ && (network_->across_nodes() || network_->inside_node()))
      params_.gamma = shared.gamma;
    if (!across_nodes_ && network_->across_nodes()) {
      params_.alpha_n = shared.alpha_n;
      params_.beta_n = shared.beta_n;
    }
    if (!inside_node_ && network_->inside_node()) {
      params_.alpha_r = shared.alpha_r;
      params_.beta_r = shared.beta_r;
    }
  }
  if (!measured_) return true;
  correction_.clear();
  // Samples iterate by (nodes, replicas, batch), so each configuration's ratios come in
  // increasing batch order.
  for (const auto& s : all) {
    correction_[{s.replicas, s.nodes}].emplace_back(
        s.local_batch, s.step_time / sync_step_time(params_, s.nodes, s.replicas, s.local_batch));
  }
  return true;
}

const ThroughputFit::Ratios* ThroughputFit::ratios_at(int gpus, int nodes) const {
  const auto key = std::make_pair(gpus, nodes);
  if (const auto it = correction_.find(key); it != correction_.end()) return &it->second;
  if (!measured_ || !steps_) return nullptr;
  if (shared_ratios_version_ != version()) {
    shared_ratios_.clear();
    shared_ratios_version_ = version();
  }
  if (const auto it = shared_ratios_.find(key); it != shared_ratios_.end()) return &it->second;
  const MeasuredSteps::Points* points = steps_->at(gpus, nodes);
  if (points == nullptr) return nullptr;
  Ratios r;
  r.reserve(points->size());
  for (const auto& [local, step] : *points)
    r.emplace_back(local, step / sync_step_time(params_, nodes, gpus, local));
  return &shared_ratios_.emplace(key, std::move(r)).first->second;
}

bool ThroughputFit::measured_at(int gpus, int nodes) const {
  return measured_ &&
         (correction_.contains({gpus, nodes}) || (steps_ && steps_->at(gpus, nodes) != nullptr));
}

int ThroughputFit::largest_measured() const {
  int most = max_replicas_;
  if (measured_ && steps_)
    for (const auto& [key, points] : steps_->all()) most = std::max(most, key.first);
  return most;
}

double ThroughputFit::correction(int gpus, int nodes, double local) const {
  const Ratios* found = ratios_at(gpus, nodes);
  if (found == nullptr && carry_) {
    // The nearest GPU count measured on as many nodes (the smaller one on a tie).
    int nearest = 0;
    auto consider = [&](const std::pair<int, int>& key) {
      if (key.second != nodes) return;
      if (nearest == 0 || std::abs(key.first - gpus) < std::abs(nearest - gpus) ||
          (std::abs(key.first - gpus) == std::abs(nearest - gpus) && key.first < nearest))
        nearest = key.first;
    };
    for (const auto& c : correction_) consider(c.first);
    if (measured_ && steps_)
      for (const auto& c : steps_->all()) consider(c.first);
    if (nearest > 0) found = ratios_at(nearest, nodes);
  }
  if (found == nullptr) return 1.0;
  const Ratios& r = *found;
  if (local <= r.front().first) return r.front().second;
  if (local >= r.back().first) return r.back().second;
  const auto hi = std::lower_bound(r.begin(), r.end(), local,
                                   [](const auto& p, double l) { return p.first < l; });
  const auto lo = std::prev(hi);
  const double t = std::log(local / lo->first) / std::log(double(hi->first) / lo->first);
  return lo->second + t * (hi->second - lo->second);
}

void FittedSpeedup::observe(const ThroughputSample& sample) { fit_->observe(sample); }

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
  const double step =
      step_time(fit_->params(), nodes, gpus, local, accum) * fit_->correction(gpus, nodes, local);
  return gain / step;
}

double FittedSpeedup::goodput(int gpus, int nodes) {
  if (gpus <= 0 || !known()) return 0;
  if (memo_version_ != fit_->version()) {
    memo_.clear();
    memo_version_ = fit_->version();
  }
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

}  // namespace gpuorch::sched::jobs
