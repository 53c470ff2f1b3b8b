#pragma once
// A placement policy: scores the feasible nodes for a pod and picks the GPUs on the chosen node.
// Adding a policy means one class in sched/policies/ and one line in policy_registry.cpp.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sched {

// One node's score for a pod, from a per-node policy.
struct NodeScore {
  std::int64_t score = 0;  // higher wins; never INT64_MIN (the score index's "infeasible" mark)
  // For a shared-GPU pod, the GPU it gets on this node if the node is chosen; -1 leaves the
  // choice to choose_gpus. A policy that scores each GPU (FGD) returns its best one here, so
  // the scheduler does not have to ask twice.
  std::int32_t gpu = -1;
};

class Policy {
 public:
  virtual ~Policy() = default;
  Policy() = default;
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  [[nodiscard]] virtual std::string_view name() const = 0;

  // True when a node's score depends only on that node's state and the pod's request, never on
  // the other feasible nodes or a random draw: score_node(cluster, n, pod) is then a pure
  // function of (cluster's state of n, pod). The scheduler core then caches scores per (request,
  // node), re-scores only nodes whose version changed, and finds the best node in O(log N)
  // instead of scanning every node per pod (see Scheduler).
  [[nodiscard]] virtual bool scores_per_node() const { return false; }

  // The score of one feasible node; only called when scores_per_node() is true.
  virtual NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex node,
                               const PodRequest& pod);

  // True (for a per-node policy) when score_node reads nothing of a node but its resource state:
  // GPU model, capacities (CPU, memory, GPU count), free CPU and memory, per-GPU free milli in GPU
  // order and the GPU pod kinds it hosts; not its name, labels or index (no per-node data kept
  // by index other than caches of that state). Nodes in equal states then get equal scores, and
  // a pass over the whole cluster (a request's first decision) scores each distinct state once:
  // a fresh cluster of 50,000 nodes has a handful of states.
  [[nodiscard]] virtual bool scores_by_state() const { return false; }

  // The full-scan interface: scores[i] is the score of feasible[i]; higher wins, ties go to the
  // node the scheduler's tie-break order ranks first. Policies that need the whole feasible set
  // (random, a normalisation over it) override it; the default asks score_node per node.
  virtual void score(const cluster::Cluster& cluster, const PodRequest& pod,
                     std::span<const cluster::NodeIndex> feasible, std::span<std::int64_t> scores);

  // Called once per arriving pod, before it is decided: a policy that learns the workload online
  // (efd-online) counts it here. A pod that then fails has still arrived.
  virtual void observe(const PodRequest& /*pod*/) {}

  // Changes whenever the policy's node scores change for a reason other than the node's state
  // (a re-learnt target workload); the scheduler then drops the scores it cached.
  [[nodiscard]] virtual std::uint64_t score_epoch() const { return 0; }

  // True when whole-GPU pods should get the node's best-connected free GPUs (sched/gpu_picker.hpp)
  // on nodes whose NodeSpec has a GPU link matrix. False for the FGD study's six policies, which
  // keep the study's own GPU choice (lowest-index free GPUs) so the reproduction stands; true for
  // efd and efd-online.
  [[nodiscard]] virtual bool topology_aware_gpus() const { return false; }

  // The GPUs of the chosen node the pod gets; empty for a CPU-only pod. The default is the
  // study's "best" GPU selection: a shared-GPU pod goes to the GPU score_node names, else to the
  // fitting GPU with the least free milli (lowest index on ties); whole-GPU pods go to the
  // lowest-index free GPUs, or, for a topology-aware policy on a node with a link matrix, to the
  // GPU picker's best-connected free GPUs (pick_gpus).
  virtual std::vector<int> choose_gpus(const cluster::Cluster& cluster, cluster::NodeIndex node,
                                       const PodRequest& pod);
};

// What a policy may use: the cluster it will score, the target workload's fragmentation measure
// and the experiment's random stream.
struct PolicyContext {
  const cluster::Cluster* cluster = nullptr;
  const FragmentationMeasure* fragmentation = nullptr;
  base::Rng* rng = nullptr;
  // Every pod shape of the workload's history with its count (workload::typical_pods(history,
  // 1.0)); what a scheduler estimates from past pods. Null when there is no history.
  const workload::TargetWorkload* history = nullptr;
  // Tuning options from the policy spec ("efd:cpu_competition=0"); set by make_policy.
  const std::map<std::string, double>* options = nullptr;
};

// `--policy default` everywhere the scheduler core is used.
inline constexpr std::string_view kDefaultPolicyAlias = "default";
inline constexpr std::string_view kDefaultPolicy = "efd";
// "default" -> the default policy's name; any other name unchanged.
std::string_view canonical_policy_name(std::string_view name);

// A policy spec is a name, optionally followed by tuning options: "efd:popularity=0.95:
// cpu_competition=0" (for ablations). Only policies that declare options accept them.
std::unique_ptr<Policy> make_policy(std::string_view spec, const PolicyContext& context);
// Checks a spec without building the policy: unknown names or options are an InputError.
void check_policy_spec(std::string_view spec);
// Names accepted by make_policy, in the study's order.
std::vector<std::string> policy_names();
// The study's label for a policy ("06-FGD" for "fgd"); empty when the study has none.
std::string_view study_label(std::string_view name);

// Helpers shared by policies.
int best_fit_gpu(std::span<const std::int32_t> gpu_left, std::int64_t gpu_milli);
std::vector<int> lowest_free_gpus(std::span<const std::int32_t> gpu_left, int count);

}  // namespace gpuorch::sched
