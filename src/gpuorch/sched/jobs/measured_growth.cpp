#include "gpuorch/sched/jobs/measured_growth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "gpuorch/sched/jobs/elastic_sizing.hpp"
#include "gpuorch/sched/jobs/fitted_speedup.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"

namespace gpuorch::sched::jobs {
namespace {

// More sizes than any job runs; each refit costs one NLopt solve per sample.
constexpr std::size_t kMostSamples = 32;

// The report to quote: the one at `pods`, else the newest.
const workload::ThroughputReport* quoted(std::span<const workload::ThroughputReport> measured,
                                         int pods) {
  const workload::ThroughputReport* out = nullptr;
  for (const auto& r : measured) {
    const bool here = r.nodes == pods;
    const bool out_here = out != nullptr && out->nodes == pods;
    if (out == nullptr || (here && !out_here) || (here == out_here && r.time > out->time)) {
      out = &r;
    }
  }
  return out;
}

}  // namespace

std::vector<ThroughputSample> throughput_samples(
    std::span<const workload::ThroughputReport> measured) {
  std::map<std::tuple<int, int, int>, const workload::ThroughputReport*> newest;
  for (const auto& r : measured) {
    auto& at = newest[{r.nodes, r.world_size, r.local_batch}];
    if (at == nullptr || r.time > at->time) at = &r;
  }
  std::map<int, double> fastest;  // local batch -> smallest step time
  for (const auto& [key, r] : newest) {
    auto [it, fresh] = fastest.emplace(r->local_batch, r->step_time);
    if (!fresh) it->second = std::min(it->second, r->step_time);
  }
  std::vector<ThroughputSample> out;
  for (const auto& [key, r] : newest) {
    if (out.size() == kMostSamples) break;
    const double sync = r->sync_time > 0 ? r->sync_time : r->step_time - fastest[r->local_batch];
    out.push_back({r->nodes, r->world_size, r->local_batch, r->step_time, sync});
  }
  return out;
}

namespace {

// The gang's throughput at any pod count: the fitted model, or the linear prior.
class GangModel {
 public:
  explicit GangModel(const GangGrowth& g)
      : samples_(throughput_samples(g.measured)), fit_(/*measured=*/true) {
    for (const auto& s : samples_) fit_.observe(s);
    now_ = std::max({g.running, g.min, 1});
    quote_ = quoted(g.measured, now_);
    if (quote_ != nullptr) {
      ranks_ = std::max(1, quote_->world_size / quote_->nodes);
      local_ = quote_->local_batch;
    }
  }
  [[nodiscard]] bool prior() const { return samples_.empty(); }
  [[nodiscard]] int now() const { return now_; }
  [[nodiscard]] const workload::ThroughputReport* quote() const { return quote_; }
  // Samples per second at `pods` pods of the ranks per pod measured, one pod per launcher node.
  [[nodiscard]] double throughput(int pods) const {
    if (prior()) return double(pods);
    const int replicas = pods * ranks_;
    const double step = sync_step_time(fit_.params(), pods, replicas, local_) *
                        fit_.correction(replicas, pods, local_);
    return step > 0 ? replicas * local_ / step : 0.0;
  }

 private:
  std::vector<ThroughputSample> samples_;
  ThroughputFit fit_;
  int now_ = 1;
  const workload::ThroughputReport* quote_ = nullptr;
  int ranks_ = 1;
  double local_ = 1;
};

// What a resize costs as a speedup: I / (I + c) of the next interval is left to run.
double keep_factor(const GangGrowth& g) {
  return g.resize_interval_s / (g.resize_interval_s + std::max(g.restart_s, 0.0));
}

}  // namespace

GrowthAdvice advise_growth(const GangGrowth& g) {
  GrowthAdvice out;
  const GangModel model(g);
  const int now = model.now();
  const int most = std::max(g.most, now);
  int largest = now;
  for (const auto& r : g.measured) largest = std::max(largest, r.nodes);
  // Pollux's exploration: a model fitted to small sizes extrapolates optimistically (exchange
  // costs it has not seen count as nil), so at most twice what has run or been measured.
  const int cap = std::min(most, 2 * largest);
  out.prior = model.prior();
  const workload::ThroughputReport* quote = model.quote();
  const auto throughput = [&model](int pods) { return model.throughput(pods); };
  const double base = throughput(now);
  const double keep = keep_factor(g);

  ElasticDemand d;
  const QueueTree tree;
  d.queue = tree.leaves().front();
  d.gpus_per_replica = g.gpus_per_pod;
  d.min = g.min;
  d.keep = now;
  d.value.assign(std::size_t(std::max(cap, now)) + 1, 0.0);
  for (int r = std::max(g.min, 1); r < int(d.value.size()); ++r) {
    const double s = base > 0 ? throughput(r) / base : 0.0;
    d.value[std::size_t(r)] = r == now ? 1.0 : s * keep;
  }
  const std::vector<ElasticDemand> demands{d};
  out.target = std::max(now, size_by_value(tree, cap * g.gpus_per_pod + 1e-6, demands).front());
  out.judged = out.target > now ? out.target : now + 1;
  out.speedup = base > 0 ? throughput(out.judged) / base : 0.0;

  const std::string verdict =
      out.target > now ? fmt::format("grown to {}", out.target)
      : now >= most    ? fmt::format("runs all {} pods", most)
      : now >= cap     ? fmt::format("not grown (at most twice the {} pods measured)", largest)
                       : fmt::format("not grown (below the {:.2f}x a resize costs)", 1 / keep);
  if (out.prior) {
    out.why = fmt::format(
        "gang {}: no throughput measured yet (annotation {}): the prior, a linear speedup "
        "explored to at most twice the size run: {}",
        g.gang, workload::kThroughputAnnotation,
        out.target > now ? fmt::format("up to {} pods", out.target) : verdict);
  } else {
    out.why = fmt::format(
        "gang {}: measured {:.0f} samples/s at {} pods, fitted speedup at {} "
        "pods {:.2f}x: {}",
        g.gang, quote->samples_per_second, quote->nodes, out.judged, out.speedup, verdict);
  }
  return out;
}

GrowthAdvice advise_shrink(const GangGrowth& g) {
  GrowthAdvice out;
  const GangModel model(g);
  const int now = model.now();
  out.prior = model.prior();
  out.target = now;
  if (out.prior || now <= g.min) return out;
  const double base = model.throughput(now);
  const double pays = 1 / keep_factor(g);
  for (int r = std::max(g.min, 1); r < now; ++r) {
    const double t = model.throughput(r);
    if (t > 0 && base <= t * pays) {
      out.target = r;
      out.judged = r;
      out.speedup = base / t;
      break;
    }
  }
  if (out.target == now) return out;
  out.why = fmt::format(
      "gang {}: measured {:.0f} samples/s at {} pods, fitted speedup of {} pods over {} {:.2f}x "
      "(below the {:.2f}x a resize costs): shrunk to {} for a job that waits",
      g.gang, model.quote()->samples_per_second, model.quote()->nodes, now, out.target, out.speedup,
      pays, out.target);
  return out;
}

}  // namespace gpuorch::sched::jobs
