#include "gpuorch/sim/timeline_model_use.hpp"

#include <algorithm>

namespace gpuorch::sim {

ModelUseMeter::ModelUseMeter(const cluster::Cluster& cluster, std::size_t queues)
    : cluster_(&cluster), queues_(queues) {
  std::vector<std::string> models;
  for (const std::string& m : cluster.models()) {
    if (!m.empty()) models.push_back(m);
  }
  if (models.size() < 2) return;
  models_ = std::move(models);
  held_.assign(queues_ * models_.size(), 0);
  use_.assign(held_.size(), ModelUse{});
}

void ModelUseMeter::change(std::size_t q, std::span<const cluster::Placement> placements,
                           int sign) {
  if (!measuring()) return;
  for (const cluster::Placement& p : placements) {
    const std::string& model = cluster_->spec(p.node).gpu_model;
    const auto at = std::find(models_.begin(), models_.end(), model);
    if (at == models_.end()) continue;
    const std::size_t i = q * models_.size() + std::size_t(at - models_.begin());
    held_[i] += sign * static_cast<int>(p.gpus.size());
  }
}

void ModelUseMeter::advance(double seconds) {
  for (std::size_t i = 0; i < held_.size(); ++i) {
    use_[i].gpu_seconds += double(held_[i]) * seconds;
    // The peak of what is held for a while: within a tick's changes one job may take GPUs
    // another gives back only later in the list (a repacked job moving), never both at once.
    if (seconds > 0) use_[i].peak_gpus = std::max(use_[i].peak_gpus, held_[i]);
  }
}

std::vector<std::vector<ModelUse>> ModelUseMeter::use() const {
  std::vector<std::vector<ModelUse>> out(measuring() ? queues_ : 0);
  for (std::size_t q = 0; q < out.size(); ++q) {
    out[q].assign(use_.begin() + std::ptrdiff_t(q * models_.size()),
                  use_.begin() + std::ptrdiff_t((q + 1) * models_.size()));
  }
  return out;
}

}  // namespace gpuorch::sim
