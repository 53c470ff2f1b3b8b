#pragma once
// One run of the job layer (sched/jobs/) inside the time-based simulator: the scheduler core
// with the policy's placement rule, the queue tree, and each active job's JobState, kept by job
// id between rounds so the layer works on them in place (their placements are exactly what the
// engine bound from the last answer). Every timeline policy decides through it: the rigid orders
// by rank (timeline_queued.hpp), the elastic ones by sizing each job (size()).
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/sched/jobs/elastic_sizing.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/replica_gang.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/sim/timeline_job.hpp"

namespace gpuorch::sim {

// A policy's decision for one tick: the active jobs whose placements change and their new
// placements (empty: no GPUs); the others keep theirs. No change is an empty list, so a tick
// costs the engine only what changed.
struct Reallocation {
  Job* job = nullptr;
  std::vector<cluster::Placement> placements;
};
using Reallocations = std::vector<Reallocation>;

class JobLayerRun {
 public:
  // `placement`: the scheduler core's policy for every replica (sched::make_policy's names).
  JobLayerRun(std::vector<workload::QueueSpec> queues, std::string placement);
  JobLayerRun(const JobLayerRun&) = delete;
  JobLayerRun& operator=(const JobLayerRun&) = delete;

  // The states of `active`, in its order; a job seen for the first time gets the spec
  // `spec_of(job)` returns (default: its own), its queue and rank = its id.
  using SpecOf = std::function<const workload::JobSpec&(const Job&)>;
  std::span<sched::jobs::JobState* const> states(std::span<Job* const> active,
                                                 const SpecOf& spec_of = {});
  // One job's state, made as states() makes it.
  sched::jobs::JobState& state(Job& job, const SpecOf& spec_of = {});
  // A round on the states last returned, over `cluster` (the engine's, holding exactly their
  // placements): the jobs whose placements changed.
  Reallocations round(cluster::Cluster& cluster, const sched::jobs::RoundOptions& options);
  // A round on some of the jobs only (`jobs`, each with its state from state()): a caller that
  // knows the others cannot change passes their demand in RoundOptions::unlisted_demand.
  Reallocations round(cluster::Cluster& cluster, std::span<Job* const> jobs,
                      const sched::jobs::RoundOptions& options);
  // A round on states the caller holds, some of them of no engine job (the cluster scheduler
  // asks for a running gang's elastic pods as a job of their own): the caller reads the
  // outcome from the states. `only_job` (a spec name; empty: any): the one job the round may
  // place, as a cluster's admission of one job binds that job's pods only; the others do not
  // grow in it, not even back onto what is left after it took replicas of theirs.
  void round_on(cluster::Cluster& cluster, std::span<sched::jobs::JobState* const> states,
                const sched::jobs::RoundOptions& options, std::string_view only_job = {});
  // A job's last `n` replicas given back between rounds, through the job layer
  // (JobLayer::shrink).
  void shrink(cluster::Cluster& cluster, sched::jobs::JobState& state, int n);
  struct Sizing {
    sched::jobs::SizingOptions sizing;
    // Within a queue, larger jobs start first (distributed jobs take whole nodes before
    // single-node jobs fill the holes); false: smaller first (Optimus's order).
    bool larger_first = true;
    // A resized job is placed anew, packed (RoundOptions::repack: the simulator's jobs restart
    // on every resize, as the artifact's do); false: it grows and shrinks in place.
    bool repack = true;
  };
  // An elastic policy's round: the job layer sizes the jobs by their value curves (`demands`,
  // one per state, in order; their queue, priority and minimum are filled in here) within the
  // queues' shares of the cluster's GPUs (and of each GPU model a queue names: a job's replicas
  // on one model, the round starting it where the sizing counted it), then starts, shrinks and
  // grows them to those counts.
  Reallocations sized_round(cluster::Cluster& cluster, Seconds now,
                            std::vector<sched::jobs::ElasticDemand> demands, const Sizing& how);

  [[nodiscard]] const sched::jobs::QueueTree& tree() const { return tree_; }

 private:
  void start(cluster::Cluster& cluster);

  bool default_queue_;
  sched::jobs::QueueTree tree_;
  std::string placement_name_;
  cluster::Cluster* cluster_ = nullptr;
  std::unique_ptr<sched::Policy> placement_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<sched::RequestResolver> resolver_;
  std::unique_ptr<sched::jobs::JobLayer> layer_;
  std::string only_job_;                      // round_on's `only_job`, while it runs
  std::deque<sched::jobs::JobState> kept_;    // by job id: a deque, so states stay where they are
  std::vector<sched::jobs::JobState*> refs_;  // the last states(), in the engine's order
  std::vector<Job*> jobs_;                    // their jobs
};

}  // namespace gpuorch::sim
