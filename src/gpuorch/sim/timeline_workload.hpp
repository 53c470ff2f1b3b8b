#pragma once
// The time-based simulator's inputs: the Pollux artifact's workload CSV (name, time,
// application, num_replicas, batch_size) with its application profiles, and rigid jobs from the
// Philly trace (timestamp, duration, num_gpus, ...: each row a job of `duration` seconds on
// `num_gpus` GPUs, submitted at its timestamp relative to the trace's first). Every bad value is
// an InputError "file:line: what".
#include <string>
#include <vector>

#include "gpuorch/sim/timeline_job.hpp"
#include "gpuorch/sim/timeline_profile.hpp"

namespace gpuorch::sim {

// Reads the workload and loads every application it names from `apps_dir` into `apps`.
std::vector<JobSpec> read_pollux_workload(const std::string& path, const std::string& apps_dir,
                                          AppTable& apps);

// `limit` > 0 keeps only the first `limit` jobs by submission time (for cost-growth figures).
std::vector<JobSpec> read_philly_trace(const std::string& path, std::size_t limit = 0);

// True when the file's header is the Philly trace's.
bool is_philly_trace(const std::string& path);

}  // namespace gpuorch::sim
