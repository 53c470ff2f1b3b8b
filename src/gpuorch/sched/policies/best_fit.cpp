// The study's BestFit: least weighted leftover (CPU, GPU) after placement, min-max normalised to
// 0..100 over the feasible nodes in integer arithmetic (which creates ties, as in the study).
#include <algorithm>

#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class BestFitPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "best-fit"; }

  void score(const cluster::Cluster& cluster, const PodRequest& pod,
             std::span<const cluster::NodeIndex> feasible,
             std::span<std::int64_t> scores) override {
    const std::int64_t pod_gpu = pod.gpu_count * pod.gpu_milli;
    for (std::size_t i = 0; i < feasible.size(); ++i) {
      const cluster::NodeIndex n = feasible[i];
      double leftover = 0;
      leftover += static_cast<double>(cluster.cpu_free(n) - pod.cpu_milli) / kMaxSpecCpuMilli * 0.5;
      leftover +=
          static_cast<double>(cluster.gpu_milli_left_total(n) - pod_gpu) / kMaxSpecGpuMilli * 0.5;
      scores[i] = static_cast<std::int64_t>((1.0 - leftover) * 100.0);
    }
    const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
    const std::int64_t lowest = *lo;
    const std::int64_t range = *hi - *lo;
    for (auto& s : scores) s = range == 0 ? 0 : (s - lowest) * 100 / range;
  }
};

}  // namespace

std::unique_ptr<Policy> make_best_fit_policy(const PolicyContext& /*context*/) {
  return std::make_unique<BestFitPolicy>();
}

}  // namespace gpuorch::sched
