#include "gpuorch/cluster/cluster.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/units.hpp"

namespace gpuorch::cluster {

GpuPodKind gpu_pod_kind(std::int64_t gpu_milli, int gpu_count) {
  return gpu_milli < base::kMilliPerGpu ? 0 : gpu_count;
}

Cluster::Cluster(std::vector<NodeSpec> nodes) : specs_(std::move(nodes)) {
  const std::size_t n = specs_.size();
  model_.resize(n, kNoModel);
  cpu_free_.resize(n);
  memory_free_.resize(n);
  gpu_offset_.resize(n);
  fully_free_.resize(n);
  max_left_.resize(n);
  total_left_.resize(n);
  version_.resize(n, 0);
  pods_.resize(n, 0);
  pod_kinds_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const NodeSpec& s = specs_[i];
    if (s.gpu_count > 0) {
      auto found = find_model(s.gpu_model);
      if (!found) {
        if (models_.size() >= kMaxModels) {
          base::fail_input("cluster has more than 64 GPU models");
        }
        models_.push_back(s.gpu_model);
        found = static_cast<ModelId>(models_.size() - 1);
      }
      model_[i] = *found;
    }
    cpu_free_[i] = s.cpu_milli;
    memory_free_[i] = s.memory_mib;
    gpu_offset_[i] = gpu_left_.size();
    gpu_left_.insert(gpu_left_.end(), static_cast<std::size_t>(s.gpu_count),
                     static_cast<std::int32_t>(base::kMilliPerGpu));
    gpu_total_ += s.gpu_count;
    largest_gpu_count_ = std::max(largest_gpu_count_, s.gpu_count);
    refresh_gpu_summary(static_cast<NodeIndex>(i));
  }
  gpu_milli_capacity_ = static_cast<std::int64_t>(gpu_total_) * base::kMilliPerGpu;
}

std::optional<ModelId> Cluster::find_model(std::string_view name) const {
  for (std::size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == name) return static_cast<ModelId>(i);
  }
  return std::nullopt;
}

void Cluster::refresh_gpu_summary(NodeIndex n) {
  std::int32_t full = 0;
  std::int32_t max_left = 0;
  std::int64_t total = 0;
  for (const std::int32_t left : gpu_milli_left(n)) {
    full += left == base::kMilliPerGpu ? 1 : 0;
    max_left = std::max(max_left, left);
    total += left;
  }
  fully_free_total_ += full - fully_free_[n];
  fully_free_[n] = full;
  max_left_[n] = max_left;
  total_left_[n] = total;
  ++version_[n];
}

void Cluster::record_change(NodeIndex n) {
  // Dropping the older half once the journal reaches 2 x the nodes (at least 4096) keeps it
  // bounded at O(nodes) memory and O(1) amortised work per change, and a reader that falls that
  // far behind pays one pass over the nodes, no more than the changes it would have replayed.
  const std::size_t cap = std::max<std::size_t>(4096, 2 * specs_.size());
  if (journal_.size() >= cap) {
    const std::size_t drop = journal_.size() / 2;
    journal_.erase(journal_.begin(), journal_.begin() + static_cast<std::ptrdiff_t>(drop));
    journal_base_ += drop;
  }
  journal_.push_back(n);
}

void Cluster::count_kind(NodeIndex n, GpuPodKind kind, int delta) {
  auto& kinds = pod_kinds_[n];
  auto it = std::find_if(kinds.begin(), kinds.end(),
                         [kind](const PodKindCount& k) { return k.kind == kind; });
  if (it == kinds.end()) {
    assert(delta > 0);
    kinds.push_back(PodKindCount{kind, delta});
    return;
  }
  it->count += delta;
  assert(it->count >= 0);
  if (it->count == 0) kinds.erase(it);
}

void Cluster::apply(const Placement& p) {
  const NodeIndex n = p.node;
  assert(cpu_free_[n] >= p.cpu_milli && memory_free_[n] >= p.memory_mib);
  cpu_free_[n] -= p.cpu_milli;
  memory_free_[n] -= p.memory_mib;
  ++pods_[n];
  std::int32_t* left = gpu_left_.data() + gpu_offset_[n];
  for (const int g : p.gpus) {
    assert(g >= 0 && g < specs_[n].gpu_count && left[g] >= p.gpu_milli);
    left[g] -= static_cast<std::int32_t>(p.gpu_milli);
    gpu_milli_used_ += p.gpu_milli;
  }
  if (!p.gpus.empty()) {
    count_kind(n, gpu_pod_kind(p.gpu_milli, static_cast<int>(p.gpus.size())), +1);
  }
  refresh_gpu_summary(n);
  record_change(n);
}

void Cluster::release(const Placement& p) {
  const NodeIndex n = p.node;
  cpu_free_[n] += p.cpu_milli;
  memory_free_[n] += p.memory_mib;
  --pods_[n];
  assert(pods_[n] >= 0);
  std::int32_t* left = gpu_left_.data() + gpu_offset_[n];
  for (const int g : p.gpus) {
    left[g] += static_cast<std::int32_t>(p.gpu_milli);
    assert(left[g] <= base::kMilliPerGpu);
    gpu_milli_used_ -= p.gpu_milli;
  }
  if (!p.gpus.empty()) {
    count_kind(n, gpu_pod_kind(p.gpu_milli, static_cast<int>(p.gpus.size())), -1);
  }
  refresh_gpu_summary(n);
  record_change(n);
}

}  // namespace gpuorch::cluster
