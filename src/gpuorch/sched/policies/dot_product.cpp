// Tetris-style dot product (the study's DotProd): prefer the node whose free (CPU, GPU) vector is
// least aligned with the pod's demand, both normalised by the largest node (128 cores, 8 GPUs).
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class DotProductPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "dot-product"; }

  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }

  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    const double pod_cpu = static_cast<double>(pod.cpu_milli) / kMaxSpecCpuMilli;
    const double pod_gpu = static_cast<double>(pod.gpu_count * pod.gpu_milli) / kMaxSpecGpuMilli;
    const double node_cpu = static_cast<double>(cluster.cpu_free(n)) / kMaxSpecCpuMilli;
    const double node_gpu = static_cast<double>(cluster.gpu_milli_left_total(n)) / kMaxSpecGpuMilli;
    const double dot = node_cpu * pod_cpu + node_gpu * pod_gpu;
    return {static_cast<std::int64_t>(100.0 * (1.0 - dot / 2.0))};
  }
};

}  // namespace

std::unique_ptr<Policy> make_dot_product_policy(const PolicyContext& /*context*/) {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace gpuorch::sched
