#include "gpuorch/sched/pod_request.hpp"

#include <algorithm>

namespace gpuorch::sched {

std::uint64_t model_mask(const cluster::Cluster& cluster, const std::vector<std::string>& models,
                         std::vector<std::string>* unknown) {
  if (models.empty()) return kAnyModel;
  std::uint64_t mask = 0;
  for (const std::string& name : models) {
    if (auto id = cluster.find_model(name)) {
      mask |= std::uint64_t{1} << *id;
    } else if (unknown != nullptr &&
               std::find(unknown->begin(), unknown->end(), name) == unknown->end()) {
      unknown->push_back(name);
    }
  }
  return mask;
}

PodRequest RequestResolver::resolve(const workload::PodSpec& pod) {
  PodRequest r;
  r.cpu_milli = pod.cpu_milli;
  r.memory_mib = pod.memory_mib;
  r.gpu_count = pod.gpu_count;
  r.gpu_milli = pod.gpu_count > 0 ? pod.gpu_milli : 0;
  // A CPU-only pod cannot be constrained to a GPU model.
  r.model_mask =
      pod.gpu_count > 0 ? model_mask(*cluster_, pod.allowed_models, &unknown_models_) : kAnyModel;
  const auto key = std::make_tuple(r.cpu_milli, r.gpu_milli, r.gpu_count, r.model_mask);
  auto [it, inserted] = shapes_.try_emplace(key, static_cast<std::uint32_t>(shapes_.size()));
  r.shape = it->second;
  return r;
}

}  // namespace gpuorch::sched
