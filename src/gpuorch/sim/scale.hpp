#pragma once
// `sim scale`: how fast the scheduler core decides on a large cluster. A synthetic cluster of N
// nodes (synthetic_cluster) receives M pods of the openb-like mix one by one, each placed through
// sched::Scheduler or failed, nothing departs; every decision is timed.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gpuorch::sim {

struct ScaleOptions {
  std::size_t nodes = 0;
  std::size_t pods = 0;
  std::string policy;
  std::uint64_t seed = 42;
  bool full_scan = false;  // force the scheduler's full-scan reference path
  // Called about every 1/200 of the pods, between decisions (outside their timing); may be
  // empty.
  std::function<void(std::size_t done, std::size_t total)> on_progress;
};

struct ScaleResult {
  std::size_t nodes = 0;
  int gpus = 0;
  std::size_t pods = 0;
  std::string policy;
  std::uint64_t seed = 0;
  bool full_scan = false;
  std::size_t placed = 0;
  std::size_t failed = 0;
  double gpu_alloc_pct = 0;     // allocated GPU milli at the end, % of capacity
  double placements_per_s = 0;  // placed pods / time spent deciding and reserving all pods
  double mean_decision_us = 0;  // per pod, placed or failed
  double p50_decision_us = 0;
  double p99_decision_us = 0;
  double max_decision_us = 0;
  double setup_s = 0;    // building the cluster, workload, policy and scheduler
  double placing_s = 0;  // the M decisions, wall clock
  // CPU time of the process over the M decisions: on a loaded machine the wall clock also counts
  // the time other processes held the core; this does not.
  double placing_cpu_s = 0;
  double placements_per_cpu_s = 0;
  double elapsed_s = 0;          // setup + placing
  std::string placement_digest;  // FNV-1a of every decision (node and GPUs), hex
};

// Validates the options (base::InputError on bad input) and runs the experiment.
ScaleResult run_scale(const ScaleOptions& options);

// Limits of the arguments, checked by run_scale.
inline constexpr std::size_t kMaxScaleNodes = 1'000'000;
inline constexpr std::size_t kMaxScalePods = 5'000'000;

}  // namespace gpuorch::sim
