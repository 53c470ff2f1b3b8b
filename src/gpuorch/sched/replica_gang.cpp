#include "gpuorch/sched/replica_gang.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/gang.hpp"

namespace gpuorch::sched {

std::string_view spread_policy(ReplicaSpread spread) {
  return spread == ReplicaSpread::kMostFreeFirst ? "most-free" : "tightest-fit";
}

void release_placements(cluster::Cluster& cluster, std::span<const cluster::Placement> placements) {
  for (auto it = placements.rbegin(); it != placements.rend(); ++it) cluster.release(*it);
}

namespace {

// Places one gang's replicas step by step; every placement it makes is in `made`.
class GangFill {
 public:
  GangFill(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver,
           const workload::PodSpec& replica, bool per_replica)
      : cluster_(cluster),
        scheduler_(scheduler),
        resolver_(resolver),
        replica_(replica),
        per_replica_(per_replica) {
    // Whole-GPU replicas on one node share one request, so the GPU picker sees them together.
    whole_gpus_ = replica.gpu_count > 0 && replica.gpu_milli >= base::kMilliPerGpu;
    largest_bundle_ =
        whole_gpus_ ? std::max(1, cluster.largest_gpu_count() / replica.gpu_count) : 1;
    bundles_.resize(static_cast<std::size_t>(largest_bundle_) + 1);
  }

  [[nodiscard]] bool whole_gpus() const { return whole_gpus_; }

  // The request of k replicas on one node.
  const PodRequest& bundle(int k) {
    auto& slot = bundles_[static_cast<std::size_t>(k)];
    if (!slot) {
      workload::PodSpec b = replica_;
      b.gpu_count *= k;
      b.cpu_milli *= k;
      b.memory_mib *= k;
      slot = resolver_.resolve(b);
    }
    return *slot;
  }

  // Places up to `need` replicas, among `nodes` when given; returns how many are left. Each step
  // takes the largest bundle some node holds; `stuck` gets the decision of one replica that
  // found no node.
  int fill(int need, const std::vector<cluster::NodeIndex>* nodes, Decision* stuck) {
    while (need > 0) {
      bool placed = false;
      for (int k = std::min(need, largest_bundle_); k >= 1 && !placed; --k) {
        const PodRequest& r = bundle(k);
        Decision d = nodes != nullptr ? scheduler_.decide_among(*nodes, r) : scheduler_.decide(r);
        if (d.outcome == Outcome::kPlaced && room_for_pods(d.placement.node, k)) {
          bind_replicas(std::move(d.placement), k);
          need -= k;
          placed = true;
        } else if (k == 1 && stuck != nullptr) {
          *stuck = std::move(d);
        }
      }
      if (!placed) break;
    }
    return need;
  }

  // The pods-per-node filter sees a bundle as one pod; its replicas are k.
  [[nodiscard]] bool room_for_pods(cluster::NodeIndex n, int k) const {
    const int max_pods = cluster_.spec(n).max_pods;
    return max_pods <= 0 || cluster_.pod_count(n) + k <= max_pods;
  }

  // One placement per replica, each with its share of the bundle's GPUs (in the picker's order),
  // so the cluster counts every replica as the pod it is.
  void bind_replicas(cluster::Placement bundle, int k) {
    if (!per_replica_) {
      cluster_.apply(bundle);
      made.push_back(std::move(bundle));
      return;
    }
    const std::size_t per_replica = bundle.gpus.size() / static_cast<std::size_t>(k);
    for (int i = 0; i < k; ++i) {
      cluster::Placement p;
      p.node = bundle.node;
      p.cpu_milli = replica_.cpu_milli;
      p.memory_mib = replica_.memory_mib;
      p.gpu_milli = bundle.gpu_milli;
      const auto first = bundle.gpus.begin() + static_cast<std::ptrdiff_t>(per_replica) * i;
      p.gpus.assign(first, first + static_cast<std::ptrdiff_t>(per_replica));
      cluster_.apply(p);
      made.push_back(std::move(p));
    }
  }

  // Applies again placements measured in this same cluster state (a domain's trial).
  void redo(std::vector<cluster::Placement> placements) {
    for (const auto& p : placements) cluster_.apply(p);
    made = std::move(placements);
  }

  void undo() {
    release_placements(cluster_, made);
    made.clear();
  }

  std::vector<cluster::Placement> made;

 private:
  cluster::Cluster& cluster_;
  Scheduler& scheduler_;
  RequestResolver& resolver_;
  const workload::PodSpec& replica_;
  bool per_replica_ = true;
  bool whole_gpus_ = false;
  int largest_bundle_ = 1;
  std::vector<std::optional<PodRequest>> bundles_;
};

std::vector<cluster::NodeIndex> nodes_of(std::span<const cluster::Placement> placements) {
  std::vector<cluster::NodeIndex> out;
  for (const auto& p : placements) {
    if (std::find(out.begin(), out.end(), p.node) == out.end()) out.push_back(p.node);
  }
  return out;
}

// Growth next to a running gang: its own nodes, then per level (innermost first) the nodes that
// share a domain with them. Returns the replicas still to place.
int fill_next_to(GangFill& fill, const cluster::Cluster& cluster, const ReplicaGang& gang,
                 int need) {
  const std::vector<cluster::NodeIndex> own = nodes_of(gang.running);
  need = fill.fill(need, &own, nullptr);
  for (auto level = gang.topology_levels.rbegin(); level != gang.topology_levels.rend() && need > 0;
       ++level) {
    std::vector<cluster::NodeIndex> near;
    for (const auto& [value, nodes] : topology_domains(cluster, *level)) {
      const bool holds_gang = std::any_of(nodes.begin(), nodes.end(), [&](cluster::NodeIndex n) {
        return std::find(own.begin(), own.end(), n) != own.end();
      });
      if (holds_gang) near.insert(near.end(), nodes.begin(), nodes.end());
    }
    std::sort(near.begin(), near.end());
    need = fill.fill(need, &near, nullptr);
  }
  return need;
}

// A new gang under the lowest topology level whose domain holds it whole, on the fewest nodes
// (then the domain with the lowest node index): each domain is tried, measured and undone, and
// the best is applied again as measured. Returns false when no level holds the gang.
bool fill_in_domain(GangFill& fill, const cluster::Cluster& cluster, const ReplicaGang& gang,
                    std::string* domain) {
  for (auto level = gang.topology_levels.rbegin(); level != gang.topology_levels.rend(); ++level) {
    std::optional<std::vector<cluster::Placement>> best;
    std::pair<std::size_t, cluster::NodeIndex> best_key;  // nodes used, the domain's lowest node
    for (const auto& [value, nodes] : topology_domains(cluster, *level)) {
      // Most domains of a low level (every host at "hostname") lack the GPUs: no trial for them.
      std::int64_t free_gpus = 0;
      for (const auto n : nodes) free_gpus += cluster.fully_free_gpus(n);
      if (fill.whole_gpus() && free_gpus < std::int64_t{gang.count} * gang.replica.gpu_count) {
        continue;
      }
      if (fill.fill(gang.count, &nodes, nullptr) == 0) {
        const std::pair key{nodes_of(fill.made).size(), nodes.front()};
        if (!best || key < best_key) {
          best = fill.made;
          best_key = key;
          *domain = *level + "=" + value;
        }
      }
      fill.undo();
    }
    if (best) {
      fill.redo(std::move(*best));
      return true;
    }
  }
  return false;
}

}  // namespace

ReplicaGangDecision place_replica_gang(cluster::Cluster& cluster, Scheduler& scheduler,
                                       RequestResolver& resolver, const ReplicaGang& gang) {
  ReplicaGangDecision out;
  if (gang.count <= 0) {
    out.placed = true;
    return out;
  }
  GangFill fill(cluster, scheduler, resolver, gang.replica, gang.placement_per_replica);
  const workload::PodSpec& r = gang.replica;
  // Too few free GPUs in all: the gang cannot start, and trying it replica by replica would only
  // be undone. Its explanation is the whole gang as one request.
  if (fill.whole_gpus() &&
      cluster.fully_free_gpus_total() < std::int64_t{gang.count} * r.gpu_count) {
    workload::PodSpec whole = r;
    whole.gpu_count *= gang.count;
    whole.cpu_milli *= gang.count;
    whole.memory_mib *= gang.count;
    out.failure = scheduler.decide(resolver.resolve(whole));
    out.failure.outcome = std::int64_t{gang.count} * r.gpu_count > cluster.gpu_total()
                              ? Outcome::kInfeasible
                              : Outcome::kWaiting;
    return out;
  }
  int need = gang.count;
  if (!gang.running.empty()) {
    need = fill_next_to(fill, cluster, gang, need);
  } else if (!gang.topology_levels.empty() && fill_in_domain(fill, cluster, gang, &out.domain)) {
    need = 0;
  }
  need = fill.fill(need, nullptr, &out.failure);
  if (need > 0) {
    out.placeable = gang.count - need;
    fill.undo();
    return out;
  }
  out.placed = true;
  out.placements = std::move(fill.made);
  return out;
}

}  // namespace gpuorch::sched
