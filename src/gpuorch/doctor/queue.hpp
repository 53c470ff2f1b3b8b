#pragma once
// `gpuorch doctor queue [NAME]`: a queue's quota, limit, over-quota weight, fair share now and
// what its pods hold and ask for, and why each of its waiting jobs waits, in the job layer's
// words (over its limit, over its fair share, its share held by others, fragmented,
// infeasible), or what it would preempt to start. The verdicts are `gpuorch scheduler
// --queues`'s own: the same ClusterMirror::admit over the cluster as it is now, each job tried
// against the same state.
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"

namespace gpuorch::doctor {

struct QueueOptions {
  k8s::MirrorOptions mirror;
  std::string scheduler_name = "gpuorch";  // whose pending pods are the queues' jobs
  bool preemption = true;                  // as gpuorch scheduler --queues (--no-preemption)
};

// Every queue (`queue` empty) or that queue and the queues under it. Throws base::InputError
// when the cluster has no Queue API or no queue of that name.
std::vector<Finding> explain_queues(const ClusterObjects& objects, const std::string& queue,
                                    const QueueOptions& options);

}  // namespace gpuorch::doctor
