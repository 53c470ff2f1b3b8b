#include "gpuorch/sched/fragmentation.hpp"

#include "gpuorch/sched/pod_request.hpp"

namespace gpuorch::sched {

FragmentationMeasure::FragmentationMeasure(const workload::TargetWorkload& target,
                                           const cluster::Cluster& cluster) {
  for (const auto& c : target.classes) {
    const bool cpu_only = c.gpu_count == 0 || c.gpu_milli == 0;
    classes_.push_back(Class{c.cpu_milli, cpu_only ? 0 : static_cast<std::int32_t>(c.gpu_milli),
                             cpu_only ? 0 : c.gpu_count,
                             cpu_only ? 0 : model_mask(cluster, c.allowed_models), c.weight});
  }
}

double FragmentationMeasure::node_amount(cluster::ModelId model, std::int64_t cpu_free,
                                         std::span<const std::int32_t> gpu_left) const {
  std::int64_t idle = 0;
  for (const std::int32_t left : gpu_left) idle += left;
  if (idle == 0) return 0.0;
  const auto idle_d = static_cast<double>(idle);
  // The study's categories (pkg/utils/frag.go): a GPU class that fits ("q3") counts only its
  // too-small GPUs, under "q2_lack_gpu"; every other case counts all idle milli.
  enum { kLackBoth, kLackGpu, kLackCpu, kCpuOnlyFits, kCpuOnlyLacksCpu, kNoAccess, kCategories };
  double sum[kCategories] = {};
  for (const Class& c : classes_) {
    const bool cpu_fits = cpu_free >= c.cpu_milli;
    if (c.gpu_milli == 0) {
      sum[cpu_fits ? kCpuOnlyFits : kCpuOnlyLacksCpu] += c.weight * idle_d;
      continue;
    }
    if (!mask_allows(c.model_mask, model)) {
      sum[kNoAccess] += c.weight * idle_d;
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
    if (usable >= c.gpu_count) {
      sum[cpu_fits ? kLackGpu : kLackCpu] +=
          c.weight * static_cast<double>(cpu_fits ? too_small : idle);
    } else {
      sum[cpu_fits ? kLackGpu : kLackBoth] += c.weight * idle_d;
    }
  }
  // Summed in the study's category order: q1, q2, q4, xl, xr, no_access.
  double amount = 0;
  for (const double s : sum) amount += s;
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
