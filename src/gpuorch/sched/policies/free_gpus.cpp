// Spreading and packing by free GPUs, the two rules of replica gangs (sched/replica_gang.hpp):
//   most-free     the node with the most free GPUs wins: repeatedly the most free node, as many
//                 replicas as it holds, is the Pollux artifact's Tiresias and Optimus placement;
//   tightest-fit  the feasible node with the fewest free GPUs wins, so larger holes stay whole:
//                 asked for the largest bundle some node holds, it places a gang on the fewest
//                 nodes (one node, the tightest, when one holds it; else whole free nodes and the
//                 remainder best-fit, as Kueue's topology-aware BestFit).
// Ties go to the lowest rank (the node order by default). "Free" is what limits the pod: whole
// free GPUs, the largest free share of one GPU for a shared-GPU pod, free CPU for a CPU-only pod.
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

class FreeGpuPolicy final : public Policy {
 public:
  FreeGpuPolicy(std::string_view name, std::int64_t sign) : name_(name), sign_(sign) {}

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] bool scores_per_node() const override { return true; }
  [[nodiscard]] bool scores_by_state() const override { return true; }
  // A gang's replicas on one node talk over its best links.
  [[nodiscard]] bool topology_aware_gpus() const override { return true; }

  NodeScore score_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                       const PodRequest& pod) override {
    std::int64_t free = cluster.fully_free_gpus(n);
    if (pod.cpu_only()) free = cluster.cpu_free(n);
    if (pod.gpu_share()) free = cluster.max_gpu_milli_left(n);
    return {sign_ * free};
  }

 private:
  std::string_view name_;
  std::int64_t sign_;
};

}  // namespace

std::unique_ptr<Policy> make_most_free_policy(const PolicyContext& /*context*/) {
  return std::make_unique<FreeGpuPolicy>("most-free", 1);
}

std::unique_ptr<Policy> make_tightest_fit_policy(const PolicyContext& /*context*/) {
  return std::make_unique<FreeGpuPolicy>("tightest-fit", -1);
}

}  // namespace gpuorch::sched
