#pragma once
// What a cluster owner reads off a time-based run: job completion times (mean, median, p99),
// queueing delay, makespan, GPU-hours and utilisation (allocated, and weighted by statistical
// efficiency: the share of allocated GPU time that trains as fast as the smallest batch would),
// and the same per queue, for the tenants of a shared cluster.
#include <string>
#include <vector>

#include "gpuorch/sim/timeline_engine.hpp"

namespace gpuorch::sim {

struct TimelineSummary {
  std::size_t jobs = 0;
  std::size_t finished = 0;
  double avg_jct_s = 0;
  double median_jct_s = 0;
  double p99_jct_s = 0;
  double avg_queue_s = 0;  // submission to first GPUs
  double makespan_s = 0;   // the last completion
  double gpu_hours = 0;    // GPUs held, restart delays included
  double utilisation = 0;  // allocated GPU time / (GPUs x makespan)
  double goodput_utilisation = 0;
  // Allocated GPU time over GPUs x time from the first submission to the last: without the drain
  // after it, where the cluster empties whatever the policy and only the last jobs' order shows.
  double utilisation_arrivals = 0;
  // The same over the time some job waits (submitted, no GPUs): what a policy leaves idle while
  // there is work (1 only if every waiting job could always have fit).
  double utilisation_waiting = 0;
};

TimelineSummary summarize(const TimelineResult& r);

// What one tenant got: its jobs' completion and waiting times and the GPU time it held.
struct QueueSummary {
  std::string queue;
  std::size_t jobs = 0;
  std::size_t finished = 0;
  double avg_jct_s = 0;   // over its finished jobs
  double avg_wait_s = 0;  // over its started jobs: submission to first GPUs
  double gpu_hours = 0;   // GPUs held, restart delays included
  double gpu_share = 0;   // of the GPU time all queues held
};

// One entry per queue, sorted by name: the result's queues and any other a job names (a result
// built by hand may list none), even a queue without jobs.
std::vector<QueueSummary> summarize_queues(const TimelineResult& r);

// Linear interpolation between order statistics (numpy's default percentile); 0 when empty.
double percentile(std::vector<double> values, double q);

}  // namespace gpuorch::sim
