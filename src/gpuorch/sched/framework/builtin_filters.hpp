#pragma once
// The filters every scheduler runs, in the order they run and are explained: one line each. A
// new built-in filter is a file in sched/filters/ and a line here; nothing else lists them.
#include <algorithm>
#include <array>

#include "gpuorch/sched/filters/cpu.hpp"
#include "gpuorch/sched/filters/gpu_count.hpp"
#include "gpuorch/sched/filters/gpu_groups.hpp"
#include "gpuorch/sched/filters/gpu_milli.hpp"
#include "gpuorch/sched/filters/gpu_model.hpp"
#include "gpuorch/sched/filters/memory.hpp"
#include "gpuorch/sched/filters/no_gpu.hpp"
#include "gpuorch/sched/filters/node_affinity.hpp"
#include "gpuorch/sched/filters/node_unschedulable.hpp"
#include "gpuorch/sched/filters/pod_count.hpp"
#include "gpuorch/sched/filters/taint_toleration.hpp"

namespace gpuorch::sched {

// The node's own constraints first, as kube-scheduler's NodeUnschedulable, NodeAffinity and
// TaintToleration run before NodeResourcesFit; then the GPU filters (they say the most about a
// GPU pod), CPU, memory and the pod count.
inline constexpr std::array kBuiltinFilters{
    &filters::kNodeUnschedulable,
    &filters::kNodeAffinity,
    &filters::kTaintToleration,
    &filters::kNoGpu,
    &filters::kGpuModel,
    &filters::kGpuCount,
    &filters::kGpuMilli,
    &filters::kGpuGroups,
    &filters::kCpu,
    &filters::kMemory,
    &filters::kPodCount,
};

// A node-stage verdict is precomputed, so it is known before any resource filter runs: listing
// the node-stage filters first keeps the order of ids the order of evaluation.
static_assert(std::is_partitioned(kBuiltinFilters.begin(), kBuiltinFilters.end(),
                                  [](const FilterPlugin* f) {
                                    return f->stage == FilterStage::kNode;
                                  }));
static_assert(kBuiltinFilters.size() < kMaxFilters);

// The id of a built-in filter (its place in the list, from 1), for code that names one.
[[nodiscard]] consteval FilterId builtin_filter_id(const FilterPlugin& plugin) {
  for (std::size_t i = 0; i < kBuiltinFilters.size(); ++i) {
    if (kBuiltinFilters[i]->name == plugin.name) return FilterId(static_cast<std::uint8_t>(i + 1));
  }
  throw "not a built-in filter";
}

}  // namespace gpuorch::sched
