// The study's Random baseline: one feasible node drawn uniformly, and for a shared-GPU pod a GPU
// drawn uniformly among those it fits on.
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class RandomPolicy final : public Policy {
 public:
  explicit RandomPolicy(base::Rng& rng) : rng_(&rng) {}
  [[nodiscard]] std::string_view name() const override { return "random"; }

  void score(const cluster::Cluster& /*cluster*/, const PodRequest& /*pod*/,
             std::span<const cluster::NodeIndex> feasible,
             std::span<std::int64_t> scores) override {
    std::fill(scores.begin(), scores.end(), 0);
    scores[rng_->below(feasible.size())] = 100;
  }

  std::vector<int> choose_gpus(const cluster::Cluster& cluster, cluster::NodeIndex node,
                               const PodRequest& pod) override {
    if (!pod.gpu_share()) return Policy::choose_gpus(cluster, node, pod);
    const auto left = cluster.gpu_milli_left(node);
    std::vector<int> fitting;
    for (int g = 0; g < static_cast<int>(left.size()); ++g) {
      if (left[g] >= pod.gpu_milli) fitting.push_back(g);
    }
    return {fitting[rng_->below(fitting.size())]};
  }

 private:
  base::Rng* rng_;
};

}  // namespace

std::unique_ptr<Policy> make_random_policy(const PolicyContext& context) {
  return std::make_unique<RandomPolicy>(*context.rng);
}

}  // namespace gpuorch::sched
