#include "gpuorch/sched/filter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace gpuorch::sched {
namespace {

Reason check_gpus(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  if (pod.cpu_only()) return Reason::kFits;
  if (cluster.gpu_count(n) == 0) return Reason::kNoGpu;
  if (!pod.allows(cluster.model(n))) return Reason::kGpuModel;
  if (pod.gpu_share()) {
    return cluster.max_gpu_milli_left(n) >= pod.gpu_milli ? Reason::kFits : Reason::kGpuMilli;
  }
  return cluster.fully_free_gpus(n) >= pod.gpu_count ? Reason::kFits : Reason::kGpuCount;
}

Reason check_pod_count(const cluster::Cluster& cluster, cluster::NodeIndex n) {
  const int max_pods = cluster.spec(n).max_pods;
  if (max_pods == 0) return Reason::kFits;
  return max_pods < 0 || cluster.pod_count(n) >= max_pods ? Reason::kPods : Reason::kFits;
}

}  // namespace

Reason check_node(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  if (!pod.node_reasons.empty() && pod.node_reasons[n] != Reason::kFits) return pod.node_reasons[n];
  if (const Reason r = check_gpus(cluster, n, pod); r != Reason::kFits) return r;
  if (cluster.cpu_free(n) < pod.cpu_milli) return Reason::kCpu;
  if (cluster.memory_free(n) < pod.memory_mib) return Reason::kMemory;
  return check_pod_count(cluster, n);
}

Reason check_empty_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                        const PodRequest& pod) {
  const cluster::NodeSpec& s = cluster.spec(n);
  // Labels, taints and cordons are the node's, not its load's: an empty node keeps them.
  if (!pod.node_reasons.empty() && pod.node_reasons[n] != Reason::kFits) return pod.node_reasons[n];
  if (!pod.cpu_only()) {
    if (s.gpu_count == 0) return Reason::kNoGpu;
    if (!pod.allows(cluster.model(n))) return Reason::kGpuModel;
    if (s.gpu_count < pod.gpu_count) return Reason::kGpuCount;
  }
  if (s.cpu_milli < pod.cpu_milli) return Reason::kCpu;
  if (s.memory_mib < pod.memory_mib) return Reason::kMemory;
  return Reason::kFits;
}

const char* reason_key(Reason r) {
  switch (r) {
    case Reason::kFits:
      return "fits";
    case Reason::kNoGpu:
      return "no-gpu";
    case Reason::kGpuModel:
      return "gpu-model";
    case Reason::kGpuCount:
      return "gpu-count";
    case Reason::kGpuMilli:
      return "gpu-milli";
    case Reason::kCpu:
      return "cpu";
    case Reason::kMemory:
      return "memory";
    case Reason::kUnschedulable:
      return "unschedulable";
    case Reason::kNodeAffinity:
      return "node-affinity";
    case Reason::kTaint:
      return "taint";
    case Reason::kPods:
      return "pods";
  }
  return "unknown";
}

std::string reason_phrase(Reason r, const PodRequest& pod) {
  switch (r) {
    case Reason::kFits:
      return "fit";
    case Reason::kNoGpu:
      return "have no GPU";
    case Reason::kGpuModel:
      return "have the wrong GPU model";
    case Reason::kGpuCount:
      return fmt::format("lack {} free whole GPU{}", pod.gpu_count, pod.gpu_count == 1 ? "" : "s");
    case Reason::kGpuMilli:
      return fmt::format("lack a GPU with >= {} free milli", pod.gpu_milli);
    case Reason::kCpu:
      return fmt::format("lack {} free CPU milli", pod.cpu_milli);
    case Reason::kMemory:
      return fmt::format("lack {} MiB free memory", pod.memory_mib);
    case Reason::kUnschedulable:
      return "are unschedulable (cordoned)";
    case Reason::kNodeAffinity:
      return "do not match the pod's node selector or affinity";
    case Reason::kTaint:
      return "have a taint the pod does not tolerate";
    case Reason::kPods:
      return "run their maximum number of pods";
  }
  return "unknown";
}

std::string FilterDiagnosis::explain(const PodRequest& pod) const {
  std::vector<std::size_t> order(kReasonCount);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
    return nodes_by_reason[a] > nodes_by_reason[b];
  });
  std::vector<std::string> parts;
  for (const std::size_t i : order) {
    if (i == 0 || nodes_by_reason[i] == 0) continue;
    parts.push_back(
        fmt::format("{} {}", nodes_by_reason[i], reason_phrase(static_cast<Reason>(i), pod)));
  }
  if (parts.empty()) return fmt::format("{} nodes", nodes_checked);
  return fmt::format("{} nodes: {}", nodes_checked, fmt::join(parts, ", "));
}

}  // namespace gpuorch::sched
