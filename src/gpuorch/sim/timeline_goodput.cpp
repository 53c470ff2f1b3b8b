#include "gpuorch/sim/timeline_goodput.hpp"

#include <algorithm>

#include "gpuorch/sched/jobs/fitted_speedup.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

// `gpus` on exactly `nodes` nodes, each full but for what the later nodes need (at least one
// GPU each); the packed placement when that many nodes cannot hold them or hold too many.
std::vector<int> placement_on(int gpus, int nodes, int per_node) {
  if (nodes < 1 || nodes > gpus || gpus > nodes * per_node) return packed_placement(gpus, per_node);
  std::vector<int> p;
  for (int i = 0, left = gpus; i < nodes; ++i) {
    const int here = std::min(per_node, left - (nodes - i - 1));
    p.push_back(here);
    left -= here;
  }
  return p;
}

// The measured profiles seen through the model interface: always known, nothing to learn.
class OracleSpeedup final : public SpeedupModel {
 public:
  OracleSpeedup(const Job& job, GoodputTable& table, bool adaptive)
      : job_(&job), table_(&table), adaptive_(adaptive) {}
  [[nodiscard]] bool known() const override { return true; }
  double goodput(int gpus, int nodes) override {
    return table_->rate(*job_, gpus, nodes, adaptive_);
  }

 private:
  const Job* job_;
  GoodputTable* table_;
  bool adaptive_;
};

BatchRange batch_range(const Job& job, bool adaptive) {
  const AppProfile& app = *job.app();
  BatchRange r{app.init_batch(), app.max_batch(), app.min_local(), app.max_local(), 0};
  // ncf runs its tuned batch under every policy (timeline-protocol.md §2).
  if (!adaptive || app.name() == "ncf") r.fixed_batch = job.spec().batch;
  return r;
}

}  // namespace

double GoodputTable::rate(const Job& job, int gpus, int nodes, bool adaptive) {
  if (gpus <= 0) return 0;
  const AppProfile* app = job.app();
  if (app == nullptr) return 1;
  const bool fixed = !adaptive || app->name() == "ncf";
  const auto key = std::make_tuple(app, job.epoch(), gpus, nodes, fixed ? job.spec().batch : 0);
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const auto placement = placement_on(gpus, nodes, per_node_);
  const BatchConfig b = fixed ? fixed_batch_config(*app, gpus, job.spec().batch, false)
                              : best_batch_config(*app, placement, job.epoch());
  const double r = progress_rate(*app, placement, b, job.epoch()).progress_per_s;
  cache_.emplace(key, r);
  return r;
}

SpeedupModel& JobSpeedups::of(const Job& job, bool adaptive) {
  auto& model = models_[&job];
  if (source_ == SpeedupSource::kOracle || job.app() == nullptr) {
    if (!model) model = std::make_unique<OracleSpeedup>(job, table_, adaptive);
    return *model;
  }
  // A job that has never run knows nothing (also when a policy object is reused for another
  // run and a new job lives where an old one did).
  if (!model || (job.restarts() < 0 && model->known())) {
    const std::string& app = job.app()->name();
    if (fit_.pooled) {
      auto& pool = pools_[app];
      if (!pool) pool = std::make_shared<ThroughputFit>(fit_.measured, fit_.carry);
      model = std::make_unique<FittedSpeedup>(batch_range(job, adaptive), pool);
    } else if (const auto last = fit_.inherit ? latest_.find(app) : latest_.end();
               last != latest_.end()) {
      // What the last job of the model to report knew, and the gradient statistics the model
      // showed when it started, as this job starts too.
      auto fit = std::make_shared<ThroughputFit>(*last->second);
      fits_[&job] = fit;
      model = std::make_unique<FittedSpeedup>(batch_range(job, adaptive), std::move(fit));
      model->observe(first_stats_.at(app));
    } else {
      auto fit = std::make_shared<ThroughputFit>(fit_.measured, fit_.carry);
      fits_[&job] = fit;
      if (fit_.shared_steps) {
        auto& steps = steps_[app];
        if (!steps) steps = std::make_shared<sched::jobs::MeasuredSteps>();
        fit->share_steps(steps);
      }
      if (fit_.shared_network) {
        auto& pool = pools_[app];
        if (!pool) pool = std::make_shared<ThroughputFit>();
        fit->share_network(pool);
      }
      model = std::make_unique<FittedSpeedup>(batch_range(job, adaptive), std::move(fit));
    }
  }
  if (job.gpus() > 0) {
    const AppProfile& app = *job.app();
    const std::vector<int> where = job.gpus_per_node();
    const BatchConfig& b = job.batch();
    const StepTime t = app.throughput(where, b.local);
    const auto nodes = std::count_if(where.begin(), where.end(), [](int g) { return g > 0; });
    model->observe(ThroughputSample{static_cast<int>(nodes), job.gpus(), b.local, t.step, t.sync});
    const GradStats g = app.grad_stats(double(job.gpus()) * b.local * (b.accum + 1), job.epoch());
    model->observe(GradientStats{g.sqr, g.var});
    if (fit_.inherit && !fit_.pooled) {
      latest_[app.name()] = fits_.at(&job);
      first_stats_.try_emplace(app.name(), GradientStats{g.sqr, g.var});
    }
  }
  return *model;
}

}  // namespace gpuorch::sim
