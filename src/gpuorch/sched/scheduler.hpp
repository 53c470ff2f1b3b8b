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
  // The reason that rejected the most nodes (the headline of the explanation).
  [[nodiscard]] Reason main_reason() const;
};

class Scheduler {
 public:
  Scheduler(cluster::Cluster& cluster, Policy& policy);

  // Ties between equal scores go to the node with the lowest rank (rank[node]); by default the
  // node order of the cluster.
  void set_tie_break_rank(std::vector<std::uint32_t> rank);

  // Decides and, when a node is found, reserves the placement in the cluster.
  Decision schedule(const PodRequest& pod);
  // Decides without changing the cluster.
  Decision decide(const PodRequest& pod);

 private:
  cluster::Cluster* cluster_;
  Policy* policy_;
  std::vector<std::uint32_t> rank_;
  std::vector<cluster::NodeIndex> feasible_;
  std::vector<std::int64_t> scores_;
};

}  // namespace gpuorch::sched
