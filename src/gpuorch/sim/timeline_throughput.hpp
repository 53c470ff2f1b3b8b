#pragma once
// What a simulated job's launcher would publish about its own speed: `gpuorch launch`'s
// gpuorch.io/throughput report (workload/throughput_report.hpp), read off the job's measured
// profile at its current placement. The simulator's per-job elastic policy feeds these to the
// same growth and shrink advice `gpuorch scheduler --queues` takes from its pods' annotations
// (sched/jobs/measured_growth.hpp), and scripts/k8s-timeline-replay writes the same reports on
// the pods.
#include <string>

#include "gpuorch/sim/timeline_job.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::sim {

// The report of a running profiled job: one pod (launch agent) per replica, its local batch,
// the profile's step and synchronisation time there; `at` (simulated seconds) as its time, in
// RFC 3339 from the epoch, so later reports compare as newer.
workload::ThroughputReport published_throughput(const Job& job, Seconds at);

// Simulated seconds as RFC 3339 from 1970-01-01T00:00:00Z.
std::string simulated_rfc3339(Seconds at);

}  // namespace gpuorch::sim
