// Tetris-style dot product (the study's DotProd): prefer the node whose free (CPU, GPU) vector is
// least aligned with the pod's demand, both normalised by the largest node (128 cores, 8 GPUs).
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class DotProductPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "dot-product"; }

  void score(const cluster::Cluster& cluster, const PodRequest& pod,
             std::span<const cluster::NodeIndex> feasible,
             std::span<std::int64_t> scores) override {
    const double pod_cpu = static_cast<double>(pod.cpu_milli) / kMaxSpecCpuMilli;
    const double pod_gpu = static_cast<double>(pod.gpu_count * pod.gpu_milli) / kMaxSpecGpuMilli;
    for (std::size_t i = 0; i < feasible.size(); ++i) {
      const cluster::NodeIndex n = feasible[i];
      const double node_cpu = static_cast<double>(cluster.cpu_free(n)) / kMaxSpecCpuMilli;
      const double node_gpu =
          static_cast<double>(cluster.gpu_milli_left_total(n)) / kMaxSpecGpuMilli;
      const double dot = node_cpu * pod_cpu + node_gpu * pod_gpu;
      scores[i] = static_cast<std::int64_t>(100.0 * (1.0 - dot / 2.0));
    }
  }
};

}  // namespace

std::unique_ptr<Policy> make_dot_product_policy(const PolicyContext& /*context*/) {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace gpuorch::sched
