#include "gpuorch/sched/policy.hpp"

#include <cassert>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/gpu_picker.hpp"

namespace gpuorch::sched {

int best_fit_gpu(std::span<const std::int32_t> gpu_left, std::int64_t gpu_milli) {
  int best = -1;
  for (int g = 0; g < static_cast<int>(gpu_left.size()); ++g) {
    if (gpu_left[g] >= gpu_milli && (best < 0 || gpu_left[g] < gpu_left[best])) best = g;
  }
  return best;
}

std::vector<int> lowest_free_gpus(std::span<const std::int32_t> gpu_left, int count) {
  std::vector<int> gpus;
  for (int g = 0; g < static_cast<int>(gpu_left.size()) && static_cast<int>(gpus.size()) < count;
       ++g) {
    if (gpu_left[g] == base::kMilliPerGpu) gpus.push_back(g);
  }
  return gpus;
}

NodeScore Policy::score_node(const cluster::Cluster& /*cluster*/, cluster::NodeIndex /*node*/,
                             const PodRequest& /*pod*/) {
  // Only per-node policies are asked; reaching this is a bug in the caller.
  assert(false && "score_node called on a policy that does not score per node");
  return {};
}

void Policy::score(const cluster::Cluster& cluster, const PodRequest& pod,
                   std::span<const cluster::NodeIndex> feasible, std::span<std::int64_t> scores) {
  assert(scores_per_node());
  for (std::size_t i = 0; i < feasible.size(); ++i) {
    scores[i] = score_node(cluster, feasible[i], pod).score;
  }
}

std::vector<int> Policy::choose_gpus(const cluster::Cluster& cluster, cluster::NodeIndex node,
                                     const PodRequest& pod) {
  if (pod.cpu_only()) return {};
  const auto left = cluster.gpu_milli_left(node);
  if (pod.gpu_share()) {
    // The same GPU the incremental path takes from its cached NodeScore, so both paths agree.
    if (scores_per_node()) {
      if (const std::int32_t g = score_node(cluster, node, pod).gpu; g >= 0) return {g};
    }
    return {best_fit_gpu(left, pod.gpu_milli)};
  }
  const auto& links = cluster.spec(node).gpu_links;
  if (pod.gpu_choice != 0 && node < pod.gpu_groups.size()) {
    // Only GPUs of one allowed group (a DRA claim's); the picker chooses among them when the
    // policy places by topology, else the lowest free ones of the first group with room.
    return pick_gpus_in_groups(left, pod.gpu_count,
                               topology_aware_gpus() ? std::span<const std::uint8_t>(links)
                                                     : std::span<const std::uint8_t>(),
                               pod.gpu_groups[node]);
  }
  if (topology_aware_gpus() && !links.empty()) return pick_gpus(left, pod.gpu_count, links);
  return lowest_free_gpus(left, pod.gpu_count);
}

}  // namespace gpuorch::sched
