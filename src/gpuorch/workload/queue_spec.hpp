#pragma once
// A queue of the job layer, with KAI-Scheduler's Queue fields (scheduling.run.ai/v2) and names, so
// one YAML file serves `sim timeline --queues` and a cluster: a tree by `parentQueue` in which
// only leaves hold jobs; per resource a guaranteed `quota`, a `limit` never exceeded and an
// `overQuotaWeight` by which what nobody within quota wants is shared; a queue `priority` that
// orders queues (higher first) before their shares do. gpuorch adds quotas per GPU model
// (`spec.resources.gpuModels`), which KAI does not have (it is on KAI's roadmap; Kueue does it
// with one ResourceFlavor per model): docs/jobs.md.
#include <cstdint>
#include <string>
#include <vector>

namespace gpuorch::workload {

// The queue a job names when it names none (KAI's and Kueue's "default" queue).
inline constexpr const char* kDefaultQueue = "default";

// -1 in KAI's YAML: no quota (nothing guaranteed) for `quota`, no cap for `limit`.
inline constexpr std::int64_t kUnlimited = -1;

// How many GPU models the queues of one file may name in all (the job layer keeps a fixed slot
// per model: sched/jobs/resources.hpp).
inline constexpr std::size_t kMaxQueueGpuModels = 4;

struct QueueResource {
  std::int64_t quota = 0;  // milli-units (milli-GPU, milli-CPU) or MiB; kUnlimited: none
  std::int64_t limit = kUnlimited;
  double over_quota_weight = 1;  // share of the unused capacity, against the siblings' weights
};

// A queue's quota, limit and weight for the GPUs of one model (milli-GPUs), in the order the
// file lists them: the order in which a job that accepts several models tries them.
struct QueueModelResource {
  std::string model;  // as nodes name it (NodeSpec::gpu_model, nvidia.com/gpu.product)
  QueueResource gpu;
};

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: a top-level queue
  int priority = 0;
  QueueResource gpu;                           // milli-GPUs (KAI writes GPUs, fractions allowed)
  QueueResource cpu;                           // milli-CPUs (KAI writes millicores)
  QueueResource memory;                        // MiB (KAI writes MB)
  std::vector<QueueModelResource> gpu_models;  // gpuorch's extension; empty: none
  std::string file;                            // where it was defined, for messages
  std::size_t line = 0;
};

}  // namespace gpuorch::workload
