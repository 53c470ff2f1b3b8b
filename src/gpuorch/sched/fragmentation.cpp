#include "gpuorch/sched/fragmentation.hpp"

#include "gpuorch/sched/pod_request.hpp"

namespace gpuorch::sched {

FragmentationMeasure::FragmentationMeasure(const workload::TargetWorkload& target,
                                           const cluster::Cluster& cluster) {
  for (const auto& c : target.classes) {
    if (c.gpu_count == 0 || c.gpu_milli == 0) {
      cpu_only_weight_ += c.weight;
      continue;
    }
    gpu_classes_.push_back(Class{c.cpu_milli, static_cast<std::int32_t>(c.gpu_milli), c.gpu_count,
                                 model_mask(cluster, c.allowed_models), c.weight});
  }
}

double FragmentationMeasure::node_amount(cluster::ModelId model, std::int64_t cpu_free,
                                         std::span<const std::int32_t> gpu_left) const {
  std::int64_t idle = 0;
  for (const std::int32_t left : gpu_left) idle += left;
  if (idle == 0) return 0.0;
  const auto idle_d = static_cast<double>(idle);
  double amount = cpu_only_weight_ * idle_d;
  for (const Class& c : gpu_classes_) {
    const bool accessible = model >= 0 && ((c.model_mask >> model) & 1U) != 0;
    if (!accessible || cpu_free < c.cpu_milli) {
      amount += c.weight * idle_d;
      continue;
    }
    int usable = 0;
    std::int64_t too_small = 0;
    for (const std::int32_t left : gpu_left) {
      if (left >= c.gpu_milli) {
        ++usable;
      } else {
        too_small += left;
      }
    }
    amount += c.weight * static_cast<double>(usable >= c.gpu_count ? too_small : idle);
  }
  return amount;
}

FragmentationTracker::FragmentationTracker(const FragmentationMeasure& measure,
                                           const cluster::Cluster& cluster)
    : measure_(&measure), amount_(cluster.node_count()), version_(cluster.node_count()) {
  for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
    amount_[n] = measure.node_amount(cluster, n);
    version_[n] = cluster.version(n);
    total_ += amount_[n];
  }
}

void FragmentationTracker::refresh(const cluster::Cluster& cluster, cluster::NodeIndex n) {
  if (version_[n] == cluster.version(n)) return;
  const double fresh = measure_->node_amount(cluster, n);
  total_ += fresh - amount_[n];
  amount_[n] = fresh;
  version_[n] = cluster.version(n);
}

}  // namespace gpuorch::sched
