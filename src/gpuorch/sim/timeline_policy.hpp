#pragma once
// A scheduling policy of the time-based simulator: called at every scheduling tick with the
// active jobs and the cluster holding every job's current placement, it returns the jobs whose
// placements change, with their new ones (empty = no GPUs). The policy ranks or values the jobs;
// the job layer (sched/jobs/, through timeline_job_layer.hpp) decides within the queues which run
// and on how many replicas, and the scheduler core places them (sched/replica_gang.hpp: its
// filters, a spreading policy, the GPU picker). No policy places GPUs itself
// (tests/sim/placement_structure_test.cpp holds sim/ to that).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/jobs/speedup_model.hpp"
#include "gpuorch/sim/timeline_job.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/workload/queue_spec.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::sim {

// The speedup models are the job layer's (sched/jobs/speedup_model.hpp): the cluster scheduler
// fits the same model to what running jobs publish.
using sched::jobs::parse_speedup_source;
using sched::jobs::speedup_source_name;
using sched::jobs::SpeedupSource;

// The engine's hold on one run's cluster: what finished jobs give back goes through it.
class ReplicaPlacer {
 public:
  explicit ReplicaPlacer(cluster::Cluster& cluster) : cluster_(&cluster) {}
  ReplicaPlacer(const ReplicaPlacer&) = delete;
  ReplicaPlacer& operator=(const ReplicaPlacer&) = delete;

  void release(std::span<const cluster::Placement> placements);
  [[nodiscard]] cluster::Cluster& cluster() { return *cluster_; }

 private:
  cluster::Cluster* cluster_;
};

// What changed among the active jobs since the policy's last round, as the engine knows it:
// the jobs that arrived and those that finished. Not `known` (a caller that does not say): the
// policy compares for itself.
struct TickEvents {
  bool known = false;
  std::span<Job* const> arrived;
  std::span<Job* const> finished;
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
  // One scheduling round. `active`: submitted, unfinished jobs in job id order. On return the
  // placer's cluster holds every job's placements: the returned ones for the jobs it names,
  // their current ones for the others (an empty answer: nothing changed).
  Reallocations allocate(Seconds now, std::span<Job* const> active, ReplicaPlacer& placer,
                         const TickEvents& events = {});
  // A job the last round started and preempted again within it (a policy that decides job by
  // job, fifo:per-job), with the replicas and GPUs it had: the engine sees no net change, so
  // its event record (TimelineOptions::record_events) asks here.
  struct BriefRun {
    Job* job = nullptr;
    int replicas = 0;
    int gpus = 0;
  };
  [[nodiscard]] virtual std::span<const BriefRun> started_and_preempted() const { return {}; }
  // The throughput reports the last round's jobs published before it decided (a policy that
  // sizes gangs from them, fifo:per-job:elastic), for the event record.
  struct Published {
    Job* job = nullptr;
    workload::ThroughputReport report;
  };
  [[nodiscard]] virtual std::span<const Published> published() const { return {}; }

 protected:
  // The policy's decision over the placer's cluster. Every policy decides through the job layer
  // (timeline_job_layer.hpp), which places through the scheduler core.
  virtual Reallocations schedule(Seconds now, std::span<Job* const> active,
                                 cluster::Cluster& cluster) = 0;
  // This tick's events (during schedule() only).
  [[nodiscard]] const TickEvents& events() const { return *events_; }

 private:
  const TickEvents* events_ = nullptr;
};

struct PolicyOptions {
  std::uint64_t seed = 1;
  int gpus_per_node = 4;  // the largest node, for packed-placement predictions
  int total_gpus = 64;
  // Where pollux and lasgo get speedups (optimus always reads the profiles: Optimus+Oracle).
  SpeedupSource speedup = SpeedupSource::kFitted;
  // The job layer's queues (a KAI-Scheduler Queue file); empty: one default queue for all jobs.
  std::vector<workload::QueueSpec> queues;
};

// fifo, sjf, tiresias, optimus, pollux, lasgo (= default); nullptr for an unknown name.
std::unique_ptr<TimelinePolicy> make_timeline_policy(const std::string& name,
                                                     const PolicyOptions& options);
std::vector<std::string> timeline_policy_names();  // in the order `all` runs them

// The packed placement of `gpus` GPUs on nodes of `per_node` (4, 4, ..., remainder).
std::vector<int> packed_placement(int gpus, int per_node);

std::unique_ptr<TimelinePolicy> make_optimus(const PolicyOptions& options);
std::unique_ptr<TimelinePolicy> make_pollux(const PolicyOptions& options);
// fifo:per-job: each waiting job decided in its own round over the running jobs, in priority
// then queue-entry order, as `gpuorch scheduler --queues` decides (timeline_per_job.cpp). With
// `elastic` (fifo:per-job:elastic), every job of R replicas is an elastic gang of R pods with
// minMember ceil(R/2), grown and shrunk as the scheduler does, by its --resize-interval and
// --resize-cost (simulated seconds).
struct ElasticGangs {
  double resize_interval_s = 300;
  double resize_cost_s = 30;
};
std::unique_ptr<TimelinePolicy> make_fifo_per_job(const PolicyOptions& options,
                                                  std::optional<ElasticGangs> elastic = {});
std::unique_ptr<TimelinePolicy> make_lasgo(const PolicyOptions& options,
                                           const std::string& variant);

}  // namespace gpuorch::sim
