#pragma once
// The expected-fill model behind the EFD policy: how much of a node's idle GPU the arriving
// workload is expected to fill, and so how much is expected to stay stranded.
//
// Each GPU with r free milli is filled by a random stream of pods from the target workload, the
// first fitting pod first: fill(r) = sum over fitting classes m of p_m (d_m + fill(r - d_m)),
// divided by the fitting mass (a dynamic programme over r = 0..1000 per GPU model, with the CPU
// and memory those pods bring along). The node's expected fill is the sum over its GPUs, less what
// its free CPU or memory cannot feed (the later pods of each GPU first, with feed_tail; else a
// share of the whole); CPU-only pods compete for the same CPU.
// Pods needing several whole GPUs count as in the FGD measure: a node that cannot host one
// strands its idle GPU for that class.
#include <cstdint>
#include <span>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sched {

// A target-workload class resolved against one cluster.
struct ShapeClass {
  std::int64_t cpu_milli = 0;
  std::int32_t gpu_milli = 0;  // per GPU; 0 = CPU-only
  int gpu_count = 0;
  std::uint64_t model_mask = 0;
  double memory_mib = 0;
  double weight = 0;
};

std::vector<ShapeClass> resolve_classes(const workload::TargetWorkload& target,
                                        const cluster::Cluster& cluster);

struct ExpectedFillParams {
  // How much of a node's free CPU is assumed lost to CPU-only pods, as a multiple of their share
  // of the CPU the fitting classes ask for (0 = CPU-only pods never compete).
  double cpu_competition = 0.0;
  // Weight of the multi-GPU term (FGD-style: a node that cannot host a k-GPU class strands
  // weight x idle milli for it).
  double multi_gpu_weight = 1.0;
  // Count as stranded the fill that the node's free CPU or memory cannot feed (off only to
  // measure what it buys).
  bool feed_limit = true;
  // When the node cannot feed the whole fill, lose the pods that come last on each GPU (the gap
  // fillers after its first pod) before the first ones, at their own milli per CPU core and MiB,
  // instead of scaling the whole fill down.
  bool feed_tail = false;
};

class ExpectedFill {
 public:
  // `classes`: the target workload (weights summing to 1); `model_count`: the cluster's models.
  ExpectedFill(std::vector<ShapeClass> classes, std::size_t model_count, ExpectedFillParams params);
  // The mean of the programmes of several target workloads (each one's weights summing to 1),
  // such as the cuts of one history at several popularities: a class that only some of them
  // keep counts for that share of them, so the fill does not jump when a cut moves past a class.
  ExpectedFill(const std::vector<std::vector<ShapeClass>>& targets, std::size_t model_count,
               ExpectedFillParams params);

  // Idle GPU milli of a node in this state that the target workload is not expected to fill.
  [[nodiscard]] double stranded(cluster::ModelId model, std::int64_t cpu_free,
                                std::int64_t memory_free,
                                std::span<const std::int32_t> gpu_left) const;

 private:
  struct Fill {  // expected GPU milli filled, and the CPU and memory the filling pods use
    double gpu = 0, cpu = 0, memory = 0;
    double head_gpu = 0, head_cpu = 0, head_memory = 0;  // ... of which by each GPU's first pod
    // Adds share x o, field by field.
    void add(const Fill& o, double share = 1.0) {
      gpu += share * o.gpu;
      cpu += share * o.cpu;
      memory += share * o.memory;
      head_gpu += share * o.head_gpu;
      head_cpu += share * o.head_cpu;
      head_memory += share * o.head_memory;
    }
  };
  static constexpr std::size_t kSteps = 1001;  // r = 0..1000 milli
  [[nodiscard]] const Fill& fill(cluster::ModelId model, std::int32_t left) const {
    return fill_[static_cast<std::size_t>(model) * kSteps + static_cast<std::size_t>(left)];
  }
  [[nodiscard]] double effective_cpu(cluster::ModelId model, std::int64_t cpu_free) const;
  // From classes_: the multi-GPU classes, and the sums effective_cpu needs, made once (a node's
  // score asks for them twice).
  void index_classes(std::size_t model_count);
  // Adds `share` times the fill programme of `classes` to fill_.
  void add_programme(const std::vector<ShapeClass>& classes, std::size_t model_count, double share);

  std::vector<ShapeClass> classes_;
  std::vector<ShapeClass> multi_;  // the classes asking for 2 or more whole GPUs
  ExpectedFillParams params_;
  std::vector<Fill> fill_;                   // [model][r]
  std::vector<std::int64_t> cpu_only_asks_;  // the CPU-only classes' distinct CPU asks, ascending
  std::vector<double> cpu_only_upto_;        // [k]: their CPU demand asking at most asks_[k]
  std::vector<double> gpu_pod_cpu_;          // [model]: the CPU demand of the GPU classes on it
};

}  // namespace gpuorch::sched
