// fifo:per-job, `gpuorch scheduler --queues`'s rule in the simulator (docs/sim-timeline.md).
//
// The cluster scheduler decides its pending jobs one at a time, in kube-scheduler's queue order
// (priority, then creation time, then name), each in a job-layer round over the jobs that run and
// it alone (k8s::ClusterMirror::admit): the job starts on free GPUs or, failing that, reclaims or
// preempts; one that cannot start holds nothing up; the waiting jobs behind it play no part in
// its round (neither in the fair shares nor as competitors). A job's place in that order is when
// its pods were created, so a preempted job, whose pods its controller creates anew, goes to the
// back. fifo (strict FIFO, one round over every job) differs on all three counts.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "gpuorch/sched/replica_gang.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {
namespace {

class PerJobFifo final : public TimelinePolicy {
 public:
  explicit PerJobFifo(const PolicyOptions& o)
      : run_(o.queues, std::string(sched::spread_policy(sched::ReplicaSpread::kFewestNodes))) {}

  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    // The cluster changes only when jobs come or go: otherwise every waiting job was tried
    // against the same cluster last time.
    brief_.clear();
    const TickEvents& e = events();
    if (e.known && e.arrived.empty() && e.finished.empty()) return {};
    if (e.known) {
      for (Job* j : e.finished) leave(*j);
      for (Job* j : e.arrived) enter(*j);
    } else {
      sync(active);
    }
    std::map<std::size_t, Reallocation> changes;  // by job id: the last placements of the tick
    std::map<std::size_t, std::vector<cluster::Placement>> started_now;  // by job id
    std::vector<Job*> round_jobs;
    sched::jobs::RoundOptions options;
    options.now = now;
    options.explain = false;  // the simulator reports outcomes
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      Job* pending = it->second;
      // The running jobs in the order the cluster lists them (pod names: creation order), then
      // the pending job, as admit() builds its round.
      round_jobs.clear();
      for (const auto& [entry, j] : running_) round_jobs.push_back(j);
      round_jobs.push_back(pending);
      for (Job* j : round_jobs) {
        sched::jobs::JobState& s = state(*j);
        s.rank = 0;  // admit()'s states: order by priority, then the span's order
        s.seq = 0;
      }
      for (Reallocation& r : run_.round(cluster, round_jobs, options)) {
        changes[r.job->spec().id] = std::move(r);
      }
      const bool started = state(*pending).replicas() > 0;
      if (started) started_now[pending->spec().id] = state(*pending).placements;
      if (started) it = waiting_.erase(it);
      for (auto r = running_.begin(); r != running_.end();) {
        if (state(*r->second).replicas() > 0) {
          ++r;
          continue;
        }
        Job* victim = r->second;  // preempted: its pods are created anew, at the back
        r = running_.erase(r);
        // Started this tick and preempted again: no net change for the engine to record.
        if (const auto b = started_now.find(victim->spec().id);
            b != started_now.end() && victim->placements().empty()) {
          int gpus = 0;
          for (const auto& p : b->second) gpus += static_cast<int>(p.gpus.size());
          brief_.push_back({victim, static_cast<int>(b->second.size()), gpus});
        }
        enter(*victim);
      }
      if (started) running_.emplace(entry_[pending->spec().id], pending);
      if (!started) ++it;
    }
    Reallocations out;
    for (auto& [id, r] : changes) out.push_back(std::move(r));
    return out;
  }

  [[nodiscard]] std::span<const BriefRun> started_and_preempted() const override { return brief_; }

 private:
  sched::jobs::JobState& state(Job& j) {
    return run_.state(j, [this](const Job& x) -> const workload::JobSpec& { return rigid(x); });
  }
  // A job joins the waiting jobs at the back of its priority.
  void enter(Job& j) {
    const std::size_t id = j.spec().id;
    if (id >= entry_.size()) entry_.resize(id + 1, 0);
    entry_[id] = ++next_entry_;
    waiting_.emplace(std::make_pair(-j.spec().priority, next_entry_), &j);
    state(j);
  }
  void leave(const Job& j) {
    const std::size_t id = j.spec().id;
    running_.erase(entry_[id]);
    waiting_.erase({-j.spec().priority, entry_[id]});
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
  // Each job runs on exactly the GPUs it asked for (an elastic Pollux job too), as fifo's do.
  const workload::JobSpec& rigid(const Job& job) {
    const JobSpec& spec = job.spec();
    if (spec.id >= rigid_.size()) rigid_.resize(spec.id + 1);
    auto& r = rigid_[spec.id];
    if (!r) {
      r = std::make_unique<JobSpec>(spec);
      r->min_replicas = r->max_replicas = spec.replicas;
    }
    return *r;
  }

  std::vector<std::unique_ptr<JobSpec>> rigid_;  // by job id
  std::vector<BriefRun> brief_;                  // of the last round
  JobLayerRun run_;
  std::uint64_t next_entry_ = 0;
  std::vector<std::uint64_t> entry_;  // by job id: when it last joined the waiting jobs
  std::vector<bool> seen_;            // by job id (without the engine's events)
  std::map<std::pair<int, std::uint64_t>, Job*> waiting_;  // by (-priority, entry)
  std::map<std::uint64_t, Job*> running_;                  // by entry
};

}  // namespace

std::unique_ptr<TimelinePolicy> make_fifo_per_job(const PolicyOptions& options) {
  return std::make_unique<PerJobFifo>(options);
}

}  // namespace gpuorch::sim
