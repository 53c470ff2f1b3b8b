#pragma once
// A pod as the scheduler core sees it: resources resolved against one cluster (model names turned
// into a bit mask) and a dense shape id, so policies can cache per (node state, pod shape).
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/framework/filter_id.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sched {

inline constexpr std::uint64_t kAnyModel = ~std::uint64_t{0};

// Whether a GPU-model mask (bit m set = model m allowed) allows `model`; a node without GPUs
// (no model) is allowed by none.
[[nodiscard]] constexpr bool mask_allows(std::uint64_t mask, cluster::ModelId model) {
  return model >= 0 && ((mask >> model) & 1U) != 0;
}

struct PodRequest {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpu_count = 0;
  std::int64_t gpu_milli = 0;            // per GPU
  std::uint64_t model_mask = kAnyModel;  // bit m set = GPU model m allowed
  std::uint32_t shape = 0;               // equal for pods with equal cpu, GPU request and mask
  // Node constraints (labels, affinity, taints, cordons): 0 = none, else an id of the resolver
  // that made the request, equal for equal constraints. node_reasons[n] is node n's verdict
  // (kFits or the node-stage filter that excludes it), owned by that resolver; empty when every
  // node passes.
  std::uint32_t constraint = 0;
  std::span<const FilterId> node_reasons;
  // GPUs restricted to groups (workload::PodSpec::gpu_groups): 0 = any GPU, else an id of the
  // resolver, equal for equal groups; gpu_groups[n] are node n's groups (owned by the resolver).
  std::uint32_t gpu_choice = 0;
  std::span<const std::vector<std::vector<int>>> gpu_groups;

  [[nodiscard]] bool cpu_only() const { return gpu_count == 0; }
  [[nodiscard]] bool gpu_share() const { return gpu_count == 1 && gpu_milli < base::kMilliPerGpu; }
  [[nodiscard]] bool allows(cluster::ModelId m) const { return mask_allows(model_mask, m); }
};

// Everything in a request that can change a node's verdict or score: the one key of the core's
// per-request caches (the score index's slots, consolidation's requests no plan can help).
struct RequestKey {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  std::int64_t gpu_milli = 0;
  std::uint64_t model_mask = 0;
  int gpu_count = 0;
  std::uint32_t constraint = 0;
  std::uint32_t gpu_choice = 0;

  explicit RequestKey(const PodRequest& pod)
      : cpu_milli(pod.cpu_milli),
        memory_mib(pod.memory_mib),
        gpu_milli(pod.gpu_milli),
        model_mask(pod.model_mask),
        gpu_count(pod.gpu_count),
        constraint(pod.constraint),
        gpu_choice(pod.gpu_choice) {}
  RequestKey() = default;
  auto operator<=>(const RequestKey&) const = default;
};
struct RequestKeyHash {
  std::size_t operator()(const RequestKey& k) const;
};

// Resolves pod specs against a cluster and interns their shapes.
class RequestResolver {
 public:
  explicit RequestResolver(const cluster::Cluster& cluster) : cluster_(&cluster) {}

  // The request stays valid as long as this resolver (it may point into its constraint table).
  PodRequest resolve(const workload::PodSpec& pod);
  [[nodiscard]] std::uint32_t shape_count() const {
    return static_cast<std::uint32_t>(shapes_.size());
  }
  // Model names that pods asked for and the cluster does not have (for a warning).
  [[nodiscard]] const std::vector<std::string>& unknown_models() const { return unknown_models_; }

 private:
  void resolve_constraints(const workload::NodeConstraints& constraints, PodRequest& r);
  void resolve_gpu_groups(const workload::PodSpec& pod, PodRequest& r);

  const cluster::Cluster* cluster_;
  std::map<std::tuple<std::int64_t, std::int64_t, int, std::uint64_t>, std::uint32_t> shapes_;
  std::vector<std::string> unknown_models_;
  // Interned node constraints: id - 1 indexes both; verdicts are computed once per constraint.
  std::map<workload::NodeConstraints, std::uint32_t> constraint_ids_;
  std::deque<std::vector<FilterId>> node_reasons_;
  std::optional<bool> nodes_constrained_;  // some node is tainted or cordoned
  // Interned GPU groups: id - 1 indexes the per-node groups.
  std::map<std::vector<workload::NodeGpuGroups>, std::uint32_t> gpu_choice_ids_;
  std::deque<std::vector<std::vector<std::vector<int>>>> gpu_groups_;
};

// The model mask for a list of model names (empty list = any model).
std::uint64_t model_mask(const cluster::Cluster& cluster, const std::vector<std::string>& models,
                         std::vector<std::string>* unknown = nullptr);

}  // namespace gpuorch::sched
