#include "gpuorch/sched/jobs/measured_steps.hpp"

#include <algorithm>

namespace gpuorch::sched::jobs {

bool MeasuredSteps::add(const ThroughputSample& sample) {
  auto& points = steps_[{sample.replicas, sample.nodes}];
  const auto it = std::lower_bound(points.begin(), points.end(), sample.local_batch,
                                   [](const auto& p, int local) { return p.first < local; });
  if (it != points.end() && it->first == sample.local_batch) return false;
  points.emplace(it, sample.local_batch, sample.step_time);
  ++version_;
  return true;
}

const MeasuredSteps::Points* MeasuredSteps::at(int gpus, int nodes) const {
  const auto it = steps_.find({gpus, nodes});
  return it == steps_.end() ? nullptr : &it->second;
}

}  // namespace gpuorch::sched::jobs
