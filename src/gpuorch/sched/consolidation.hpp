#pragma once
// Consolidation: a pod that fits no node now, but would fit one if a few bound pods moved to other
// nodes, gets that node and the pods move (KAI-Scheduler's consolidation action; Koordinator's
// defragmentation by migration). Placement alone cannot undo fragmentation that earlier arrivals
// left behind; moving a few small pods can, at the price of restarting them.
//
// A plan is only carried out whole: the pending pod is bound and every moved pod is bound again
// elsewhere, or the cluster is left exactly as it was. Moved pods are re-placed by the same
// scheduler and policy as any pod, one move each (no chains), so the number of restarts a pending
// pod may cost is bounded by max_moves.
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/scheduler.hpp"

namespace gpuorch::sched {

struct ConsolidationOptions {
  int max_moves = 0;  // bound pods one pending pod may move; 0 = never move anything
  // Candidate nodes tried per pending pod, fewest moves first; each try is a real what-if
  // (release, re-place, roll back), so this bounds the cost of a pod that cannot be helped.
  int max_tries = 8;
};

struct Move {
  std::uint32_t pod = 0;  // the caller's id of the moved pod
  cluster::Placement from;
  cluster::Placement to;
};

struct ConsolidationPlan {
  cluster::Placement placement;  // the pending pod's
  std::vector<Move> moves;
};

class Consolidator {
 public:
  // The scheduler must schedule into `cluster`; both must outlive the consolidator.
  Consolidator(cluster::Cluster& cluster, Scheduler& scheduler, ConsolidationOptions options);

  // Every pod bound to the cluster, under the caller's id (unique while bound). The request must
  // stay valid while the pod is bound.
  void bound(std::uint32_t id, const PodRequest& request, const cluster::Placement& placement);

  // For a pod the scheduler could not place: moves at most max_moves bound pods so that it fits
  // one node, binds it there and returns what was done; nullopt leaves the cluster untouched.
  std::optional<ConsolidationPlan> make_room(std::uint32_t id, const PodRequest& pod);

 private:
  struct Bound {
    const PodRequest* request = nullptr;
    cluster::Placement placement;
    std::uint32_t slot = 0;  // position in pods_on_[placement.node]
    bool live = false;
  };
  struct Candidate {
    cluster::NodeIndex node = 0;
    std::vector<std::uint32_t> victims;
    std::int64_t moved_gpu_milli = 0;
  };

  // The fewest bound pods of node n whose leaving makes room for the pod; nullopt when more
  // than max_moves are needed (or the pod cannot run on n even when it is empty).
  std::optional<Candidate> victims_on(cluster::NodeIndex n, const PodRequest& pod) const;
  std::optional<ConsolidationPlan> try_candidate(const Candidate& c, const PodRequest& pod);
  void unbind(std::uint32_t id);

  cluster::Cluster* cluster_;
  Scheduler* scheduler_;
  ConsolidationOptions options_;
  std::vector<Bound> pods_;                          // by id
  std::vector<std::vector<std::uint32_t>> pods_on_;  // by node
  // Requests no plan could help, with the cluster's journal position then: in a saturated
  // cluster most arrivals fail, and until something changes the answer stays no.
  std::map<RequestKey, std::uint64_t> hopeless_;
  // Scratch of victims_on, kept to spare an allocation per node and pending pod.
  mutable std::vector<std::tuple<int, std::int64_t, std::uint32_t>> scratch_;
  mutable std::vector<std::pair<std::uint32_t, int>> gpu_cost_;
};

}  // namespace gpuorch::sched
