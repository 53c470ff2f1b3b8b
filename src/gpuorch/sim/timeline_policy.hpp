#pragma once
// A scheduling policy of the time-based simulator: called at every scheduling tick with the
// active jobs and the cluster holding every job's current placement, it returns each job's new
// placements (empty = no GPUs). The policy decides which jobs run and on how many replicas; where
// they go is the scheduler core's (sched/replica_gang.hpp: its filters, a spreading policy, the
// GPU picker), reached through the round's ReplicaPlacer. No policy places GPUs itself
// (tests/sim/placement_structure_test.cpp holds sim/ to that).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/replica_gang.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/sim/timeline_job.hpp"
#include "gpuorch/sim/timeline_speedup_model.hpp"

namespace gpuorch::sim {

using Allocations = std::vector<std::vector<cluster::Placement>>;  // per active job

// The scheduler core over one run's cluster, as the policies place through it: the run's request
// resolver and one scheduler per spreading rule (sched::ReplicaSpread), so each rule's score
// index lives as long as the run.
class ReplicaPlacer {
 public:
  explicit ReplicaPlacer(cluster::Cluster& cluster);
  ReplicaPlacer(const ReplicaPlacer&) = delete;
  ReplicaPlacer& operator=(const ReplicaPlacer&) = delete;

  // `count` replicas of the job's replica request, all or nothing; next to `running` (growth).
  sched::ReplicaGangDecision place(const Job& job, int count, sched::ReplicaSpread spread,
                                   std::span<const cluster::Placement> running = {});
  void release(std::span<const cluster::Placement> placements);
  [[nodiscard]] cluster::Cluster& cluster() { return *cluster_; }

 private:
  cluster::Cluster* cluster_;
  sched::RequestResolver resolver_;
  std::unique_ptr<sched::Policy> most_free_;
  std::unique_ptr<sched::Policy> tightest_;
  sched::Scheduler spread_;
  sched::Scheduler pack_;
};

class TimelinePolicy {
 public:
  virtual ~TimelinePolicy() = default;
  [[nodiscard]] virtual BatchRule batch_rule() const { return BatchRule::kFixed; }
  // Runs each job on exactly the GPUs it asked for (so a job larger than the cluster can never
  // run).
  [[nodiscard]] virtual bool rigid() const { return true; }
  // Needs application profiles (cannot schedule rigid Philly rows).
  [[nodiscard]] virtual bool needs_profiles() const { return false; }
  // One scheduling round. `active`: submitted, unfinished jobs in submission order. On return
  // the placer's cluster holds exactly the returned placements; an empty answer means every
  // job keeps its placements (a policy that knows nothing changed).
  Allocations allocate(Seconds now, std::span<Job* const> active, ReplicaPlacer& placer);

 protected:
  // The policy's decision, called by allocate() with the placer's cluster (read-only use: every
  // change goes through place(), release() or realize_counts()).
  virtual Allocations schedule(Seconds now, std::span<Job* const> active,
                               cluster::Cluster& cluster) = 0;

  // Through the round's placer: `count` replicas of the job by `spread`, all or nothing; true
  // (and `out` set) when placed.
  bool place(const Job& job, int count, sched::ReplicaSpread spread,
             std::vector<cluster::Placement>& out);
  // Gives the placements back and clears them.
  void release(std::vector<cluster::Placement>& placements);
  // Elastic policies' placement step: a job whose GPU count is unchanged keeps its placement;
  // the others are released, then placed larger first (distributed jobs take whole nodes before
  // single-node jobs fill the holes) by `spread`. `cluster` is the one schedule() was given.
  Allocations realize_counts(std::span<Job* const> active, const std::vector<int>& counts,
                             cluster::Cluster& cluster, sched::ReplicaSpread spread);

 private:
  ReplicaPlacer* placer_ = nullptr;  // during allocate() only
};

struct PolicyOptions {
  std::uint64_t seed = 1;
  int gpus_per_node = 4;  // the largest node, for packed-placement predictions
  int total_gpus = 64;
  // Where pollux and lasgo get speedups (optimus always reads the profiles: Optimus+Oracle).
  SpeedupSource speedup = SpeedupSource::kFitted;
};

// fifo, sjf, tiresias, optimus, pollux, lasgo (= default); nullptr for an unknown name.
std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options);
std::vector<std::string> timeline_policy_names();  // in the order `all` runs them

// Shared by the policies: the current placements of the active jobs, in order.
Allocations current_allocations(std::span<Job* const> active);
// The packed placement of `gpus` GPUs on nodes of `per_node` (4, 4, ..., remainder).
std::vector<int> packed_placement(int gpus, int per_node);

std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_pollux(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_lasgo(const PolicyOptions& options,
                                           const std::string& variant);

}  // namespace gpuorch::sim
