#pragma once
// The FGD study's GPU fragmentation measure. A node's fragment for one task class is the idle GPU
// milli that class cannot use there: all idle milli when the class cannot run on the node at all
// (no GPU needed, wrong model, not enough GPUs or CPU), otherwise the milli on GPUs individually
// too small for it. F_n(M) is the weighted sum over the target workload's classes.
#include <cstdint>
#include <span>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sched {

class FragmentationMeasure {
 public:
  FragmentationMeasure(const workload::TargetWorkload& target, const cluster::Cluster& cluster);

  // F_n(M) in milli-GPU for a node in the given state.
  [[nodiscard]] double node_amount(cluster::ModelId model, std::int64_t cpu_free,
                                   std::span<const std::int32_t> gpu_left) const;
  [[nodiscard]] double node_amount(const cluster::Cluster& cluster, cluster::NodeIndex n) const {
    return node_amount(cluster.model(n), cluster.cpu_free(n), cluster.gpu_milli_left(n));
  }

 private:
  struct Class {
    std::int64_t cpu_milli;
    std::int32_t gpu_milli;  // 0 for a CPU-only class
    int gpu_count;
    std::uint64_t model_mask;
    double weight;
  };
  // Every class in the target workload's order. The sum is accumulated per fragment category and
  // in this order, as the study does, so that equal states give bit-identical amounts: FGD's
  // integer score turns a 1-ulp negative difference into 49 instead of 50, which changes ties.
  std::vector<Class> classes_;
};

// Cluster-wide fragmentation, kept per node and refreshed only for nodes whose state changed.
class FragmentationTracker {
 public:
  FragmentationTracker(const FragmentationMeasure& measure, const cluster::Cluster& cluster);

  // Re-evaluates node n if its version changed since the last look.
  void refresh(const cluster::Cluster& cluster, cluster::NodeIndex n);
  [[nodiscard]] double node_amount(cluster::NodeIndex n) const { return amount_[n]; }
  [[nodiscard]] double cluster_amount() const { return total_; }

 private:
  const FragmentationMeasure* measure_;
  std::vector<double> amount_;
  std::vector<std::uint32_t> version_;
  double total_ = 0;
};

}  // namespace gpuorch::sched
