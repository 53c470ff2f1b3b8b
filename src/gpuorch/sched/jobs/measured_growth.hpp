#pragma once
// How far an elastic gang on the cluster should grow (`gpuorch scheduler --queues`), decided by
// the job layer from what the gang measured of its own speed (workload/throughput_report.hpp):
// Pollux's throughput model fitted to one sample per size it has run (ThroughputFit, the
// simulator's `--speedup-model fitted`), and the job layer's greedy sizing (size_by_value) over
// the value of each pod count: its predicted throughput over today's, discounted for the restart
// a resize costs within one resize interval, so a pod is added only when the speedup it brings
// pays for the restart. Before any measurement the prior is Pollux's: a linear speedup, explored
// at most to twice the largest size run or measured. docs/scheduler.md, "Speed learned from the
// running job".
#include <span>
#include <string>
#include <vector>

#include "gpuorch/sched/jobs/speedup_model.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::sched::jobs {

struct GangGrowth {
  std::string gang;  // for the explanation
  int running = 0;   // pods bound (the count the value is relative to; at least min is assumed)
  int min = 1;       // minMember
  int most = 0;      // pods that exist
  double gpus_per_pod = 1;
  std::span<const workload::ThroughputReport> measured;  // any order, duplicates allowed
  double resize_interval_s = 300;
  double restart_s = 30;  // what a resize idles the job (the simulator's restart cost)
};

struct GrowthAdvice {
  int target = 0;      // pods to run (never below max(running, min))
  bool prior = true;   // no measurement: the linear prior
  int judged = 0;      // the count `speedup` is predicted for: target, or the next one up
  double speedup = 0;  // predicted throughput at `judged` over that at the current count
  std::string why;     // one line for the pods' and the PodGroup's explanations
};

// One sample per distinct (nodes, world size, local batch), the newest (by `time`) of each.
// Without a measured sync time, a sample's synchronisation is its step time above the fastest
// step measured at that local batch (the compute time every size shares).
std::vector<ThroughputSample> throughput_samples(
    std::span<const workload::ThroughputReport> measured);

GrowthAdvice advise_growth(const GangGrowth& gang);

// How far a running gang may shrink when another job waits for GPUs: to the fewest pods (not
// below min) from which today's count is no more than the resize's payback faster (the pods
// above add less than a resize costs; the same threshold growth uses). `target` = running when
// every pod pays, or before any measurement (the prior values every pod).
GrowthAdvice advise_shrink(const GangGrowth& gang);

}  // namespace gpuorch::sched::jobs
