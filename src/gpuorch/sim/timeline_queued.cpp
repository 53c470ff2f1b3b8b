#include "gpuorch/sim/timeline_queued.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "gpuorch/base/error.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/jobs/waiting_index.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"

namespace gpuorch::sim {
namespace {

using sched::jobs::JobState;

// Tiresias as the Pollux artifact runs it (timeline-protocol.md §9.1): a job enters the first
// queue and moves to the second once its requested GPUs x wall time since it was first selected
// to run reaches 16 GPU-hours; no promotion back. The rank is the position in q0 then q1.
class LasOrder {
 public:
  void rank(Seconds now, std::span<Job* const> active, std::span<JobState* const> states) {
    for (const Job* j : active) {
      const std::size_t id = j->spec().id;
      if (id >= state_.size()) state_.resize(id + 1);
      State& s = state_[id];
      if (!s.seen) {
        s.seen = true;
        s.entry = next_entry_++;
      }
      if (s.running) s.executed += now - s.last_check;
      s.last_check = now;
      if (s.running && s.queue == 0 && s.executed * j->spec().replicas >= kThresholdGpuSeconds) {
        s.queue = 1;
        s.entry = next_entry_++;  // joins the end of the second queue
      }
    }
    for (std::size_t i = 0; i < active.size(); ++i) {
      const State& s = state_[active[i]->spec().id];
      states[i]->rank = double(s.queue) * 1e15 + double(s.entry);
    }
  }
  // Whether a round at `now` would move a job to the second queue (changing the order): known
  // from the last round, so a tick without one costs nothing.
  [[nodiscard]] bool would_demote(Seconds now) const { return now >= next_demotion_; }

  // Selected to run by the order (placed or not) this round; and when the first of them reaches
  // the threshold if nothing changes. `active`: every job that was or is being served (the
  // others' service does not move).
  void selected(Seconds now, std::span<Job* const> active, std::span<JobState* const> states) {
    next_demotion_ = std::numeric_limits<Seconds>::max();
    for (std::size_t i = 0; i < active.size(); ++i) {
      State& s = state_[active[i]->spec().id];
      const bool was = s.running;
      s.running = states[i]->replicas() > 0 || states[i]->selected;
      // Its service counts from now (rank() saw every job only when it ranked them all).
      if (s.running && !was) s.last_check = now;
      if (s.running && s.queue == 0) {
        const Seconds r = std::max(1, active[i]->spec().replicas);
        const Seconds left = std::max<Seconds>(0, (kThresholdGpuSeconds + r - 1) / r - s.executed);
        next_demotion_ = std::min(next_demotion_, s.last_check + left);
      }
    }
  }

 private:
  static constexpr Seconds kThresholdGpuSeconds = 16 * 3600;
  struct State {
    bool seen = false;
    bool running = false;
    int queue = 0;
    std::uint64_t entry = 0;
    Seconds executed = 0;
    Seconds last_check = 0;
  };
  std::vector<State> state_;  // by job id
  std::uint64_t next_entry_ = 0;
  Seconds next_demotion_ = 0;
};

std::string placement_name(const QueuedOptions& o) {
  if (!o.placement.empty()) return o.placement;
  return std::string(sched::spread_policy(o.order == "tiresias"
                                              ? sched::ReplicaSpread::kMostFreeFirst
                                              : sched::ReplicaSpread::kFewestNodes));
}

// The oracle run time of a waiting job on the GPUs it asked for (SJF's order).
double oracle_run_time(const Job& j, int per_node) {
  if (j.app() == nullptr) return j.remaining_iterations();
  const int r = j.spec().replicas;
  const BatchConfig b = fixed_batch_config(*j.app(), r, j.spec().batch, false);
  const StepTime st = j.app()->throughput(packed_placement(r, per_node), b.local);
  return j.remaining_iterations() * (st.step + b.accum * (st.step - st.sync));
}

class Queued final : public TimelinePolicy {
 public:
  explicit Queued(QueuedOptions o)
      : options_(std::move(o)),
        run_(options_.queues, placement_name(options_)),
        waiting_(run_.tree().size()),
        unlisted_(run_.tree().size()) {}

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    // The rounds that leave waiting jobs out bound them by what they ask in GPUs, CPU and memory;
    // a job's GPU model, and so its slot, is known only once the round tries it: with quotas per
    // GPU model every round is over every job.
    const bool by_model = !run_.tree().gpu_models().empty();
    if (options_.order == "fifo" && events().known && !by_model) return strict_fifo(now, cluster);
    if (options_.order == "tiresias" && events().known && !options_.over_quota_by_rank &&
        !by_model) {
      return las_on_events(now, cluster);
    }
    if (options_.order == "sjf" && events().known && !by_model) return sjf_on_events(now, cluster);
    // A round is a function of the active jobs, their ranks and the cluster, and the cluster
    // changes only when jobs come or go: with the same jobs (and, for tiresias, no demotion)
    // the last round's decision stands. Most ticks of a long trace are such ticks.
    // (The engine's events say whether jobs came or went; without them, the active jobs are
    // compared as pointers with the last round's.)
    const TickEvents& e = events();
    const bool same_jobs = e.known ? e.arrived.empty() && e.finished.empty()
                                   : std::equal(active.begin(), active.end(), last_active_.begin(),
                                                last_active_.end());
    const bool demoted = options_.order == "tiresias" && las_.would_demote(now);
    if (same_jobs && !demoted) return {};
    if (!e.known) last_active_.assign(active.begin(), active.end());
    const auto states =
        run_.states(active, [this](const Job& j) -> const workload::JobSpec& { return rigid(j); });
    for (std::size_t i = 0; i < active.size(); ++i) states[i]->seq = active[i]->spec().id;
    if (options_.order == "sjf") {
      for (std::size_t i = 0; i < active.size(); ++i) {
        const Job& j = *active[i];
        states[i]->rank = j.gpus() > 0 ? -1 : oracle_run_time(j, options_.policy.gpus_per_node);
      }
    }
    sched::jobs::RoundOptions round;
    round.now = now;
    round.backfill = options_.order != "fifo";
    round.preempt_by_rank = options_.order == "tiresias";
    round.over_quota_by_rank = options_.over_quota_by_rank;
    round.explain = false;  // the simulator reports outcomes, not per-round explanations
    if (options_.order == "tiresias") las_.rank(now, active, states);
    Reallocations out = run_.round(cluster, round);
    if (options_.order == "tiresias") las_.selected(now, active, states);
    return out;
  }

  // tiresias without visiting every waiting job: the round gets the jobs being served (with GPUs,
  // or selected by the order last round: the only ones whose rank or service can change) and
  // adds, where it reaches them, the waiting jobs that could be selected or could start on
  // what is left free (sched::jobs::WaitingIndex); the others' demand keeps the fair shares.
  // The same decisions as the round over every job, at O(served + what could start) a round.
  Reallocations las_on_events(Seconds now, cluster::Cluster& cluster) {
    const TickEvents& e = events();
    if (e.arrived.empty() && e.finished.empty() && !las_.would_demote(now)) return {};
    if (!index_) index_.emplace(run_.tree().size());
    for (Job* j : e.finished) {
      for (auto* list : {&running_, &chosen_}) {
        const auto it = std::lower_bound(list->begin(), list->end(), j, by_id);
        if (it != list->end() && *it == j) list->erase(it);
      }
      unindex(*j);
    }
    // Scratch kept between rounds (a round allocates nothing when nothing grows).
    auto& [arrived, served, round_jobs, added, states] = scratch_;
    arrived.assign(e.arrived.begin(), e.arrived.end());
    std::sort(arrived.begin(), arrived.end(), by_id);
    for (Job* j : arrived) {
      const std::size_t id = j->spec().id;
      if (id >= las_jobs_.size()) las_jobs_.resize(id + 1);
      las_jobs_[id] = {j, &run_.state(*j, [this](const Job& x) -> const workload::JobSpec& {
                         return rigid(x);
                       })};
    }
    // The jobs whose rank can change, in id order (the order LasOrder numbers them in).
    // The round gets them (arrivals too: they usually start at once); the index, the others.
    served.clear();
    round_jobs.clear();
    std::merge(running_.begin(), running_.end(), chosen_.begin(), chosen_.end(),
               std::back_inserter(served), by_id);
    std::merge(served.begin(), served.end(), arrived.begin(), arrived.end(),
               std::back_inserter(round_jobs), by_id);
    states.clear();
    for (Job* j : round_jobs) states.push_back(las_jobs_[j->spec().id].state);
    las_.rank(now, round_jobs, states);
    added.clear();  // by the round, from the index
    const auto collect = [&](std::vector<JobState*>& out, std::size_t from) {
      for (std::size_t i = from; i < out.size(); ++i) {
        added.push_back(las_jobs_[static_cast<const JobSpec*>(out[i]->spec)->id].job);
      }
    };
    sched::jobs::RoundOptions round;
    round.now = now;
    round.backfill = true;
    round.preempt_by_rank = true;
    round.explain = false;
    if (index_->size() > 0) {
      index_->begin_round();
      round.unlisted_demand = index_->demand();
      round.more_to_order = [&](const sched::jobs::OrderStart& at, std::vector<JobState*>& out) {
        const std::size_t from = out.size();
        index_->selectable(at, out);
        collect(out, from);
      };
      round.more_over_share = [&](const sched::jobs::OverShareStart& at,
                                  std::vector<JobState*>& out) {
        const std::size_t from = out.size();
        index_->startable(at, out);
        collect(out, from);
      };
    }
    Reallocations out = run_.round(cluster, round_jobs, round);
    for (Job* j : added) {
      const JobState& s = *las_jobs_[j->spec().id].state;
      if (s.changed) out.push_back({j, s.placements});
    }
    // Who is served now: every one of them was in the round. The added jobs still waiting
    // unselected stay in the index, the round's other jobs that are go into it.
    const std::size_t listed = round_jobs.size();
    std::sort(added.begin(), added.end(), by_id);
    round_jobs.insert(round_jobs.end(), added.begin(), added.end());
    std::inplace_merge(round_jobs.begin(), round_jobs.begin() + std::ptrdiff_t(listed),
                       round_jobs.end(), by_id);
    states.clear();
    running_.clear();
    chosen_.clear();
    for (Job* j : round_jobs) {
      const JobState& s = *las_jobs_[j->spec().id].state;
      states.push_back(las_jobs_[j->spec().id].state);
      if (s.replicas() > 0 || s.selected) {
        (s.replicas() > 0 ? running_ : chosen_).push_back(j);
        unindex(*j);
      } else {
        index(*j);
      }
    }
    las_.selected(now, round_jobs, states);
    return out;
  }

  // sjf without visiting every waiting job: the round gets the running jobs (rank -1, the only
  // ones whose placements can change without starting) and keeps the waiting ones in the
  // WaitingIndex, whose rank (the oracle run time) does not change while they wait. sjf's round
  // does not preempt by rank, so the index's budget for the order does not apply; what it gives
  // back instead (RoundOptions::more_to_allocate, next_candidate; waiting_index.hpp) is every job
  // that could start on what is free when the walk begins (that only shrinks during it) and, at
  // each job's place in the post-filters' order, the next that reclaim could start then, asked
  // again after each since reclaim does not only shrink what is free. The others' tries change
  // nothing. Ties of rank go by id (JobState::seq), as in the round over every job.
  Reallocations sjf_on_events(Seconds now, cluster::Cluster& cluster) {
    const TickEvents& e = events();
    if (e.arrived.empty() && e.finished.empty()) return {};
    if (!index_) index_.emplace(run_.tree().size());
    for (Job* j : e.finished) {
      const auto it = std::lower_bound(running_.begin(), running_.end(), j, by_id);
      if (it != running_.end() && *it == j) running_.erase(it);
      unindex(*j);
    }
    for (Job* j : e.arrived) {
      const std::size_t id = j->spec().id;
      if (id >= las_jobs_.size()) las_jobs_.resize(id + 1);
      las_jobs_[id] = {j, &run_.state(*j, [this](const Job& x) -> const workload::JobSpec& {
                         return rigid(x);
                       })};
      to_wait(*j);
    }
    auto& added = scratch_.added;
    added.clear();
    for (Job* j : running_) las_jobs_[j->spec().id].state->rank = -1;
    sched::jobs::RoundOptions round;
    round.now = now;
    round.backfill = true;
    round.explain = false;
    index_->begin_round();
    round.unlisted_demand = index_->demand();
    round.more_to_allocate = [&](const sched::jobs::OverShareStart& at,
                                 std::vector<JobState*>& out) {
      const std::size_t from = out.size();
      index_->startable(at, out);
      for (std::size_t i = from; i < out.size(); ++i) added.push_back(job_of(*out[i]));
    };
    round.next_candidate = [&](const sched::jobs::CandidateQuery& at) -> JobState* {
      JobState* s = index_->next_candidate(at);
      if (s != nullptr) added.push_back(job_of(*s));
      return s;
    };
    const std::vector<Job*> listed = running_;
    Reallocations out = run_.round(cluster, listed, round);
    for (Job* j : added) {
      const JobState& s = *las_jobs_[j->spec().id].state;
      if (s.changed) out.push_back({j, s.placements});
    }
    for (Job* j : listed) {  // preempted (reclaim): back among the waiting
      if (las_jobs_[j->spec().id].state->replicas() > 0) continue;
      running_.erase(std::lower_bound(running_.begin(), running_.end(), j, by_id));
      to_wait(*j);
    }
    for (Job* j : added) {
      if (las_jobs_[j->spec().id].state->replicas() == 0) continue;
      unindex(*j);
      running_.insert(std::lower_bound(running_.begin(), running_.end(), j, by_id), j);
    }
    return out;
  }

 private:
  // fifo without visiting every waiting job: in a strict-FIFO queue a job starts only after every
  // job before it has started, and a fifo round starts jobs only on what is free when it begins
  // (nothing shrinks first), except one blocked job per queue that may reclaim. So the jobs of a
  // queue behind more than is free cannot start this round. The round gets the running jobs and
  // each queue's waiting jobs up to the first past that bound, with the demand of the others (the
  // same fair shares, the same decisions), and runs only when jobs came or went: a round costs
  // O(running + queues x jobs that fit), not O(waiting).
  Reallocations strict_fifo(Seconds now, cluster::Cluster& cluster) {
    const TickEvents& e = events();
    if (e.arrived.empty() && e.finished.empty()) return {};
    const auto spec_of = [this](const Job& j) -> const workload::JobSpec& { return rigid(j); };
    for (Job* j : e.finished) {
      const auto it = std::lower_bound(running_.begin(), running_.end(), j, by_id);
      if (it != running_.end() && *it == j) running_.erase(it);
    }
    for (Job* j : e.arrived) wait(*j, run_.state(*j, spec_of));
    std::vector<Job*> listed = running_;
    std::vector<sched::jobs::Resources> unlisted = unlisted_;
    const std::int64_t free = cluster.gpu_milli_capacity() - cluster.gpu_milli_used();
    for (std::size_t q = 0; q < waiting_.size(); ++q) {
      std::int64_t ahead = 0;
      for (const auto& [key, j] : waiting_[q]) {
        const sched::jobs::Resources need = gang(run_.state(*j));
        listed.push_back(j);
        unlisted[q] -= need;
        ahead += need.gpu_milli();
        if (ahead > free) break;
      }
    }
    std::sort(listed.begin(), listed.end(), by_id);
    sched::jobs::RoundOptions round;
    round.now = now;
    round.backfill = false;
    round.explain = false;
    round.unlisted_demand = unlisted;
    Reallocations out = run_.round(cluster, listed, round);
    for (const Reallocation& r : out) {
      const JobState& s = run_.state(*r.job);
      const bool runs = std::binary_search(running_.begin(), running_.end(), r.job, by_id);
      if (!r.placements.empty() && !runs) {
        unwait(*r.job, s);
        running_.insert(std::lower_bound(running_.begin(), running_.end(), r.job, by_id), r.job);
      } else if (r.placements.empty() && runs) {
        running_.erase(std::lower_bound(running_.begin(), running_.end(), r.job, by_id));
        wait(*r.job, s);  // preempted: back to its place in its queue
      }
    }
    return out;
  }

  static bool by_id(const Job* a, const Job* b) { return a->spec().id < b->spec().id; }
  // What a waiting job's gang holds once it starts.
  static sched::jobs::Resources gang(const JobState& s) {
    return sched::jobs::request_of(s.spec->replica) * std::max(1, s.spec->min_replicas);
  }
  // The job layer's order within a queue: priority, then rank (its id for fifo).
  using QueueKey = std::tuple<int, double, std::size_t>;
  static QueueKey key(const Job& j, const JobState& s) {
    return {-s.spec->priority, s.rank, j.spec().id};
  }
  void index(const Job& j) {
    LasJob& l = las_jobs_[j.spec().id];
    if (!l.indexed) index_->add(*l.state);
    l.indexed = true;
  }
  // A waiting sjf job joins the index with its rank, fixed while it waits.
  void to_wait(Job& j) {
    JobState& s = *las_jobs_[j.spec().id].state;
    s.rank = oracle_run_time(j, options_.policy.gpus_per_node);
    s.seq = j.spec().id;
    index(j);
  }
  Job* job_of(const JobState& s) const {
    return las_jobs_[static_cast<const JobSpec*>(s.spec)->id].job;
  }
  void unindex(const Job& j) {
    LasJob& l = las_jobs_[j.spec().id];
    if (l.indexed) index_->remove(*l.state);
    l.indexed = false;
  }
  void wait(Job& j, const JobState& s) {
    waiting_[s.queue].emplace(key(j, s), &j);
    unlisted_[s.queue] += gang(s);
  }
  void unwait(Job& j, const JobState& s) {
    waiting_[s.queue].erase(key(j, s));
    unlisted_[s.queue] -= gang(s);
  }

  // These orders run each job on exactly the GPUs it asked for (an elastic Pollux job too).
  const workload::JobSpec& rigid(const Job& job) {
    const JobSpec& spec = job.spec();
    if (spec.id >= rigid_.size()) rigid_.resize(spec.id + 1);
    auto& r = rigid_[spec.id];
    if (!r) {
      r = std::make_unique<JobSpec>(spec);  // keeps the id (las_on_events finds jobs by it)
      r->min_replicas = r->max_replicas = spec.replicas;
    }
    return *r;
  }

  QueuedOptions options_;
  std::vector<std::unique_ptr<JobSpec>> rigid_;  // by job id
  JobLayerRun run_;
  LasOrder las_;
  std::vector<Job*> last_active_;  // the active jobs of the last round (without events)
  // strict_fifo's view, kept from the engine's events: the jobs with GPUs (by id), each queue's
  // waiting jobs in its order, and what they would hold.
  std::vector<Job*> running_;
  std::vector<std::map<QueueKey, Job*>> waiting_;
  std::vector<sched::jobs::Resources> unlisted_;
  // las_on_events's view: the jobs selected by the order without GPUs (by id; running_ holds
  // those with GPUs), the other waiting jobs, and each active job by its state.
  std::vector<Job*> chosen_;
  std::optional<sched::jobs::WaitingIndex> index_;
  struct LasJob {
    Job* job = nullptr;
    JobState* state = nullptr;
    bool indexed = false;
  };
  std::vector<LasJob> las_jobs_;  // by job id
  struct Scratch {
    std::vector<Job*> arrived, served, round_jobs, added;
    std::vector<JobState*> states;
  } scratch_;
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_queued(const QueuedOptions& options) {
  if (options.order != "fifo" && options.order != "sjf" && options.order != "tiresias") {
    return nullptr;
  }
  sched::check_policy_spec(placement_name(options));
  return std::make_unique<Queued>(options);
}

void check_job_queues(const std::vector<JobSpec>& jobs, const sched::jobs::QueueTree& queues) {
  for (const JobSpec& j : jobs) {
    const auto q = queues.find(j.queue);
    if (!q || !queues.leaf(*q)) {
      base::fail_input(j.file, j.line,
                       fmt::format("job {}: queue '{}' is {} of the queue file", j.name, j.queue,
                                   q ? "not a leaf queue" : "not a queue"));
    }
  }
}

}  // namespace gpuorch::sim
