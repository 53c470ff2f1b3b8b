// Fragmentation Gradient Descent (FGD, USENIX ATC'23): place the pod where the node's
// fragmentation F_n(M) grows least. The score keeps the study's quantisation,
// floor(100 * sigmoid((F - F') / 1000)): it turns small differences into ties that the fixed node
// ranking then resolves, which packs pods onto the same nodes and is part of why FGD works.
//
// A node's score depends only on its state and the pod's shape, so it is cached per
// (shape, node) and recomputed only for nodes whose version changed.
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
      : measure_(&measure), nodes_(nodes), frag_(nodes) {}

  [[nodiscard]] std::string_view name() const override { return "fgd"; }

  void score(const cluster::Cluster& cluster, const PodRequest& pod,
             std::span<const cluster::NodeIndex> feasible,
             std::span<std::int64_t> scores) override {
    if (pod.shape >= cache_.size()) cache_.resize(pod.shape + 1);
    auto& entries = cache_[pod.shape];
    if (entries.empty()) entries.resize(nodes_);
    for (std::size_t i = 0; i < feasible.size(); ++i) {
      const cluster::NodeIndex n = feasible[i];
      Entry& e = entries[n];
      if (e.version != cluster.version(n)) {
        e = evaluate(cluster, n, pod);
        e.version = cluster.version(n);
      }
      scores[i] = e.score;
    }
    last_shape_ = pod.shape;
  }

  std::vector<int> choose_gpus(const cluster::Cluster& cluster, cluster::NodeIndex node,
                               const PodRequest& pod) override {
    if (!pod.gpu_share()) return Policy::choose_gpus(cluster, node, pod);
    const Entry& e = cache_[last_shape_][node];
    return {e.gpu};
  }

 private:
  struct Entry {
    std::uint32_t version = 0;  // cluster versions start at 1
    std::int32_t score = 0;
    std::int32_t gpu = -1;
  };

  double current_frag(const cluster::Cluster& cluster, cluster::NodeIndex n) {
    auto& [version, amount] = frag_[n];
    if (version != cluster.version(n)) {
      amount = measure_->node_amount(cluster, n);
      version = cluster.version(n);
    }
    return amount;
  }

  Entry evaluate(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
    const double before = current_frag(cluster, n);
    const auto left = cluster.gpu_milli_left(n);
    scratch_.assign(left.begin(), left.end());
    const std::int64_t cpu_after = cluster.cpu_free(n) - pod.cpu_milli;
    Entry e;
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
          e.score = static_cast<std::int32_t>(s);
          e.gpu = g;
        }
      }
      return e;
    }
    for (const int g : lowest_free_gpus(left, pod.gpu_count)) {
      scratch_[g] -= static_cast<std::int32_t>(pod.gpu_milli);
    }
    e.score = static_cast<std::int32_t>(
        quantised_score(before, measure_->node_amount(cluster.model(n), cpu_after, scratch_)));
    return e;
  }

  const FragmentationMeasure* measure_;
  std::size_t nodes_;
  std::vector<std::pair<std::uint32_t, double>> frag_;
  std::vector<std::vector<Entry>> cache_;  // [shape][node]
  std::vector<std::int32_t> scratch_;
  std::uint32_t last_shape_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_fgd_policy(const PolicyContext& context) {
  return std::make_unique<FgdPolicy>(*context.fragmentation, context.cluster->node_count());
}

}  // namespace gpuorch::sched
