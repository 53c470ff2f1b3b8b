#pragma once
// What each queue holds of each GPU model over a timeline, on a cluster of several models: the
// GPU-hours and the most GPUs at once, so a report shows each queue against its quotas per model
// (spec.resources.gpuModels, docs/jobs.md). Kept as jobs change, so a tick costs
// O(queues x models), not O(running jobs).
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"

namespace gpuorch::sim {

// One queue's use of one GPU model.
struct ModelUse {
  double gpu_seconds = 0;
  int peak_gpus = 0;
};

class ModelUseMeter {
 public:
  // Measures nothing on a cluster of one model (or none).
  ModelUseMeter(const cluster::Cluster& cluster, std::size_t queues);

  [[nodiscard]] bool measuring() const { return !models_.empty(); }
  // Queue q's job took (sign +1) or gave back (-1) the GPUs of `placements`.
  void change(std::size_t q, std::span<const cluster::Placement> placements, int sign);
  // What is held now was held `seconds` more (more than 0: it counts for the peak).
  void advance(double seconds);

  // The cluster's models (empty when not measuring) and, by queue then model, their use.
  [[nodiscard]] const std::vector<std::string>& models() const { return models_; }
  [[nodiscard]] std::vector<std::vector<ModelUse>> use() const;

 private:
  const cluster::Cluster* cluster_;
  std::vector<std::string> models_;
  std::size_t queues_;
  std::vector<int> held_;  // by queue * models + model
  std::vector<ModelUse> use_;
};

}  // namespace gpuorch::sim
