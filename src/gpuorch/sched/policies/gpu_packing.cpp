// The study's GpuPacking: prefer, in this order, a partly used GPU (the fuller the better), a free
// GPU on a node already in use, and last a completely free node (smaller nodes first).
#include <algorithm>
#include <numeric>

#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class GpuPackingPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "gpu-packing"; }

  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }

  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    return {pod.cpu_only() ? 0 : node_score(cluster, n, pod)};
  }

 private:
  static std::int64_t node_score(const cluster::Cluster& cluster, cluster::NodeIndex n,
                                 const PodRequest& pod) {
    const int fully_free = cluster.fully_free_gpus(n);
    if (fully_free == cluster.gpu_count(n)) return std::max(33 - fully_free, fully_free);
    const auto left = cluster.gpu_milli_left(n);
    std::array<int, 64> order{};
    const int count = static_cast<int>(left.size());
    std::iota(order.begin(), order.begin() + count, 0);
    std::stable_sort(order.begin(), order.begin() + count,
                     [&](int a, int b) { return left[a] < left[b]; });
    int wanted = pod.gpu_count;
    int fully_free_used = 0;
    std::int64_t free_percent_on_used = 0;
    for (int j = 0; j < count && wanted > 0; ++j) {
      const std::int32_t l = left[order[j]];
      if (l >= pod.gpu_milli) {
        --wanted;
        fully_free_used += l == base::kMilliPerGpu ? 1 : 0;
        free_percent_on_used += l * 100 / base::kMilliPerGpu;
      }
    }
    if (fully_free_used > 0) return std::max<std::int64_t>(50 - fully_free_used, 33);
    return std::max<std::int64_t>(100 - free_percent_on_used / 10, 50);
  }
};

}  // namespace

std::unique_ptr<Policy> make_gpu_packing_policy(const PolicyContext& /*context*/) {
  return std::make_unique<GpuPackingPolicy>();
}

}  // namespace gpuorch::sched
