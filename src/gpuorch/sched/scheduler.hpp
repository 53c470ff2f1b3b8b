#pragma once
// The scheduler core: filters -> policy score -> select -> reserve. The simulator, the Kubernetes
// scheduler and `doctor` all place pods through this class.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/score_index.hpp"

namespace gpuorch::sched {

enum class Outcome : std::uint8_t {
  kPlaced,
  kWaiting,     // fits some node when it is empty, but no node now
  kInfeasible,  // fits no node even when empty
};

struct Decision {
  Outcome outcome = Outcome::kWaiting;
  cluster::Placement placement;  // valid when placed
  FilterDiagnosis diagnosis;     // filled when not placed
  // The filter that rejected the most nodes (the headline of the explanation).
  [[nodiscard]] FilterId main_reason() const { return diagnosis.most_rejections(); }
};

struct SchedulerOptions {
  // Per-node policies (Policy::scores_per_node) are decided through the score index, which
  // re-scores only changed nodes and finds the best node in O(log N). false forces the full scan
  // of every node per pod: the reference the equivalence test holds the index to.
  bool incremental = true;
  // Memory the score index may use (about 40 bytes per node and distinct request); beyond it the
  // least recently used request is dropped and rebuilt when it comes back.
  std::size_t index_budget_bytes = std::size_t{512} << 20;
};

class Scheduler {
 public:
  Scheduler(cluster::Cluster& cluster, Policy& policy, SchedulerOptions options = {});

  // Ties between equal scores go to the node with the lowest rank (rank[node]); by default the
  // node order of the cluster.
  void set_tie_break_rank(std::vector<std::uint32_t> rank);

  // Decides and, when a node is found, reserves the placement in the cluster.
  Decision schedule(const PodRequest& pod);
  // Decides without changing the cluster.
  Decision decide(const PodRequest& pod);
  // The placement the pod would get on node n (its GPUs chosen as schedule() chooses them),
  // without changing the cluster; n must pass the filters. For actions that pick the node
  // themselves (consolidation).
  Decision decide_on(cluster::NodeIndex n, const PodRequest& pod);
  // The same filters, scores and tie-break, among `nodes` only (a gang's own nodes, one topology
  // domain), without changing the cluster; when none fits, the diagnosis counts those nodes.
  Decision decide_among(std::span<const cluster::NodeIndex> nodes, const PodRequest& pod);

 private:
  Decision decide_full_scan(const PodRequest& pod);
  // Scores feasible_ and places on the best of them; feasible_ must not be empty.
  Decision best_of_feasible(const PodRequest& pod);
  // Why no node fits: every node's first failing filter, and whether any would fit when empty.
  Decision diagnose(const PodRequest& pod) const;
  Decision placed(cluster::NodeIndex node, const PodRequest& pod, std::int32_t gpu_hint);

  cluster::Cluster* cluster_;
  Policy* policy_;
  SchedulerOptions options_;
  ScoreIndex index_;
  std::uint64_t score_epoch_ = 0;  // the policy's score epoch the index was built under
  std::vector<std::uint32_t> rank_;
  std::vector<cluster::NodeIndex> feasible_;
  std::vector<std::int64_t> scores_;
};

}  // namespace gpuorch::sched
