#pragma once
// The target workload of the fragmentation measure: the pod shapes a cluster expects to serve,
// with weights. The FGD study estimates it from history as the "typical pods": the most popular
// shapes covering a given share of all pods.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::workload {

struct TaskClass {
  std::int64_t cpu_milli = 0;
  std::int64_t gpu_milli = 0;  // per GPU; 0 for a CPU-only class
  int gpu_count = 0;
  std::vector<std::string> allowed_models;  // empty = any
  std::int64_t count = 0;                   // pods of this shape in the history
  double memory_mib = 0;  // their mean memory request (not part of the key: the study ignores it)
  double weight = 0;      // p_m; the weights of a workload sum to 1
};

struct TargetWorkload {
  std::vector<TaskClass> classes;
};

// The study's rule: key pods by (cpu, per-GPU milli, GPU count, model constraint), most popular
// first (ties: larger key first), keep keys until they cover `popularity` of all pods (the key that
// crosses the threshold is kept), weight by count among the kept keys.
TargetWorkload typical_pods(std::span<const PodSpec> history, double popularity = 0.95);

// The most popular classes of `all` (as produced by typical_pods(history, 1.0)) covering
// `popularity` of its pods, re-weighted among themselves.
TargetWorkload most_popular(const TargetWorkload& all, double popularity);

}  // namespace gpuorch::workload
