#pragma once
// The rigid-job policies as orders of the job layer (sched/jobs/): fifo (submission order, the
// head blocks its queue), sjf (oracle shortest run time first, backfilling, never preempted) and
// tiresias (two-queue discretised least attained service, preempting by that order), each inside
// every queue of a queue tree, while the job layer shares GPUs between queues by quota and
// weight, reclaims, and places every replica through the scheduler core.
#include <memory>
#include <string>
#include <vector>

#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {

struct QueuedOptions {
  std::string order;                      // fifo, sjf or tiresias
  // The scheduler core's placement policy; empty: the rule the Pollux artifact's simulator
  // uses for the order (most-free for tiresias, tightest-fit for fifo and sjf).
  std::string placement;
  std::vector<workload::QueueSpec> queues;  // empty: one default queue holds every job
  // tiresias: what is over the queues' quotas goes by the order across the queues
  // (sched::jobs::RoundOptions::over_quota_by_rank; `tiresias:over-quota=rank`).
  bool over_quota_by_rank = false;
  PolicyOptions policy;
};

// nullptr for an order it does not know.
std::unique_ptr<TimelinePolicy> make_queued(const QueuedOptions& options);

// Refuses (InputError "file:line: ...") a job whose queue is not a leaf of `queues`.
void check_job_queues(const std::vector<JobSpec>& jobs, const sched::jobs::QueueTree& queues);

}  // namespace gpuorch::sim
