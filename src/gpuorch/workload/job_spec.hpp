#pragma once
// A job as the job layer (sched/jobs/) schedules it: a gang of identical replicas that starts
// only as a whole gang of at least `min_replicas`, may grow to `max_replicas` (rigid when they
// are equal), belongs to one leaf queue and has a priority and a preemptibility, as
// KAI-Scheduler's PodGroup and Kueue's Workload carry them. The per-replica request is a PodSpec,
// so the core's filters, GPU picker and topology levels apply to every replica. What a job is
// worth at a size (its speedup) is the job layer policy's business, not part of the spec: a real
// cluster learns it from what the job has run (sched/jobs/throughput_fit.*, fitted_speedup.*).
#include <cstdint>
#include <string>
#include <vector>

#include "gpuorch/workload/pod_spec.hpp"
#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::workload {

struct JobSpec {
  std::string name;
  std::string queue = kDefaultQueue;  // a leaf queue of the queue tree
  int priority = 0;                   // higher runs first and may preempt lower
  bool preemptible = true;            // false: never a victim (KAI's priority >= 100 "build")
  int min_replicas = 1;
  int max_replicas = 1;
  // One replica's request; by default one whole GPU (a data-parallel worker).
  PodSpec replica = one_gpu_replica();
  // Node label keys, outermost first (block, rack, hostname): the gang goes under the lowest
  // level that can hold it whole (sched/gang.hpp).
  std::vector<std::string> topology_levels;
  std::int64_t submit = 0;  // seconds from the start of the trace or cluster

  [[nodiscard]] bool elastic() const { return max_replicas > min_replicas; }

  static PodSpec one_gpu_replica() {
    PodSpec p;
    p.gpu_count = 1;
    p.gpu_milli = base::kMilliPerGpu;
    return p;
  }
};

}  // namespace gpuorch::workload
