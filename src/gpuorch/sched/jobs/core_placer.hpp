#pragma once
// The job layer's placer over the scheduler core: a job's replicas are one replica gang
// (sched/replica_gang.hpp), placed all or nothing through the Scheduler (filters, the policy's
// score, which is the spreading rule, the GPU picker, topology levels), bound one placement per
// replica (each a pod, so each can be preempted on its own); a running job grows next to its
// replicas without moving them.
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/replica_gang.hpp"

namespace gpuorch::sched::jobs {

// The placer keeps references to all three; they must outlive it.
GangPlacer core_placer(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver);

}  // namespace gpuorch::sched::jobs
