// The study's BestFit: least weighted leftover (CPU, GPU) after placement, min-max normalised to
// 0..100 over the feasible nodes in integer arithmetic (which creates ties, as in the study).
#include <algorithm>

#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class BestFitPolicy final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "best-fit"; }

  // The raw score: the scheduler's incremental path picks argmax(raw) with rank ties, which is
  // the same decision as argmax(normalised) (see score()).
  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }

  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    const std::int64_t pod_gpu = pod.gpu_count * pod.gpu_milli;
    double leftover = 0;
    leftover += static_cast<double>(cluster.cpu_free(n) - pod.cpu_milli) / kMaxSpecCpuMilli * 0.5;
    leftover +=
        static_cast<double>(cluster.gpu_milli_left_total(n) - pod_gpu) / kMaxSpecGpuMilli * 0.5;
    return {static_cast<std::int64_t>((1.0 - leftover) * 100.0)};
  }

  // The study's scores: raw r_i min-max normalised over the feasible set in integer arithmetic,
  // s_i = (r_i - lo) * 100 / (hi - lo), and s_i = 0 for all when hi == lo. Why the incremental
  // path may use r_i instead: s is non-decreasing in r; if r_i == hi then s_i = 100; if r_i < hi
  // then 0 <= (r_i - lo) * 100 <= (hi - lo - 1) * 100 < (hi - lo) * 100, so s_i <= 99. Hence
  // s_i == max(s) == 100 exactly when r_i == hi, and when hi == lo every node has both the
  // maximal raw and the maximal normalised score. The set of best nodes is the same either way,
  // so the lowest-ranked among them is the same node. This full-set version stays for the
  // full-scan path and the equivalence test.
  void score(const cluster::Cluster& cluster, const PodRequest& pod,
             std::span<const cluster::NodeIndex> feasible,
             std::span<std::int64_t> scores) override {
    for (std::size_t i = 0; i < feasible.size(); ++i) {
      scores[i] = score_node(cluster, feasible[i], pod).score;
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
