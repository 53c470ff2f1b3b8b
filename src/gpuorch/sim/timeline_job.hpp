#pragma once
// A training job in the time-based simulation: what the workload asked for, where its replicas
// run, and how far its training has come. Progress is the Pollux artifact's statistical progress
// (timeline-protocol.md §5): a step at global batch B is worth (var + sqr) / (var / scale + sqr)
// steps at the initial batch (scale = B / init B), so more GPUs and larger batches help less
// than linearly. Rigid jobs (a Philly trace row) need `duration` seconds on exactly their GPUs.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sim/timeline_profile.hpp"
#include "gpuorch/workload/job_spec.hpp"

namespace gpuorch::sim {

using Seconds = std::int64_t;

// The job model of workload/job_spec.hpp (queue, priority, preemptible, min/max replicas, the
// per-replica request, submit time) with what only the simulator knows: the application whose
// measured profiles say how fast the job really trains, or a rigid job's run time.
struct JobSpec : workload::JobSpec {
  std::string application;  // empty for a rigid job
  int replicas = 1;         // GPUs the user asked for (one replica per GPU)
  int batch = 0;            // global batch the user tuned (profiled jobs)
  Seconds duration = 0;     // rigid jobs: run time on `replicas` GPUs
  std::size_t id = 0;       // position in the workload (submission order)
  std::string file;         // where it came from, for messages
  std::size_t line = 0;
};

// Per-GPU micro-batch and extra accumulation steps: a step is (accum + 1) micro-batches.
struct BatchConfig {
  int local = 0;
  int accum = 0;
};

// How a job picks its batch: fixed at the workload's (Tiresias, Optimus, FIFO, SJF) or the one
// with the best goodput on its current placement (Pollux, gpuorch's elastic policy).
enum class BatchRule : std::uint8_t { kFixed, kGoodput };

// The artifact's micro-batching of a fixed global batch over `replicas` GPUs (§6.1). With
// `force_accum_on_one`, one GPU always accumulates at least once (Optimus's prediction).
BatchConfig fixed_batch_config(const AppProfile& app, int replicas, int batch,
                               bool force_accum_on_one);

// Progress per second on a placement (GPUs per node) at a batch configuration and epoch.
struct Rate {
  double progress_per_s = 0;
  double efficiency = 1;  // statistical efficiency gain / scale, for goodput-weighted utilisation
  double step_time = 0;
};
Rate progress_rate(const AppProfile& app, std::span<const int> gpus_per_node, const BatchConfig& b,
                   int epoch);

// The batch configuration of best progress rate on a placement (the oracle form of Pollux's
// per-job batch tuning, §6.2): the artifact's 50 geometric candidates from
// max(init B, min_local * R) to max B, micro-batched with accumulation.
BatchConfig best_batch_config(const AppProfile& app, std::span<const int> gpus_per_node, int epoch);

class Job {
 public:
  Job(const JobSpec& spec, const AppProfile* app, BatchRule rule);

  [[nodiscard]] const JobSpec& spec() const { return *spec_; }
  [[nodiscard]] const AppProfile* app() const { return app_; }
  [[nodiscard]] bool complete() const { return completion_ >= 0; }
  [[nodiscard]] Seconds completion() const { return completion_; }
  [[nodiscard]] Seconds first_start() const { return first_start_; }
  [[nodiscard]] int epoch() const { return epoch_; }
  [[nodiscard]] double progress() const { return progress_; }
  [[nodiscard]] double attained_service() const { return service_; }  // GPU-seconds held
  [[nodiscard]] double useful_gpu_seconds() const { return useful_; }
  [[nodiscard]] int restarts() const { return restarts_; }
  [[nodiscard]] int gpus() const { return static_cast<int>(allocation_.size()); }
  [[nodiscard]] int max_profiled_replicas() const { return max_profiled_; }
  [[nodiscard]] const BatchConfig& batch() const { return batch_; }
  // Node id per GPU, in allocation order (the artifact's allocation list).
  [[nodiscard]] const std::vector<cluster::NodeIndex>& allocation() const { return allocation_; }
  [[nodiscard]] const std::vector<cluster::Placement>& placements() const { return placements_; }
  [[nodiscard]] std::vector<int> gpus_per_node() const;

  // Runs `dt` seconds from `now` on the current placement: restart delay first, then training
  // until the next epoch boundary, re-evaluating rate and batch there (§7.2).
  void advance(Seconds now, Seconds dt);
  // New placements at `now`: the restart delay starts again (the first start pays it too).
  void reallocate(Seconds now, std::vector<cluster::Placement> placements);

  // Oracle remaining work: rigid seconds left, or for profiled jobs the iterations left at the
  // fixed batch from the current epoch (Optimus's estimate, §9.2).
  [[nodiscard]] double remaining_iterations() const;

  static constexpr Seconds kRestartPenalty = 30;

 private:
  void update_batch();

  const JobSpec* spec_;
  const AppProfile* app_;
  BatchRule rule_;
  std::vector<cluster::Placement> placements_;
  std::vector<cluster::NodeIndex> allocation_;
  std::vector<int> gpus_per_node_;
  BatchConfig batch_;
  Seconds rescale_ = 0;
  Seconds completion_ = -1;
  Seconds first_start_ = -1;
  int restarts_ = -1;
  int epoch_ = 0;
  int max_profiled_ = 0;
  double progress_ = 0;
  double service_ = 0;
  double useful_ = 0;
};

}  // namespace gpuorch::sim
