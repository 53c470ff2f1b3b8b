#include "gpuorch/sched/pod_request.hpp"

#include <algorithm>

#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/node_constraints.hpp"

namespace gpuorch::sched {

std::size_t RequestKeyHash::operator()(const RequestKey& k) const {
  // splitmix64-style mixing of the fields; a cache holds a few hundred keys at most.
  auto mix = [](std::uint64_t h, std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
  };
  std::uint64_t h = 0;
  h = mix(h, static_cast<std::uint64_t>(k.cpu_milli));
  h = mix(h, static_cast<std::uint64_t>(k.memory_mib));
  h = mix(h, static_cast<std::uint64_t>(k.gpu_milli));
  h = mix(h, k.model_mask);
  h = mix(h, static_cast<std::uint64_t>(k.gpu_count));
  h = mix(h, k.constraint);
  h = mix(h, k.gpu_choice);
  return static_cast<std::size_t>(h);
}

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
  resolve_constraints(pod.constraints, r);
  resolve_gpu_groups(pod, r);
  return r;
}

void RequestResolver::resolve_gpu_groups(const workload::PodSpec& pod, PodRequest& r) {
  if (!pod.gpus_restricted || pod.gpu_count == 0) return;
  auto [it, inserted] = gpu_choice_ids_.try_emplace(
      pod.gpu_groups, static_cast<std::uint32_t>(gpu_choice_ids_.size() + 1));
  if (inserted) {
    std::vector<std::vector<std::vector<int>>> per_node(cluster_->node_count());
    const auto specs = cluster_->specs();
    for (const workload::NodeGpuGroups& g : pod.gpu_groups) {
      for (std::size_t n = 0; n < specs.size(); ++n) {
        if (specs[n].name != g.node) continue;
        for (const auto& group : g.groups) {
          std::vector<int> valid;
          for (const int gpu : group) {
            if (gpu >= 0 && gpu < specs[n].gpu_count) valid.push_back(gpu);
          }
          std::sort(valid.begin(), valid.end());
          valid.erase(std::unique(valid.begin(), valid.end()), valid.end());
          if (!valid.empty()) per_node[n].push_back(std::move(valid));
        }
      }
    }
    gpu_groups_.push_back(std::move(per_node));
  }
  r.gpu_choice = it->second;
  r.gpu_groups = gpu_groups_[it->second - 1];
}

void RequestResolver::resolve_constraints(const workload::NodeConstraints& constraints,
                                          PodRequest& r) {
  const auto specs = cluster_->specs();
  if (!nodes_constrained_) {
    nodes_constrained_ = std::any_of(specs.begin(), specs.end(),
                                     [](const cluster::NodeSpec& s) { return node_constrains(s); });
  }
  // Most pods of most clusters: nothing to check, and the request stays as a trace's would.
  if (constraints.empty() && !*nodes_constrained_ && !node_filters_registered()) return;
  auto [it, inserted] = constraint_ids_.try_emplace(
      constraints, static_cast<std::uint32_t>(constraint_ids_.size() + 1));
  if (inserted) {
    std::vector<FilterId> verdicts(specs.size());
    bool all_fit = true;
    for (std::size_t n = 0; n < specs.size(); ++n) {
      verdicts[n] = check_node_constraints(specs[n], constraints);
      all_fit = all_fit && verdicts[n] == kFits;
    }
    // A constraint every node passes is no constraint: such pods share the others' index slots.
    if (all_fit) verdicts.clear();
    node_reasons_.push_back(std::move(verdicts));
  }
  const std::vector<FilterId>& verdicts = node_reasons_[it->second - 1];
  if (verdicts.empty()) return;
  r.constraint = it->second;
  r.node_reasons = verdicts;
}

}  // namespace gpuorch::sched
