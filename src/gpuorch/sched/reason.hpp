#pragma once
// Why a node cannot take a pod: the first failing filter (sched/filter.hpp).
#include <cstddef>
#include <cstdint>

namespace gpuorch::sched {

enum class Reason : std::uint8_t {
  kFits = 0,
  kNoGpu,     // the node has no GPU at all
  kGpuModel,  // the node's GPU model is not among the allowed ones
  kGpuCount,  // fewer than k whole free GPUs
  kGpuMilli,  // no single GPU with enough free milli for a shared-GPU pod
  kCpu,       // not enough free CPU
  kMemory,    // not enough free memory
  // Kubernetes node constraints (sched/node_constraints.hpp), checked before the resources as
  // kube-scheduler's NodeUnschedulable, NodeAffinity and TaintToleration plugins are.
  kUnschedulable,  // the node is cordoned and the pod does not tolerate it
  kNodeAffinity,   // nodeSelector or required node affinity does not match
  kTaint,          // a NoSchedule/NoExecute taint the pod does not tolerate
  kPods,           // the node runs its allocatable number of pods
};
inline constexpr std::size_t kReasonCount = 11;

}  // namespace gpuorch::sched
