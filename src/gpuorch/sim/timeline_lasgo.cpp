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
// `lasgo:share=app` shares the fitted throughput among the jobs of one application; measured
// and not adopted (docs/sim-timeline.md, "Where the fitted model loses the oracle's lead"):
// `explore=always` (the cap with the oracle too), `seen=G` and `trust=G` (faster growth once the
// fit has seen cross-node runs / predicted well), `idle=F` (exploration beyond the cap on GPUs
// nobody else values, their gain weighted by F), `net=app` (unseen exchange terms from one fit
// per application), `shape=measured` (uneven counts open where measured), `cap=app` (the cap
// from the largest count the application's jobs measured), `shape=nodes` (an uneven count worth
// its share of the whole nodes it spans), `shape=fill` (that worth, at a tenth, for GPUs no even
// count wants), `las=app` and `restart=app` / `restart=app-all` (the weight, or the restart's
// cost, from the service the application's finished jobs needed), `probe=idle` (a running job tries
// a count nobody of its application ran on GPUs nobody else values); parts join with '+'. With the
// fitted model these are on by default, chosen on load 1.0 and confirmed on load 0.5 and on loads
// nobody published: `shape=uniform` (only counts up to one node or of whole nodes), `carry=on`,
// `rw=2` (restart weight), `steps=app` (step times other jobs of the application measured),
// `cap=measured` (counts measured open past the cap) and `prior=app` (a new job starts from the fit
// of the last job of its application to report and the gradient statistics its first job started
// with); `shape=any`, `carry=off`, `rw=1`, `steps=own`, `cap=run` and `prior=linear` turn them off
// (`explore=double`: the cap starts at one GPU, not the request). With either model, by default:
// `order=app` (no job outweighs an earlier one of its application) and `start=free` (no restart
// factor on a waiting job's start); `order=none` and `start=aged` turn them off. `lasgo:scale=H`
// sets the GPU-hours at which a job's weight halves (16 was the best of 0.25..64 on the artifact's
// load-1.0 workloads; the same as Tiresias's demotion threshold).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuorch/sched/jobs/service_history.hpp"
#include "gpuorch/sim/timeline_goodput.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

struct Parts {
  double service_scale_gpu_hours = 16.0;
  bool las = true;
  // Within an application (and a queue), a job is worth no more than an earlier one
  // (`order=app`): its jobs train one model to one target, so the earlier has less left, and
  // least attained service, whose premise is that what a job has held says how long it is, would
  // have a new job take the GPUs until it had caught up with the old one, and both end late.
  // Across applications attained service still decides. Default: on (`order=none`: off).
  std::optional<bool> app_order;
  // `order=all`: every job one application, to measure what the rule costs where the label
  // says nothing (first come, first weighted).
  bool one_app = false;
  // The weight from the service a job is expected still to need, by what the finished jobs of its
  // application held (sched/jobs/service_history), instead of what it has attained (`las=app`).
  bool las_by_app = false;
  // A restart's cost against the time a running job is expected still to run at its current
  // count, by the finished jobs of its application, instead of against its age (`restart=app`; a
  // waiting job pays its start whatever it is given, so it keeps the age rule; `restart=app-all`:
  // waiting jobs too, which starves short jobs: their start looks as dear as a restart).
  bool restart_by_app = false;
  bool restart_by_app_waiting = false;
  // A waiting job's start is not discounted (`start=free`): it pays its 30 s whenever it starts,
  // so the restart factor, which weighs a change against keeping what runs, has nothing to weigh;
  // by its age alone a job that arrived just before a tick is worth almost nothing there.
  // Default: on (`start=aged` turns it off).
  std::optional<bool> free_start;
  bool packing = true;
  bool batch = true;
  bool restart = true;
  // With a fitted model, how far a job may go beyond what it has run (below).
  enum class Explore : std::uint8_t { kNone, kDouble, kRequest };
  std::optional<Explore> explore;  // default: kRequest
  bool measured = true;            // fitted models keep the measured speed where the job has run
  bool move = true;                // a resized job is placed anew, packed (off: it grows in place)
  bool share = false;              // fitted throughput shared by the jobs of one application
  // ThroughputFit's `carry`: unseen counts keep a measured correction (default: with the fitted
  // model, below).
  std::optional<bool> carry;
  bool cap_oracle = false;  // the exploration cap with the oracle too (to measure what it costs)
  // Once a job has run across nodes, its fit has seen every exchange term, so the cap grows by
  // this factor over the largest count run instead of 2 (0: no cap then).
  int seen_growth = 2;
  // A restart's cost counted as this many times the 30 s it idles (default: 2 with the fitted
  // model, 1 with the oracle).
  std::optional<double> restart_weight;
  // Trust region: when the fit predicted the goodput of the largest count a job has run within
  // `trust_tolerance` (not more than that much above what it then measured), the cap grows by
  // `trusted_growth` instead of 2 (0: no cap).
  int trusted_growth = 2;
  double trust_tolerance = 0.1;
  // Only counts up to one node or of whole nodes (the same number of processes on every node, as
  // torchrun's `--nproc-per-node` gives): the shapes the fitted model predicts; an uneven split
  // such as 4 + 2 runs no faster than 4 in several measured profiles, which no smooth model of a
  // few runs foresees. Default: with the fitted model.
  std::optional<bool> uniform;
  // With `uniform`, an uneven count is open where a step time was measured there (by the job or,
  // with `shared_steps`, another job of its application), as the shape of a user's request
  // (6 = 4 + 2) is: what was measured needs no smooth model (`shape=measured`).
  bool uneven_measured = false;
  // An uneven count is worth its share of the whole nodes it spans (`shape=nodes`): a ring's
  // exchange crosses the same links whether the last node is full or not, so a step takes about
  // the whole nodes' time (cifar10's 4 + 2 is no faster than 4 in its measured profile), while a
  // job whose step is mostly compute (imagenet) still fills the holes small jobs leave.
  bool uneven_by_nodes = false;
  // With `uniform`, an uneven count's gain over the even count below, valued as `shape=nodes`
  // does, counts at this fraction (`shape=fill`), so the greedy search gives it only GPUs no
  // even count wants: the holes small jobs leave on a full cluster. 0: off.
  double uneven_fill_weight = 0;
  // GPUs nobody within its cap can use go to counts beyond the cap (their gain counted at this
  // fraction, so they come last): exploration where it takes nothing from anyone. 0: off.
  double idle_weight = 0;
  // A running job may try an even count within its cap that nobody of its application has run
  // where the fit rates it below what the job runs now, on GPUs nobody else values (its gain a
  // token, so it comes last): a fit of a few runs can take a dip (yolov3 across two nodes) for a
  // trend and leave a job small on an idle cluster; a run measures it (`probe=idle`).
  bool probe_idle = false;
  // Each job's fit takes the step times other jobs of its application measured where it has not
  // run (ThroughputFit::share_steps): a cluster that runs a model again and again knows its step
  // time at the counts it ran.
  std::optional<bool> shared_steps;  // default: with the fitted model
  // Each job's fit takes the exchange terms it has not seen from one fit to every job of its
  // application (ThroughputFit::share_network): its own compute, the model's network.
  bool shared_network = false;
  // A new job starts from what the last job of its application knew (FitOptions::inherit).
  // Default: with the fitted model.
  std::optional<bool> inherit;
  // The cap doubles the largest count any job of the application measured, not only this job's
  // (`cap=app`): exploration goes on from where the model's jobs got.
  bool cap_from_app = false;
  // Counts beyond the exploration cap open where a step time was measured there (by the job or,
  // with `shared_steps`, another job of its application): the cap guards against extrapolation,
  // and a measured count is none.
  std::optional<bool> open_measured;  // default: with the fitted model
};

// What lasgo remembers of a job's exploration.
struct Exploration {
  int largest_checked = 0;        // the largest count whose prediction was checked
  bool trusted = false;           // that prediction held
  std::vector<double> predicted;  // goodput per count, as the model said last round (0: prior)
};

class Lasgo final : public TimelinePolicy {
 public:
  Lasgo(const PolicyOptions& o, Parts parts)
      : total_(o.total_gpus),
        per_node_(o.gpus_per_node),
        parts_(parts),
        speedups_(o.speedup, o.gpus_per_node,
                  {parts.measured, parts.share, *parts.carry, *parts.shared_steps,
                   parts.shared_network, *parts.inherit}),
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
    if (parts_.las_by_app || parts_.restart_by_app) learn_finished(now, active);
    run_.states(active);
    std::vector<sched::jobs::ElasticDemand> demands(n);
    const std::vector<double> weights = this->weights(active);
    for (std::size_t i = 0; i < n; ++i) {
      const Job& j = *active[i];
      const AppProfile& app = *j.app();
      SpeedupModel& model = speedups_.of(j, parts_.batch);
      int cap = app.name() == "ncf" ? 1 : std::min(total_, app.max_batch() / app.min_local());
      const int useful = cap;
      if ((speedups_.source() == SpeedupSource::kFitted || parts_.cap_oracle) &&
          *parts_.explore != Parts::Explore::kNone) {
        // A model fitted to a few GPUs extrapolates optimistically (exchange costs it has not
        // seen are taken as nil), so a job grows at most to twice what it has run, or to what
        // its user asked for: a request is a configuration somebody tuned.
        const int start = *parts_.explore == Parts::Explore::kRequest ? j.spec().replicas : 1;
        const auto& per_node = j.gpus_per_node();
        int& nodes_run = max_nodes_[&j];
        nodes_run =
            std::max(nodes_run, static_cast<int>(std::count_if(per_node.begin(), per_node.end(),
                                                               [](int g) { return g > 0; })));
        Exploration& e = explored_[&j];
        const int g = j.gpus();
        if (g > e.largest_checked && std::cmp_less(g, e.predicted.size()) &&
            e.predicted[static_cast<std::size_t>(g)] > 0 && model.known()) {
          const double now_says = model.goodput(g, packed_nodes(g, per_node_));
          e.trusted =
              e.predicted[static_cast<std::size_t>(g)] <= (1 + parts_.trust_tolerance) * now_says;
          e.largest_checked = g;
        }
        int growth = nodes_run > 1 ? parts_.seen_growth : 2;
        if (e.trusted) growth = parts_.trusted_growth;
        const int base = parts_.cap_from_app && model.known()
                             ? std::max(j.max_profiled_replicas(), model.largest_measured())
                             : j.max_profiled_replicas();
        if (growth > 0) cap = std::min(cap, std::max(growth * base, start));
      }
      const double w = weights[i];
      const double a = j.attained_service();
      // A restart idles the job's GPUs for 30 s of the next interval(s).
      // At least a second: a job that arrives exactly on a tick would otherwise be worth nothing
      // there (the factor is 0 at age 0) and could be left waiting on an idle cluster.
      const double age = std::max(double(now - j.spec().submit), 1.0);
      const double rc = 30.0 * *parts_.restart_weight;
      double keep =
          parts_.restart ? std::max(age - rc * std::max(j.restarts(), 0), 0.0) / (age + rc) : 1.0;
      const bool by_app = parts_.restart_by_app && (j.gpus() > 0 || parts_.restart_by_app_waiting);
      if (const auto left = by_app ? finished_.expected_remaining_own(app.name(), a) : std::nullopt;
          parts_.restart && left) {
        // A restart delays the job by rc; what it has left decides what that costs.
        const double t = *left / std::max(j.gpus(), 1);
        keep = t / (t + rc);
      }
      if (*parts_.free_start && j.gpus() == 0) keep = 1;
      auto& v = demands[i].value;
      const int explored_cap = cap;
      if (parts_.idle_weight > 0 || *parts_.open_measured) cap = useful;
      v.resize(static_cast<std::size_t>(cap) + 1);
      std::size_t even_below = 0;  // the largest count below r that `uniform` leaves open
      for (int r = 0; r <= cap; ++r) {
        const int nodes = packed_nodes(r, per_node_);
        double s = speedup(model, r, nodes, 1, 1);
        if ((parts_.uneven_by_nodes || parts_.uneven_fill_weight > 0) && r > per_node_ &&
            r % per_node_ != 0 && !(model.known() && model.measured(r, nodes))) {
          const int whole = nodes * per_node_;
          s = std::min(s, speedup(model, whole, nodes, 1, 1) * r / whole);
        }
        if (r != j.gpus()) s *= keep;
        v[static_cast<std::size_t>(r)] = w * s;
        if (*parts_.uniform && r > per_node_ && r % per_node_ != 0 && r != j.gpus() &&
            !(parts_.uneven_measured && model.known() &&
              model.measured(r, packed_nodes(r, per_node_)))) {
          // No gain over the count below, so the greedy search steps over it (`shape=fill`: a
          // small one, so it comes last).
          const double below = v[even_below];
          v[static_cast<std::size_t>(r)] =
              below + parts_.uneven_fill_weight * std::max(w * s - below, 0.0);
        } else {
          even_below = static_cast<std::size_t>(r);
        }
      }
      if (parts_.probe_idle && speedups_.source() == SpeedupSource::kFitted && j.gpus() > 0 &&
          model.known()) {
        const int now_runs = j.gpus();
        const double token = 1e-4 * w;
        const double base = v[static_cast<std::size_t>(now_runs)];
        for (int r = now_runs + 1; r <= explored_cap; ++r) {
          const bool even = r <= per_node_ || r % per_node_ == 0;
          if (!even || model.measured(r, packed_nodes(r, per_node_))) continue;
          auto& vr = v[static_cast<std::size_t>(r)];
          vr = std::max(vr, base + token * (r - now_runs));
        }
      }
      for (int r = explored_cap + 1; r <= cap; ++r) {
        auto& vr = v[static_cast<std::size_t>(r)];
        if (*parts_.open_measured && model.known() && model.measured(r, packed_nodes(r, per_node_)))
          continue;
        if (parts_.idle_weight > 0) {
          const double base = v[static_cast<std::size_t>(explored_cap)];
          vr = base + parts_.idle_weight * std::max(vr - base, 0.0);
        } else {
          vr = v[static_cast<std::size_t>(r) - 1];  // closed: the greedy search steps over it
        }
      }
      if (speedups_.source() == SpeedupSource::kFitted && parts_.trusted_growth != 2) {
        // What the model says now, to check against what the job measures (`trust=G`).
        auto& pred = explored_[&j].predicted;
        pred.assign(static_cast<std::size_t>(cap) + 1, 0.0);
        if (model.known())
          for (int r = 1; r <= cap; ++r)
            pred[static_cast<std::size_t>(r)] = model.goodput(r, packed_nodes(r, per_node_));
      }
    }
    JobLayerRun::Sizing how;
    how.repack = parts_.move;
    return run_.sized_round(cluster, now, std::move(demands), how);
  }

 private:
  // Each job's weight. Least attained service takes what a job has held as what it still needs
  // (heavy tails: the longer a job has run, the longer it will); with `las=app` the
  // application's finished jobs say instead, once enough of them held more than this job has;
  // with `order=app` no job outweighs an earlier one of its application.
  [[nodiscard]] std::vector<double> weights(std::span<Job* const> active) const {
    std::vector<double> w(active.size(), 1.0);
    if (!parts_.las) return w;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const Job& j = *active[i];
      const double a = j.attained_service();
      const double need =
          parts_.las_by_app ? finished_.expected_remaining(j.app()->name(), a).value_or(a) : a;
      w[i] = 1.0 / (1.0 + need / 3600.0 / parts_.service_scale_gpu_hours);
    }
    if (!*parts_.app_order) return w;
    // Per queue and application in submission order, each job at most the least weight of the
    // jobs submitted before it (jobs submitted at the same second do not bound each other); a
    // tenant's jobs are not held back by another tenant's.
    std::map<std::pair<std::string_view, std::string_view>, std::vector<std::size_t>> by_app;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const Job& j = *active[i];
      by_app[{j.spec().queue, parts_.one_app ? std::string_view{} : j.app()->name()}].push_back(i);
    }
    for (auto& [name, jobs] : by_app) {
      std::ranges::stable_sort(jobs, {}, [&](std::size_t i) { return active[i]->spec().submit; });
      double earlier = std::numeric_limits<double>::infinity();
      for (std::size_t from = 0; from < jobs.size();) {
        std::size_t to = from;
        const Seconds at = active[jobs[from]]->spec().submit;
        while (to < jobs.size() && active[jobs[to]]->spec().submit == at) ++to;
        double these = earlier;
        for (std::size_t k = from; k < to; ++k) {
          these = std::min(these, w[jobs[k]]);
          w[jobs[k]] = std::min(w[jobs[k]], earlier);
        }
        earlier = these;
        from = to;
      }
    }
    return w;
  }

  // A job that was active at the last tick and is not now has finished: its application's
  // history takes the service it had held then (the last interval's is not seen, at most 60 s).
  void learn_finished(Seconds now, std::span<Job* const> active) {
    if (now < last_tick_) {  // a new run with the same policy object
      finished_ = sched::jobs::ServiceHistory{};
      last_seen_.clear();
    }
    last_tick_ = now;
    std::map<const Job*, std::pair<std::string, double>> seen;
    for (const Job* j : active) seen.emplace(j, std::pair{j->app()->name(), j->attained_service()});
    for (const auto& [job, was] : last_seen_) {
      if (!seen.contains(job)) finished_.finished(was.first, was.second);
    }
    last_seen_ = std::move(seen);
  }

  int total_;
  int per_node_;
  Parts parts_;
  JobSpeedups speedups_;
  JobLayerRun run_;
  std::map<const Job*, int> max_nodes_;  // the most nodes each job has run on
  std::map<const Job*, Exploration> explored_;
  sched::jobs::ServiceHistory finished_;                            // `las=app`
  std::map<const Job*, std::pair<std::string, double>> last_seen_;  // application, service
  Seconds last_tick_ = -1;
};

}  // namespace

namespace {

// One `key=value` of a lasgo variant into `p`; false if it is not one.
bool parse_part(Parts& p, const std::string& part) {
  if (part == "las=off") {
    p.las = false;
  } else if (part == "las=app") {
    p.las_by_app = true;
  } else if (part == "probe=idle") {
    p.probe_idle = true;
  } else if (part == "start=free" || part == "start=aged") {
    p.free_start = part == "start=free";
  } else if (part == "order=app" || part == "order=none" || part == "order=all") {
    p.app_order = part != "order=none";
    p.one_app = part == "order=all";
  } else if (part == "restart=app" || part == "restart=app-all") {
    p.restart_by_app = true;
    p.restart_by_app_waiting = part == "restart=app-all";
  } else if (part == "packing=off") {
    p.packing = false;
  } else if (part == "batch=off") {
    p.batch = false;
  } else if (part == "restart=off") {
    p.restart = false;
  } else if (part == "explore=off") {
    p.explore = Parts::Explore::kNone;
  } else if (part == "move=off") {
    p.move = false;
  } else if (part == "measured=off") {
    p.measured = false;
  } else if (part == "share=app") {
    p.share = true;
  } else if (part == "steps=app" || part == "steps=own") {
    p.shared_steps = part == "steps=app";
  } else if (part == "prior=app" || part == "prior=linear") {
    p.inherit = part == "prior=app";
  } else if (part == "cap=app") {
    p.cap_from_app = true;
  } else if (part == "net=app") {
    p.shared_network = true;
  } else if (part == "cap=measured" || part == "cap=run") {
    p.open_measured = part == "cap=measured";
  } else if (part == "explore=always") {
    p.cap_oracle = true;
  } else if (part == "explore=double") {
    p.explore = Parts::Explore::kDouble;
  } else if (part == "explore=request") {
    p.explore = Parts::Explore::kRequest;
  } else if (part.rfind("trust=", 0) == 0) {
    char* end = nullptr;
    const long g = std::strtol(part.c_str() + 6, &end, 10);
    if (*end != '\0' || g < 0 || g > 1000) return false;
    p.trusted_growth = static_cast<int>(g);
  } else if (part.rfind("idle=", 0) == 0) {
    char* end = nullptr;
    p.idle_weight = std::strtod(part.c_str() + 5, &end);
    if (*end != '\0' || !(p.idle_weight >= 0 && p.idle_weight < 1)) return false;
  } else if (part == "shape=uniform" || part == "shape=any" || part == "shape=measured" ||
             part == "shape=nodes") {
    p.uneven_fill_weight = 0;
    p.uniform = part == "shape=uniform" || part == "shape=measured";
    p.uneven_measured = part == "shape=measured";
    p.uneven_by_nodes = part == "shape=nodes";
  } else if (part == "shape=fill") {
    p.uniform = true;
    p.uneven_fill_weight = 0.1;
  } else if (part == "carry=on" || part == "carry=off") {
    p.carry = part == "carry=on";
  } else if (part.rfind("rw=", 0) == 0) {
    char* end = nullptr;
    p.restart_weight = std::strtod(part.c_str() + 3, &end);
    if (*end != '\0' || !(*p.restart_weight >= 0)) return false;
  } else if (part.rfind("seen=", 0) == 0) {
    char* end = nullptr;
    const long g = std::strtol(part.c_str() + 5, &end, 10);
    if (*end != '\0' || g < 0 || g > 1000) return false;
    p.seen_growth = static_cast<int>(g);
  } else if (part.rfind("scale=", 0) == 0) {
    // The attained service (GPU-hours) at which a job's weight halves.
    char* end = nullptr;
    p.service_scale_gpu_hours = std::strtod(part.c_str() + 6, &end);
    if (*end != '\0' || !(p.service_scale_gpu_hours > 0)) return false;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<TimelinePolicy> make_lasgo(const PolicyOptions& options,
                                           const std::string& variant) {
  // Parts joined by '+' (`lasgo:carry=on+trust=4`; the command line splits policies on commas).
  Parts p;
  std::size_t from = 0;
  while (from < variant.size()) {
    const std::size_t comma = std::min(variant.find('+', from), variant.size());
    if (!parse_part(p, variant.substr(from, comma - from))) return nullptr;
    from = comma + 1;
  }
  if (!variant.empty() && variant.back() == '+') return nullptr;
  // The fitted model's defaults (docs/sim-timeline.md, "lasgo with the fitted model"): chosen on
  // the load-1.0 workloads, confirmed on load 0.5; the oracle keeps the policy as it was tuned.
  const bool fitted = options.speedup == SpeedupSource::kFitted;
  p.uniform = p.uniform.value_or(fitted);
  p.carry = p.carry.value_or(fitted);
  p.restart_weight = p.restart_weight.value_or(fitted ? 2.0 : 1.0);
  p.shared_steps = p.shared_steps.value_or(fitted);
  p.open_measured = p.open_measured.value_or(fitted);
  p.inherit = p.inherit.value_or(fitted);
  p.explore = p.explore.value_or(Parts::Explore::kRequest);
  p.app_order = p.app_order.value_or(true);
  p.free_start = p.free_start.value_or(true);
  return std::make_unique<Lasgo>(options, p);
}

}  // namespace gpuorch::sim
