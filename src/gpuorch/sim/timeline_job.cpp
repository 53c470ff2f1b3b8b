#include "gpuorch/sim/timeline_job.hpp"

#include <algorithm>
#include <cmath>

namespace gpuorch::sim {
namespace {

int ceil_eps(double x) { return static_cast<int>(std::ceil(x - 1e-8)); }

BatchConfig micro_batch(const AppProfile& app, double local, bool accum_on_one) {
  BatchConfig b;
  b.accum = ceil_eps(local / app.max_local()) - 1;
  if (accum_on_one) b.accum = std::max(b.accum, 1);
  b.local = ceil_eps(local / (b.accum + 1));
  return b;
}

void clip_to_max(const AppProfile& app, int replicas, BatchConfig& b) {
  b.local = std::min(b.local, app.max_batch() / (replicas * (b.accum + 1)));
}

}  // namespace

BatchConfig fixed_batch_config(const AppProfile& app, int replicas, int batch,
                               bool force_accum_on_one) {
  const double local = std::ceil(double(batch) / replicas - 1e-8);
  const bool one = replicas == 1 && (force_accum_on_one || batch > app.init_batch());
  BatchConfig b = micro_batch(app, local, one);
  clip_to_max(app, replicas, b);
  return b;
}

Rate progress_rate(const AppProfile& app, std::span<const int> gpus_per_node, const BatchConfig& b,
                   int epoch) {
  int replicas = 0;
  for (const int g : gpus_per_node) replicas += g;
  const StepTime st = app.throughput(gpus_per_node, b.local);
  const double step = st.step + b.accum * (st.step - st.sync);
  const double batch = double(replicas) * b.local * (b.accum + 1);
  const double scale = batch / app.init_batch();
  const GradStats g = app.grad_stats(batch, epoch);
  const double denom = g.var / scale + g.sqr;
  const double gain = denom > 0 ? (g.var + g.sqr) / denom : 1.0;
  return {gain / step, gain / scale, step};
}

BatchConfig best_batch_config(const AppProfile& app, std::span<const int> gpus_per_node,
                              int epoch) {
  int replicas = 0;
  for (const int g : gpus_per_node) replicas += g;
  const double lo = std::max(double(app.init_batch()), double(app.min_local()) * replicas);
  const double hi = app.max_batch();
  BatchConfig best;
  double best_rate = -1;
  constexpr int kCandidates = 50;
  for (int i = 0; i < kCandidates && lo <= hi; ++i) {
    const double batch = lo * std::pow(hi / lo, double(i) / (kCandidates - 1));
    const double local = batch / replicas;
    BatchConfig b = micro_batch(app, local, replicas == 1 && local > app.init_batch() + 1e-8);
    if (b.local < app.min_local() || b.local > app.max_local()) continue;
    clip_to_max(app, replicas, b);
    const double r = progress_rate(app, gpus_per_node, b, epoch).progress_per_s;
    if (r > best_rate) {
      best_rate = r;
      best = b;
    }
  }
  if (best_rate < 0) best = fixed_batch_config(app, replicas, int(lo), false);
  return best;
}

Job::Job(const JobSpec& spec, const AppProfile* app, BatchRule rule)
    : spec_(&spec), app_(app), rule_(app == nullptr ? BatchRule::kFixed : rule) {}

std::vector<int> Job::gpus_per_node() const { return gpus_per_node_; }

void Job::update_batch() {
  if (app_ == nullptr || allocation_.empty()) return;
  const int r = gpus();
  if (app_->name() == "ncf") {
    // ncf runs its tuned batch under every policy (§2).
    batch_ = fixed_batch_config(*app_, r, spec_->batch, false);
  } else if (rule_ == BatchRule::kGoodput) {
    batch_ = best_batch_config(*app_, gpus_per_node_, epoch_);
  } else {
    batch_ = fixed_batch_config(*app_, r, spec_->batch, false);
  }
}

void Job::reallocate(Seconds now, std::vector<cluster::Placement> placements) {
  placements_ = std::move(placements);
  allocation_.clear();
  gpus_per_node_.clear();
  // GPUs per node in the order nodes were first used: a placer may return one placement per
  // replica or one per node, and the profiles are looked up by GPUs per node.
  std::vector<cluster::NodeIndex> nodes;
  for (const auto& p : placements_) {
    allocation_.insert(allocation_.end(), p.gpus.size(), p.node);
    const auto at = std::find(nodes.begin(), nodes.end(), p.node);
    if (at == nodes.end()) {
      nodes.push_back(p.node);
      gpus_per_node_.push_back(static_cast<int>(p.gpus.size()));
    } else {
      gpus_per_node_[std::size_t(at - nodes.begin())] += static_cast<int>(p.gpus.size());
    }
  }
  if (allocation_.empty()) {
    batch_ = {};
    return;
  }
  if (first_start_ < 0) first_start_ = now;
  max_profiled_ = std::max(max_profiled_, gpus());
  update_batch();
  rescale_ = kRestartPenalty;
  ++restarts_;
}

void Job::advance(Seconds now, Seconds dt) {
  if (allocation_.empty() || complete()) return;
  const double g = gpus();
  const Seconds d = std::min(rescale_, dt);
  service_ += double(d) * g;
  rescale_ -= d;
  dt -= d;
  Seconds clock = now + d;
  while (dt > 0 && !complete()) {
    Rate r;
    double threshold = 0;
    int last_epoch = 0;
    if (app_ == nullptr) {
      r = {1.0, 1.0, 1.0};
      threshold = double(spec_->duration);
    } else {
      r = progress_rate(*app_, gpus_per_node_, batch_, epoch_);
      threshold = app_->progress_threshold(epoch_ + 1);
      last_epoch = app_->completion_epoch();
    }
    if (progress_ + r.progress_per_s * double(dt) < threshold) {
      progress_ += r.progress_per_s * double(dt);
      service_ += double(dt) * g;
      useful_ += double(dt) * g * r.efficiency;
      clock += dt;
      dt = 0;
      break;
    }
    ++epoch_;
    // Whole seconds, rounded half to even as the artifact's Python round() does.
    auto delta = static_cast<Seconds>(std::nearbyint((threshold - progress_) / r.progress_per_s));
    delta = std::min(delta, dt);
    if (epoch_ > last_epoch) completion_ = clock + delta;
    progress_ = threshold;
    service_ += double(delta) * g;
    useful_ += double(delta) * g * r.efficiency;
    clock += delta;
    dt -= delta;
    update_batch();
  }
}

double Job::remaining_iterations() const {
  if (app_ == nullptr) return std::max(0.0, double(spec_->duration) - progress_);
  const int c = app_->completion_epoch();
  if (c <= epoch_) return 1;
  return app_->iteration(spec_->batch, c) - app_->iteration(spec_->batch, epoch_);
}

}  // namespace gpuorch::sim
