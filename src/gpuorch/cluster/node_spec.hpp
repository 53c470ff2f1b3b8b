#pragma once
// What a node is, before anything runs on it: the input to cluster::Cluster, produced by the
// openb loader, the YAML inventory, the synthetic generator and (later) hardware discovery.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpuorch::cluster {

// A Kubernetes taint: pods that do not tolerate it may not be placed on the node (NoSchedule,
// NoExecute); PreferNoSchedule is a preference and does not filter.
struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
};

struct NodeSpec {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpu_count = 0;
  std::string gpu_model;            // empty when the node has no GPU
  std::int64_t gpu_memory_mib = 0;  // per GPU; 0 when unknown
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<Taint> taints;
  bool unschedulable = false;  // cordoned (Node spec.unschedulable)
  int max_pods = 0;  // allocatable pods; 0 = no limit (traces, inventories), < 0 = none allowed
  // How well each pair of the node's GPUs is connected: gpu_count x gpu_count, row-major,
  // symmetric, higher = better, the diagonal 0; empty = unknown (openb traces, Kubernetes
  // Nodes). The scale (topology::gpu_link_scores, docs/topology.md "GPU link scores"): 2 x the
  // link's class (SYS 5 .. PIX 25, NV# 50 + #) + 1 when both GPUs are on one NUMA node, so the
  // lowest bit only breaks ties; at most 255. The GPU picker (sched/gpu_picker.hpp) reads it.
  std::vector<std::uint8_t> gpu_links;
};

}  // namespace gpuorch::cluster
