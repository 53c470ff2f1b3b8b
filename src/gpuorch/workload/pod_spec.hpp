#pragma once
// What a pod asks for. GPU pods come in two kinds the whole field uses: a share of ONE GPU
// (gpu_count 1, gpu_milli < 1000) and whole GPUs (gpu_milli 1000, gpu_count k).
#include <cstdint>
#include <string>
#include <vector>

#include "gpuorch/base/units.hpp"
#include "gpuorch/workload/node_constraints.hpp"

namespace gpuorch::workload {

// The GPUs of one node a pod may get when not every GPU will do (Kubernetes DRA claims: the
// devices its selectors allow, grouped by the value of a matchAttribute constraint): its GPUs all
// come from one group.
struct NodeGpuGroups {
  std::string node;
  std::vector<std::vector<int>> groups;  // GPU indices on the node
  auto operator<=>(const NodeGpuGroups&) const = default;
};

struct PodSpec {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpu_count = 0;
  std::int64_t gpu_milli = 0;               // per GPU, 1..1000 when gpu_count > 0
  std::vector<std::string> allowed_models;  // empty = any model
  NodeConstraints constraints;              // labels, affinity, taints (Kubernetes pods)
  // With gpus_restricted, whole GPUs only from gpu_groups (a node not listed has none for it);
  // without, any free GPUs of a node.
  bool gpus_restricted = false;
  std::vector<NodeGpuGroups> gpu_groups;

  [[nodiscard]] bool cpu_only() const { return gpu_count == 0; }
  [[nodiscard]] bool gpu_share() const { return gpu_count == 1 && gpu_milli < base::kMilliPerGpu; }
  [[nodiscard]] std::int64_t total_gpu_milli() const { return gpu_count * gpu_milli; }
};

// "A|B" as the openb traces write a GPU-model constraint.
std::string join_models(const std::vector<std::string>& models);

}  // namespace gpuorch::workload
