#pragma once
// A scheduling policy of the time-based simulator: called at every scheduling tick with the
// active jobs and the cluster holding every job's current placement, it returns each job's new
// placements (empty = no GPUs). Replicas go on nodes and GPUs through sched/gang_replicas, so
// every policy places through the scheduler core's GPU picker.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/gang_replicas.hpp"
#include "gpuorch/sim/timeline_job.hpp"

namespace gpuorch::sim {

using Allocations = std::vector<std::vector<cluster::Placement>>;  // per active job

class TimelinePolicy {
 public:
  virtual ~TimelinePolicy() = default;
  [[nodiscard]] virtual BatchRule batch_rule() const { return BatchRule::kFixed; }
  // Runs each job on exactly the GPUs it asked for (so a job larger than the cluster can never run).
  [[nodiscard]] virtual bool rigid() const { return true; }
  // Needs application profiles (cannot schedule rigid Philly rows).
  [[nodiscard]] virtual bool needs_profiles() const { return false; }
  // `active`: submitted, unfinished jobs in submission order. On return the cluster must hold
  // exactly the returned placements (policies release what they take away).
  virtual Allocations schedule(Seconds now, std::span<Job* const> active,
                               cluster::Cluster& cluster) = 0;
};

struct PolicyOptions {
  std::uint64_t seed = 1;
  int gpus_per_node = 4;  // the largest node, for packed-placement predictions
  int total_gpus = 64;
};

// fifo, sjf, tiresias, optimus, pollux, lasgo (= default); nullptr for an unknown name.
std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options);
std::vector<std::string> timeline_policy_names();  // in the order `all` runs them

// Shared by the policies: the current placements of the active jobs, in order.
Allocations current_allocations(std::span<Job* const> active);
// The packed placement of `gpus` GPUs on nodes of `per_node` (4, 4, ..., remainder).
std::vector<int> packed_placement(int gpus, int per_node);

// Elastic policies' placement step: a job whose GPU count is unchanged keeps its placement;
// the others are released, then placed larger first (distributed jobs take whole nodes before
// single-node jobs fill the holes) by `spread`.
Allocations realize_counts(std::span<Job* const> active, const std::vector<int>& counts,
                           cluster::Cluster& cluster, sched::ReplicaSpread spread);

std::unique_ptr<TimelinePolicy> make_fifo();
std::unique_ptr<TimelinePolicy> make_sjf(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_tiresias(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_pollux(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_lasgo(const PolicyOptions& options, const std::string& variant);

}  // namespace gpuorch::sim
