// The study's GpuClustering: keep GPU pods of one kind (shared GPU, 1, 2, 4, 8 whole GPUs)
// together, then prefer fuller nodes. CPU-only pods score 0 everywhere.
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class GpuClusteringPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "gpu-clustering"; }

  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }

  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    if (pod.cpu_only()) return {0};
    const cluster::GpuPodKind kind = cluster::gpu_pod_kind(pod.gpu_milli, pod.gpu_count);
    const auto kinds = cluster.gpu_pod_kinds(n);
    bool hosts_kind = false;
    for (const auto& k : kinds) hosts_kind = hosts_kind || k.kind == kind;
    std::int64_t base = 0;
    if (hosts_kind) {
      base = kinds.size() == 1 ? 75 : 50;
    } else {
      base = kinds.empty() ? 25 : 0;
    }
    const std::int64_t used_share =
        25 * (kMaxSpecGpuMilli - cluster.gpu_milli_left_total(n)) / kMaxSpecGpuMilli;
    return {base + used_share};
  }
};

}  // namespace

std::unique_ptr<Policy> make_gpu_clustering_policy(const PolicyContext& /*context*/) {
  return std::make_unique<GpuClusteringPolicy>();
}

}  // namespace gpuorch::sched
