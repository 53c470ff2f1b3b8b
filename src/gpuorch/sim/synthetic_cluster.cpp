// Node types are drawn independently per node with fixed weights, so any N keeps the mix (up to
// sampling noise) and a seed fixes the cluster. The types are modelled on common servers:
// DGX/HGX-class 8-GPU machines (H100, A100 80/40 GB, V100 32 GB) with 1-2 TiB of memory, and
// smaller inference nodes (L40S x4, T4 x2, A10 x1). Pods of the openb-like mix carry no model
// constraint, so the model names only matter for model-aware policies and the fragmentation
// measure.
#include "gpuorch/sim/synthetic_cluster.hpp"

#include <fmt/format.h>

#include <array>

#include "gpuorch/base/rng.hpp"

namespace gpuorch::sim {
namespace {

struct NodeType {
  const char* model;
  int gpus;
  std::int64_t cpu_milli;
  std::int64_t memory_mib;
  std::int64_t gpu_memory_mib;
  int weight;  // per mille of nodes
};

constexpr std::array kNodeTypes{
    NodeType{"H100-80G", 8, 192000, 2097152, 81920, 350},
    NodeType{"A100-80G", 8, 128000, 1048576, 81920, 300},
    NodeType{"A100-40G", 8, 96000, 786432, 40960, 150},
    NodeType{"V100M32", 8, 96000, 786432, 32768, 120},
    NodeType{"L40S", 4, 64000, 524288, 49152, 40},
    NodeType{"T4", 2, 104000, 524288, 15360, 25},
    NodeType{"A10", 1, 32000, 262144, 24576, 15},
};

constexpr int total_weight() {
  int total = 0;
  for (const NodeType& t : kNodeTypes) total += t.weight;
  return total;
}
static_assert(total_weight() == 1000);

}  // namespace

std::vector<cluster::NodeSpec> synthetic_cluster(std::size_t count, std::uint64_t seed) {
  base::Rng rng(seed);
  std::vector<cluster::NodeSpec> nodes;
  nodes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto draw = static_cast<int>(rng.below(static_cast<std::uint64_t>(total_weight())));
    const NodeType* type = &kNodeTypes.back();
    for (const NodeType& t : kNodeTypes) {
      if (draw < t.weight) {
        type = &t;
        break;
      }
      draw -= t.weight;
    }
    cluster::NodeSpec n;
    n.name = fmt::format("scale-{}x{}-{:06d}", type->model, type->gpus, i);
    n.cpu_milli = type->cpu_milli;
    n.memory_mib = type->memory_mib;
    n.gpu_count = type->gpus;
    n.gpu_model = type->model;
    n.gpu_memory_mib = type->gpu_memory_mib;
    n.labels.emplace_back("gpu-model", type->model);
    n.labels.emplace_back("gpuorch.io/synthetic", "true");
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace gpuorch::sim
