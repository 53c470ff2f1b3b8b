#include "gpuorch/sched/gang_replicas.hpp"

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/gpu_picker.hpp"

namespace gpuorch::sched {
namespace {

// The node with the most free GPUs (lowest index on ties), skipping `used`; -1 when none is free.
long long most_free(const cluster::Cluster& c, const std::vector<bool>& used) {
  long long best = -1;
  int best_free = 0;
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
    const int f = c.fully_free_gpus(n);
    if (!used[n] && f > best_free) {
      best = n;
      best_free = f;
    }
  }
  return best;
}

// The node with the fewest free GPUs that still has `need` (lowest index on ties); -1 when none.
long long tightest(const cluster::Cluster& c, const std::vector<bool>& used, int need) {
  long long best = -1;
  int best_free = 0;
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
    const int f = c.fully_free_gpus(n);
    if (!used[n] && f >= need && (best < 0 || f < best_free)) {
      best = n;
      best_free = f;
    }
  }
  return best;
}

}  // namespace

std::optional<cluster::Placement> place_on_node(cluster::Cluster& cluster, cluster::NodeIndex node,
                                                int count) {
  if (count <= 0 || cluster.fully_free_gpus(node) < count) return std::nullopt;
  cluster::Placement p;
  p.node = node;
  p.gpu_milli = base::kMilliPerGpu;
  // Whole GPUs only: a GPU another pod shares is not free for a replica.
  std::vector<std::int32_t> left(cluster.gpu_milli_left(node).begin(),
                                 cluster.gpu_milli_left(node).end());
  for (auto& l : left) {
    if (l < base::kMilliPerGpu) l = 0;
  }
  p.gpus = pick_gpus(left, count, cluster.spec(node).gpu_links);
  cluster.apply(p);
  return p;
}

void release_all(cluster::Cluster& cluster, std::span<const cluster::Placement> placements) {
  for (auto it = placements.rbegin(); it != placements.rend(); ++it) cluster.release(*it);
}

std::optional<std::vector<cluster::Placement>> place_replicas(cluster::Cluster& cluster, int gpus,
                                                              ReplicaSpread spread) {
  if (gpus <= 0 || cluster.fully_free_gpus_total() < gpus) return std::nullopt;
  std::vector<cluster::Placement> out;
  std::vector<bool> used(cluster.node_count(), false);
  int need = gpus;
  while (need > 0) {
    long long n = -1;
    if (spread == ReplicaSpread::kFewestNodes) n = tightest(cluster, used, need);
    if (n < 0) n = most_free(cluster, used);
    if (n < 0) break;
    const auto node = static_cast<cluster::NodeIndex>(n);
    used[node] = true;
    const int take = std::min(need, cluster.fully_free_gpus(node));
    auto p = place_on_node(cluster, node, take);
    if (!p) break;
    out.push_back(std::move(*p));
    need -= take;
  }
  if (need > 0) {
    release_all(cluster, out);
    return std::nullopt;
  }
  return out;
}

}  // namespace gpuorch::sched
