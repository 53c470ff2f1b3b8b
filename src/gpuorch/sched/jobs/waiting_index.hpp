#pragma once
// The waiting jobs a caller leaves out of a round that preempts by rank (RoundOptions::
// unlisted_demand), per leaf queue in the round's order (priority, then rank) and grouped by
// gang, so that the round's callbacks (more_to_order, more_over_share) add back every job that
// could change there without visiting the others. A long queue then costs a round what could
// start, not what waits.
//
// Why a group's later jobs can be left out: the order walks a queue's jobs spending a budget
// that only shrinks, so a job it selects had every job ahead of it that asks no more (in every
// resource) selected too; and in the pass over the share, what is free only shrinks and a
// plain gang that found no placement finds none later in the round, so a job that starts there
// had every job of its group ahead of it start too. A job is left out only when those jobs ahead
// of it would already take more than the budget (or what is free).
//
// A round without an order (sjf's: backfilling, no preemption by rank) asks for what could start
// on what is free when its walk begins (startable: the same reasoning, what is free only shrinks
// in the walk), then for the post-filters' candidates one at a time, in the round's order
// (next_candidate): what could start by reclaim or priority preemption changes as they act (a
// reclaim that frees more than it needs, or leaves a queue below its share, makes room for a
// job whose like failed before), so no bound fixed when the walk begins would hold; the round
// asks again at each place instead.
#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/jobs/resources.hpp"

namespace gpuorch::sched::jobs {

class WaitingIndex {
 public:
  explicit WaitingIndex(std::size_t queues) : groups_(queues), demand_(queues) {}

  // `s` waits (no placements) in leaf s.queue, rigid (min = max replicas); its spec, priority and
  // rank stay as they are while it is inside, and no other job of its queue has its rank.
  void add(JobState& s);
  void remove(const JobState& s);
  [[nodiscard]] bool contains(const JobState& s) const;
  [[nodiscard]] std::size_t size() const { return size_; }
  // Per queue: what the jobs inside ask, for RoundOptions::unlisted_demand.
  [[nodiscard]] std::span<const Resources> demand() const { return demand_; }

  // Before each round that uses the callbacks below: no job inside is in the round yet.
  void begin_round() { ++round_; }
  // RoundOptions::more_to_order: every job inside the order could select.
  void selectable(const OrderStart& at, std::vector<JobState*>& out);
  // RoundOptions::more_over_share (and more_to_allocate): every job inside of the queues named,
  // not added to this round yet, that could start on what is free.
  void startable(const OverShareStart& at, std::vector<JobState*>& out);
  // RoundOptions::next_candidate: the first job inside, in the queue's order, that the query
  // admits and that is not in this round yet (marked as added); nullptr if none.
  JobState* next_candidate(const CandidateQuery& at);

 private:
  struct Entry {
    int priority = 0;  // negated: the order's first is the set's first
    double rank = 0;
    std::uint64_t seq = 0;
    JobState* job = nullptr;
    mutable std::uint64_t added = 0;  // the round it was added to, by a callback
    bool operator<(const Entry& o) const {
      if (priority != o.priority) return priority < o.priority;
      if (rank != o.rank) return rank < o.rank;
      if (seq != o.seq) return seq < o.seq;
      return job < o.job;
    }
  };
  struct Group {
    Resources replica;
    int count = 0;  // replicas of its gang
    // No GPU models, node constraints or topology levels: the round remembers that such a gang
    // found no placement, so one of the same size after it finds none either.
    bool plain = true;
    std::set<Entry> jobs;
    [[nodiscard]] Resources gang() const { return replica * count; }
  };
  static Entry entry(const JobState& s);
  Group* group(const JobState& s);
  [[nodiscard]] const Group* group(const JobState& s) const;

  struct Walked {
    Entry at;  // where the order meets it
    Resources need;
  };
  std::vector<Walked> walk_;                // selectable's: a queue's counted jobs, reused
  std::vector<std::vector<Group>> groups_;  // per queue
  std::vector<Resources> demand_;
  std::size_t size_ = 0;
  std::uint64_t round_ = 1;
};

}  // namespace gpuorch::sched::jobs
