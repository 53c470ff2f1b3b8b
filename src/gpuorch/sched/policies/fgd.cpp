// Fragmentation Gradient Descent (FGD, USENIX ATC'23): place the pod where the node's
// fragmentation F_n(M) grows least. The score keeps the study's quantisation,
// floor(100 * sigmoid((F - F') / 1000)): it turns small differences into ties that the fixed node
// ranking then resolves, which packs pods onto the same nodes and is part of why FGD works.
//
// A node's score depends only on its state and the pod's request, so FGD is a per-node policy:
// the scheduler core caches its scores per (request, node) and asks again only for nodes whose
// version changed. F_n(M) before placement is shared by every request, so it is kept here per
// node, against the node's version.
#include <cmath>

#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

std::int64_t quantised_score(double frag_before, double frag_after) {
  // int64(sigmoid(x) * 100) with the study's operation order: 100 / (1 + e^-x) can round the
  // other way where the product lands within an ulp of an integer.
  const double x = (frag_before - frag_after) / 1000.0;
  const double sigmoid = 1.0 / (1.0 + std::exp(-x));
  return static_cast<std::int64_t>(sigmoid * 100.0);
}

class FgdPolicy final : public Policy {
 public:
  FgdPolicy(const FragmentationMeasure& measure, std::size_t nodes)
      : measure_(&measure), frag_(nodes) {}

  [[nodiscard]] std::string_view name() const override { return "fgd"; }
  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }

  // The score of the pod's placement on n; for a shared-GPU pod, the best GPU (the first of
  // equal ones) and its score.
  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    const double before = current_frag(cluster, n);
    const auto left = cluster.gpu_milli_left(n);
    scratch_.assign(left.begin(), left.end());
    const std::int64_t cpu_after = cluster.cpu_free(n) - pod.cpu_milli;
    NodeScore e;
    if (pod.gpu_share()) {
      for (int g = 0; g < static_cast<int>(left.size()); ++g) {
        if (left[g] < pod.gpu_milli) continue;
        // GPUs with equal free milli give equal scores; the first one is kept anyway.
        bool seen = false;
        for (int h = 0; h < g && !seen; ++h) seen = left[h] == left[g];
        if (seen) continue;
        scratch_[g] -= static_cast<std::int32_t>(pod.gpu_milli);
        const std::int64_t s =
            quantised_score(before, measure_->node_amount(cluster.model(n), cpu_after, scratch_));
        scratch_[g] = left[g];
        if (e.gpu < 0 || s > e.score) {
          e.score = s;
          e.gpu = g;
        }
      }
      return e;
    }
    for (const int g : lowest_free_gpus(left, pod.gpu_count)) {
      scratch_[g] -= static_cast<std::int32_t>(pod.gpu_milli);
    }
    e.score = quantised_score(before, measure_->node_amount(cluster.model(n), cpu_after, scratch_));
    return e;
  }

 private:
  double current_frag(const cluster::Cluster& cluster, cluster::NodeIndex n) {
    auto& [version, amount] = frag_[n];
    if (version != cluster.version(n)) {
      amount = measure_->node_amount(cluster, n);
      version = cluster.version(n);
    }
    return amount;
  }

  const FragmentationMeasure* measure_;
  std::vector<std::pair<std::uint32_t, double>> frag_;  // per node: (version, F_n(M))
  std::vector<std::int32_t> scratch_;
};

}  // namespace

std::unique_ptr<Policy> make_fgd_policy(const PolicyContext& context) {
  return std::make_unique<FgdPolicy>(*context.fragmentation, context.cluster->node_count());
}

}  // namespace gpuorch::sched
