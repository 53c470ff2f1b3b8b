// fifo:per-job, `gpuorch scheduler --queues`'s rule in the simulator (docs/sim-timeline.md).
//
// The cluster scheduler decides its pending jobs one at a time, in kube-scheduler's queue order
// (priority, then creation time, then name), each in a job-layer round over the jobs that run and
// it alone (k8s::ClusterMirror::admit): the job starts on free GPUs or, failing that, reclaims or
// preempts; one that cannot start holds nothing up; the waiting jobs behind it play no part in
// its round (neither in the fair shares nor as competitors). A job's place in that order is when
// its pods were created, so a preempted job, whose pods its controller creates anew, goes to the
// back. fifo (strict FIFO, one round over every job) differs on all three counts.
//
// fifo:per-job:elastic runs every job of R replicas as the scheduler runs an elastic gang of R
// pods with PodGroup minMember ceil(R/2): it starts with as many pods as the growth advice
// allows (at least minMember), a running gang's pods left pending grow it at most once per
// resize interval and only as far as its measured speed says pays for the restart, and a job
// that cannot start makes at most one gang above minMember give back the pods that pay least
// (sched/jobs/measured_growth.hpp: the same advice, fed by the reports each job's launcher
// would publish, timeline_throughput.hpp). A gang's pending pods are decided in its place in
// the order, as the scheduler takes a pending pod's whole gang.
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "gpuorch/sched/jobs/measured_growth.hpp"
#include "gpuorch/sched/replica_gang.hpp"
#include "gpuorch/sim/timeline_policy.hpp"
#include "gpuorch/sim/timeline_throughput.hpp"

namespace gpuorch::sim {
namespace {

class PerJobFifo final : public TimelinePolicy {
 public:
  PerJobFifo(const PolicyOptions& o, std::optional<ElasticGangs> elastic)
      : elastic_(elastic),
        run_(o.queues, std::string(sched::spread_policy(sched::ReplicaSpread::kFewestNodes))) {}

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    // The cluster changes only when jobs come or go: otherwise every waiting job was tried
    // against the same cluster last time (not so for elastic gangs, whose resize interval runs).
    brief_.clear();
    const TickEvents& e = events();
    if (!elastic_ && e.known && e.arrived.empty() && e.finished.empty()) return {};
    if (e.known) {
      for (Job* j : e.finished) leave(*j);
      for (Job* j : e.arrived) enter(*j);
    } else {
      sync(active);
    }
    if (elastic_) publish(now);
    changes_.clear();
    started_now_.clear();
    shrink_tried_ = false;
    // The scheduler decides every pending pod again after any change, and a decision that
    // needs victims waits until the pods it bound are seen bound (they cannot be evicted
    // before): so a tick's decisions are repeated in the queue's order while a pass changed
    // something, and a pass ends where a job would preempt after a bind of the same pass. A
    // job earlier in the queue thus gets what a later one freed, as on the cluster. Bounded:
    // what is still undecided after kMostPasses waits for the next tick.
    for (int pass = 0; pass < kMostPasses && decide_pass(now, cluster); ++pass) {
    }
    Reallocations out;
    for (auto& [id, r] : changes_) out.push_back(std::move(r));
    return out;
  }

  [[nodiscard]] std::span<const BriefRun> started_and_preempted() const override { return brief_; }
  [[nodiscard]] std::span<const Published> published() const override { return published_; }

 private:
  using Key = std::pair<int, std::uint64_t>;  // (-priority, entry)
  static constexpr int kMostPasses = 16;

  // One pass over the jobs with pending pods in the scheduler's queue order: the waiting ones
  // and, elastic, the running gangs below their pods. A victim rejoins at the back, so it comes
  // again. Whether it changed anything.
  bool decide_pass(Seconds now, cluster::Cluster& cluster) {
    pass_changed_ = false;
    bound_in_pass_ = false;
    awaits_bound_ = false;
    Key after{std::numeric_limits<int>::min(), 0};
    for (;;) {
      const auto w = waiting_.upper_bound(after);
      std::optional<Key> key;
      Job* next = nullptr;
      if (w != waiting_.end()) {
        key = w->first;
        next = w->second;
      }
      bool growing = false;
      if (elastic_) {
        for (const auto& [entry, j] : running_) {
          const Key k{-j->spec().priority, entry};
          if (k <= after || (key && *key < k) || state(*j).replicas() >= j->spec().replicas) {
            continue;
          }
          key = k;
          next = j;
          growing = true;
        }
      }
      if (!key) break;
      after = *key;
      if (growing) {
        grow(now, *next, cluster);
      } else if (!start(now, *next, cluster) && !awaits_bound_ && elastic_ &&
                 shrink_for(now, *next, cluster)) {
        start(now, *next, cluster);  // the scheduler's retry once the shrunk pods are gone
      }
      if (awaits_bound_) break;  // decided again from the queue's head once they are seen
    }
    return pass_changed_;
  }

  // What the scheduler keeps per elastic gang: its last start or resize, its pods' reports.
  struct Gang {
    Seconds resized = 0;
    std::map<std::tuple<int, int, int>, workload::ThroughputReport> measured;
  };

  sched::jobs::JobState& state(Job& j) {
    return run_.state(j, [this](const Job& x) -> const workload::JobSpec& { return spec_of(x); });
  }
  // PodGroup minMember: ceil(R/2) for an elastic gang of R pods; all of them otherwise.
  [[nodiscard]] int min_member(const Job& j) const {
    const int r = j.spec().replicas;
    return elastic_ ? std::max(1, (r + 1) / 2) : r;
  }
  [[nodiscard]] bool elastic_gang(const Job& j) const {
    return elastic_ && min_member(j) < j.spec().replicas;
  }

  // The reports a running gang's launcher publishes by this tick: its step at the size it ran
  // since before the tick (a resize restarts it; it reports once it trains again).
  void publish(Seconds now) {
    published_.clear();
    for (const auto& [entry, j] : running_) {
      if (!elastic_gang(*j) || j->gpus() == 0 || j->app() == nullptr) continue;
      Gang& g = gangs_[j->spec().id];
      if (g.resized >= now) continue;
      const workload::ThroughputReport r = published_throughput(*j, now);
      g.measured[{r.nodes, r.world_size, r.local_batch}] = r;
      published_.push_back({j, r});
    }
  }

  sched::jobs::GangGrowth growth_of(const Job& j, int running,
                                    std::vector<workload::ThroughputReport>& measured) {
    measured.clear();
    for (const auto& [k, r] : gangs_[j.spec().id].measured) measured.push_back(r);
    sched::jobs::GangGrowth g;
    g.gang = j.spec().name;
    g.running = running;
    g.min = min_member(j);
    g.most = j.spec().replicas;
    g.gpus_per_pod = std::max(1, j.spec().replica.gpu_count);
    g.measured = measured;
    g.resize_interval_s = elastic_->resize_interval_s;
    g.restart_s = elastic_->resize_cost_s;
    return g;
  }

  // The running jobs as admit() sees them: each gang's bound pods, its surplus above
  // minMember the first victims.
  void fit_running_specs() {
    round_states_.clear();
    round_jobs_.clear();
    for (const auto& [entry, j] : running_) {
      sched::jobs::JobState& s = state(*j);
      JobSpec& spec = *specs_[j->spec().id];
      spec.max_replicas = s.replicas();
      spec.min_replicas = std::min(min_member(*j), s.replicas());
      s.rank = 0;  // admit()'s states: order by priority, then the span's order
      s.seq = 0;
      round_states_.push_back(&s);
      round_jobs_.push_back(j);
    }
  }

  // `job`'s round: only it is placed (starts or grows), as the scheduler's admission of one
  // job binds that job's pods only; a running gang it takes replicas from grows back in its
  // own turn, by its resize interval.
  void run_round(Seconds now, const Job& job, cluster::Cluster& cluster) {
    sched::jobs::RoundOptions options;
    options.now = now;
    options.explain = false;  // the simulator reports outcomes
    // Victims only among pods seen bound: none of this pass's binds. A job that would need
    // them (or finds no victims where preemption could make room) waits for the next pass.
    options.preempt = !bound_in_pass_;
    run_.round_on(cluster, round_states_, options, job.spec().name);
    for (std::size_t i = 0; i < round_jobs_.size(); ++i) {
      if (round_states_[i]->changed) {
        changes_[round_jobs_[i]->spec().id] = {round_jobs_[i], round_states_[i]->placements};
        pass_changed_ = true;
      }
    }
    const sched::jobs::JobState& asked = *round_states_.back();
    if (asked.replicas() > 0 && asked.changed) {
      bound_in_pass_ = pass_changed_ = true;  // a growth's pods are of no engine job
    } else if (!options.preempt && (asked.waiting == sched::jobs::WaitReason::kShareHeld ||
                                    asked.waiting == sched::jobs::WaitReason::kLowerPriority)) {
      awaits_bound_ = true;
    }
  }

  // Running jobs the round took every pod of: preempted, their pods created anew at the back.
  void requeue_victims() {
    for (auto r = running_.begin(); r != running_.end();) {
      if (state(*r->second).replicas() > 0) {
        ++r;
        continue;
      }
      Job* victim = r->second;
      r = running_.erase(r);
      // Started this tick and preempted again: no net change for the engine to record.
      if (const auto b = started_now_.find(victim->spec().id);
          b != started_now_.end() && victim->placements().empty()) {
        int gpus = 0;
        for (const auto& p : b->second) gpus += static_cast<int>(p.gpus.size());
        brief_.push_back({victim, static_cast<int>(b->second.size()), gpus});
      }
      enter(*victim);
    }
  }

  // A waiting job's round over the running jobs and it: whether it started.
  bool start(Seconds now, Job& pending, cluster::Cluster& cluster) {
    sched::jobs::JobState& ps = state(pending);
    if (ps.replicas() > 0) return true;
    JobSpec& spec = *specs_[pending.spec().id];
    int asked = pending.spec().replicas;
    if (elastic_gang(pending)) {
      std::vector<workload::ThroughputReport> measured;
      asked = sched::jobs::advise_growth(growth_of(pending, 0, measured)).target;
    }
    spec.max_replicas = asked;
    spec.min_replicas = std::min(min_member(pending), asked);
    fit_running_specs();
    ps.rank = 0;
    ps.seq = 0;
    round_states_.push_back(&ps);
    round_jobs_.push_back(&pending);
    run_round(now, pending, cluster);
    const bool started = ps.replicas() > 0;
    if (started) {
      started_now_[pending.spec().id] = ps.placements;
      waiting_.erase({-pending.spec().priority, entry_[pending.spec().id]});
      gangs_[pending.spec().id].resized = now;
    }
    requeue_victims();
    if (started) running_.emplace(entry_[pending.spec().id], &pending);
    return started;
  }

  // A running gang's pending pods, asked for as a job of their own (at least one), when its
  // resize interval has passed and its measured speed says more pods pay.
  void grow(Seconds now, Job& job, cluster::Cluster& cluster) {
    Gang& g = gangs_[job.spec().id];
    if (double(now - g.resized) < elastic_->resize_interval_s) return;
    sched::jobs::JobState& s = state(job);
    std::vector<workload::ThroughputReport> measured;
    const int target = sched::jobs::advise_growth(growth_of(job, s.replicas(), measured)).target;
    const int room = std::min(target, job.spec().replicas) - s.replicas();
    if (room <= 0) return;
    fit_running_specs();
    growth_spec_ = *specs_[job.spec().id];
    growth_spec_.min_replicas = 1;
    growth_spec_.max_replicas = room;
    sched::jobs::JobState more;
    more.spec = &growth_spec_;
    more.queue = s.queue;
    round_states_.push_back(&more);
    run_round(now, job, cluster);
    if (more.replicas() > 0) {
      for (auto& p : more.placements) s.placements.push_back(std::move(p));
      changes_[job.spec().id] = {&job, s.placements};
      g.resized = now;
    }
    requeue_victims();
  }

  // The scheduler's shrink_for: for a job that cannot start, the first gang (in creation order)
  // above minMember whose interval has passed gives back the pods its measured speed says pay
  // less than a resize, when that frees enough. At most once a tick (the scheduler: a second).
  bool shrink_for(Seconds now, const Job& waiting, cluster::Cluster& cluster) {
    if (shrink_tried_) return false;
    shrink_tried_ = true;
    const std::int64_t need =
        std::int64_t(waiting.spec().replicas) * std::max(1, waiting.spec().replica.gpu_count);
    for (const auto& [entry, j] : running_) {
      sched::jobs::JobState& s = state(*j);
      const int bound = s.replicas();
      if (!elastic_gang(*j) || bound <= min_member(*j) || !j->spec().preemptible) continue;
      Gang& g = gangs_[j->spec().id];
      if (double(now - g.resized) < elastic_->resize_interval_s) continue;
      std::vector<workload::ThroughputReport> measured;
      auto growth = growth_of(*j, bound, measured);
      growth.most = bound;
      const int give = bound - sched::jobs::advise_shrink(growth).target;
      const int per_pod = std::max(1, j->spec().replica.gpu_count);
      if (give <= 0 || cluster.fully_free_gpus_total() + give * per_pod < need) continue;
      run_.shrink(cluster, s, give);
      s.running_since = now;  // shrunk: restarts
      changes_[j->spec().id] = {j, s.placements};
      g.resized = now;
      pass_changed_ = true;
      return true;
    }
    return false;
  }

  // A job joins the waiting jobs at the back of its priority (a new incarnation: a new gang).
  void enter(Job& j) {
    const std::size_t id = j.spec().id;
    if (id >= entry_.size()) entry_.resize(id + 1, 0);
    entry_[id] = ++next_entry_;
    waiting_.emplace(std::make_pair(-j.spec().priority, next_entry_), &j);
    state(j);
    gangs_.erase(id);
  }
  void leave(const Job& j) {
    const std::size_t id = j.spec().id;
    running_.erase(entry_[id]);
    waiting_.erase({-j.spec().priority, entry_[id]});
    gangs_.erase(id);
  }
  // Without the engine's events: arrivals are the active jobs not seen before, finishes the
  // tracked jobs no longer active.
  void sync(std::span<Job* const> active) {
    std::vector<Job*> gone;
    for (const auto& [entry, j] : running_) gone.push_back(j);
    for (const auto& [key, j] : waiting_) gone.push_back(j);
    std::erase_if(
        gone, [&](Job* j) { return std::find(active.begin(), active.end(), j) != active.end(); });
    for (Job* j : gone) leave(*j);
    for (Job* j : active) {
      const std::size_t id = j->spec().id;
      if (id >= seen_.size()) seen_.resize(id + 1, false);
      if (!seen_[id]) enter(*j);
      seen_[id] = true;
    }
  }
  // The job's spec as the rounds see it: its replica counts set before each round (fifo's jobs
  // run on exactly the GPUs they asked for, an elastic Pollux job too, unless elastic_).
  const workload::JobSpec& spec_of(const Job& job) {
    const JobSpec& spec = job.spec();
    if (spec.id >= specs_.size()) specs_.resize(spec.id + 1);
    auto& r = specs_[spec.id];
    if (!r) {
      r = std::make_unique<JobSpec>(spec);
      r->min_replicas = r->max_replicas = spec.replicas;
    }
    return *r;
  }

  std::optional<ElasticGangs> elastic_;
  std::vector<std::unique_ptr<JobSpec>> specs_;  // by job id
  std::vector<BriefRun> brief_;                  // of the last round
  std::vector<Published> published_;             // of the last round
  JobLayerRun run_;
  std::uint64_t next_entry_ = 0;
  std::vector<std::uint64_t> entry_;  // by job id: when it last joined the waiting jobs
  std::vector<bool> seen_;            // by job id (without the engine's events)
  std::map<Key, Job*> waiting_;
  std::map<std::uint64_t, Job*> running_;  // by entry
  std::map<std::size_t, Gang> gangs_;      // by job id, elastic gangs of this incarnation
  // Of the tick: the last placements by job id, the jobs started, whether a shrink was tried.
  std::map<std::size_t, Reallocation> changes_;
  std::map<std::size_t, std::vector<cluster::Placement>> started_now_;
  bool shrink_tried_ = false;
  // Of the pass: whether it changed anything, bound pods, and ends to wait for them.
  bool pass_changed_ = false;
  bool bound_in_pass_ = false;
  bool awaits_bound_ = false;
  // Of the round being run.
  std::vector<sched::jobs::JobState*> round_states_;
  std::vector<Job*> round_jobs_;
  workload::JobSpec growth_spec_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_fifo_per_job(const PolicyOptions& options,
                                                  std::optional<ElasticGangs> elastic) {
  return std::make_unique<PerJobFifo>(options, elastic);
}

}  // namespace gpuorch::sim
