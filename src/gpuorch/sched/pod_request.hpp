#pragma once
// A pod as the scheduler core sees it: resources resolved against one cluster (model names turned
// into a bit mask) and a dense shape id, so policies can cache per (node state, pod shape).
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sched {

inline constexpr std::uint64_t kAnyModel = ~std::uint64_t{0};

struct PodRequest {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpu_count = 0;
  std::int64_t gpu_milli = 0;            // per GPU
  std::uint64_t model_mask = kAnyModel;  // bit m set = GPU model m allowed
  std::uint32_t shape = 0;               // equal for pods with equal cpu, GPU request and mask

  [[nodiscard]] bool cpu_only() const { return gpu_count == 0; }
  [[nodiscard]] bool gpu_share() const { return gpu_count == 1 && gpu_milli < base::kMilliPerGpu; }
  [[nodiscard]] bool allows(cluster::ModelId m) const {
    return m >= 0 && ((model_mask >> m) & 1U) != 0;
  }
};

// Resolves pod specs against a cluster and interns their shapes.
class RequestResolver {
 public:
  explicit RequestResolver(const cluster::Cluster& cluster) : cluster_(&cluster) {}

  PodRequest resolve(const workload::PodSpec& pod);
  [[nodiscard]] std::uint32_t shape_count() const {
    return static_cast<std::uint32_t>(shapes_.size());
  }
  // Model names that pods asked for and the cluster does not have (for a warning).
  [[nodiscard]] const std::vector<std::string>& unknown_models() const { return unknown_models_; }

 private:
  const cluster::Cluster* cluster_;
  std::map<std::tuple<std::int64_t, std::int64_t, int, std::uint64_t>, std::uint32_t> shapes_;
  std::vector<std::string> unknown_models_;
};

// The model mask for a list of model names (empty list = any model).
std::uint64_t model_mask(const cluster::Cluster& cluster, const std::vector<std::string>& models,
                         std::vector<std::string>* unknown = nullptr);

}  // namespace gpuorch::sched
