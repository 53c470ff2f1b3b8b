#pragma once
// The job layer's placer over the scheduler core: a job's replicas are pods of one gang, placed
// all or nothing by place_gang through the Scheduler (filters, the policy's score, the GPU
// picker, topology levels). Growth of a running job tries the nodes it already runs on first, so
// an elastic job grows next to its replicas without moving them.
#include "gpuorch/sched/gang.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"

namespace gpuorch::sched::jobs {

// The placer keeps references to all three; they must outlive it.
GangPlacer core_placer(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver);

}  // namespace gpuorch::sched::jobs
