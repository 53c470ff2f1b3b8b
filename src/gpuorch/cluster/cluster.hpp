#pragma once
// The schedulable state of a cluster. Per-node hot data lives in parallel contiguous arrays (the
// scheduler scans every node for every pod), and each node carries a version that changes whenever
// its state does, so scores and fragmentation can be cached per node and refreshed incrementally.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::cluster {

using NodeIndex = std::uint32_t;
using ModelId = std::int16_t;
inline constexpr ModelId kNoModel = -1;
inline constexpr int kMaxModels = 64;  // models are also kept as bits of a std::uint64_t mask

// The kind of GPU pod, as GPU-clustering policies group them: 0 = a share of one GPU,
// k >= 1 = k whole GPUs.
using GpuPodKind = int;

struct PodKindCount {
  GpuPodKind kind = 0;
  int count = 0;
};

// A pod's resources bound to one node and specific GPUs.
struct Placement {
  NodeIndex node = 0;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  std::int64_t gpu_milli = 0;  // per GPU
  std::vector<int> gpus;       // GPU indices within the node
};

class Cluster {
 public:
  explicit Cluster(std::vector<NodeSpec> nodes);

  [[nodiscard]] std::size_t node_count() const { return specs_.size(); }
  [[nodiscard]] const NodeSpec& spec(NodeIndex n) const { return specs_[n]; }
  [[nodiscard]] std::span<const NodeSpec> specs() const { return specs_; }

  [[nodiscard]] std::span<const std::string> models() const { return models_; }
  [[nodiscard]] std::optional<ModelId> find_model(std::string_view name) const;

  [[nodiscard]] ModelId model(NodeIndex n) const { return model_[n]; }
  [[nodiscard]] std::int64_t cpu_free(NodeIndex n) const { return cpu_free_[n]; }
  [[nodiscard]] std::int64_t memory_free(NodeIndex n) const { return memory_free_[n]; }
  [[nodiscard]] int gpu_count(NodeIndex n) const { return specs_[n].gpu_count; }
  [[nodiscard]] std::span<const std::int32_t> gpu_milli_left(NodeIndex n) const {
    return {gpu_left_.data() + gpu_offset_[n], static_cast<std::size_t>(specs_[n].gpu_count)};
  }
  [[nodiscard]] int fully_free_gpus(NodeIndex n) const { return fully_free_[n]; }
  // Entirely free GPUs in the whole cluster.
  [[nodiscard]] std::int64_t fully_free_gpus_total() const { return fully_free_total_; }
  [[nodiscard]] std::int32_t max_gpu_milli_left(NodeIndex n) const { return max_left_[n]; }
  [[nodiscard]] std::int64_t gpu_milli_left_total(NodeIndex n) const { return total_left_[n]; }
  [[nodiscard]] std::uint32_t version(NodeIndex n) const { return version_[n]; }
  // Placements bound to the node (the pods-per-node filter reads it).
  [[nodiscard]] int pod_count(NodeIndex n) const { return pods_[n]; }
  [[nodiscard]] std::span<const PodKindCount> gpu_pod_kinds(NodeIndex n) const {
    return pod_kinds_[n];
  }

  // The change journal: every state change of a node (apply, release) appends the node, so state
  // derived from nodes (the scheduler's score index) catches up on what changed since it last
  // looked instead of rescanning every node. Positions are absolute and only grow. Old entries are
  // dropped once the journal is a few times longer than the cluster (it must not grow forever in a
  // long-running scheduler); a reader that fell behind them gets nullopt and revalidates every
  // node by version. A node may appear more than once.
  [[nodiscard]] std::uint64_t journal_end() const { return journal_base_ + journal_.size(); }
  [[nodiscard]] std::optional<std::span<const NodeIndex>> changes_since(
      std::uint64_t position) const {
    if (position < journal_base_ || position > journal_end()) return std::nullopt;
    return std::span<const NodeIndex>(journal_).subspan(position - journal_base_);
  }

  [[nodiscard]] std::int64_t gpu_milli_capacity() const { return gpu_milli_capacity_; }
  [[nodiscard]] std::int64_t gpu_milli_used() const { return gpu_milli_used_; }
  [[nodiscard]] int gpu_total() const { return gpu_total_; }
  // The most GPUs one node has: the largest gang of whole GPUs one placement can hold.
  [[nodiscard]] int largest_gpu_count() const { return largest_gpu_count_; }

  // Binds a placement. The caller (the scheduler) has checked that it fits.
  void apply(const Placement& placement);
  // Undoes apply(); the exact inverse, used for departures and what-if evaluation.
  void release(const Placement& placement);

 private:
  void refresh_gpu_summary(NodeIndex n);
  void record_change(NodeIndex n);
  void count_kind(NodeIndex n, GpuPodKind kind, int delta);

  std::vector<NodeSpec> specs_;
  std::vector<std::string> models_;
  std::vector<ModelId> model_;
  std::vector<std::int64_t> cpu_free_;
  std::vector<std::int64_t> memory_free_;
  std::vector<std::size_t> gpu_offset_;
  std::vector<std::int32_t> gpu_left_;
  std::vector<std::int32_t> fully_free_;
  std::vector<std::int32_t> max_left_;
  std::vector<std::int64_t> total_left_;
  std::vector<std::uint32_t> version_;
  std::vector<std::int32_t> pods_;
  std::vector<std::vector<PodKindCount>> pod_kinds_;
  std::vector<NodeIndex> journal_;
  std::uint64_t journal_base_ = 0;  // absolute position of journal_[0]
  std::int64_t gpu_milli_capacity_ = 0;
  std::int64_t gpu_milli_used_ = 0;
  std::int64_t fully_free_total_ = 0;
  int gpu_total_ = 0;
  int largest_gpu_count_ = 0;
};

// The kind of a GPU pod from its per-GPU milli and GPU count (see GpuPodKind).
GpuPodKind gpu_pod_kind(std::int64_t gpu_milli, int gpu_count);

}  // namespace gpuorch::cluster
