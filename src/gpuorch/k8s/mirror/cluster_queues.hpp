#pragma once
// The cluster's Queues (KAI-Scheduler's scheduling.run.ai/v2, the CRD `gpuorch manifests` ships)
// as the job layer's queue tree, for `gpuorch scheduler --queues`. The objects are read by the
// same reader as `sim timeline --queues` (io/queue_yaml.hpp), so a cluster and the simulator agree
// on every field. A set of Queues the reader refuses (a cycle, an undefined parent, a quota above
// its limit) keeps the last good tree, and the reason is logged once. Pods without the label
// kai.scheduler/queue belong to the leaf `default`, added without quota or limit when the cluster
// defines no queue of that name. Spec fields the reader does not know (KAI's that gpuorch does not
// act on) are left out of a cluster's objects, with a log line, where a file would be refused.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "gpuorch/sched/jobs/resources.hpp"

namespace gpuorch::k8s {

inline constexpr const char* kDefaultQueue = "default";

class ClusterQueues {
 public:
  ClusterQueues();
  // A Queue object added, changed or deleted; returns a line to log when the set it makes is
  // refused (the tree stays as it was) or when spec fields the reader does not know were left
  // out (KAI's own, such as minimum runtimes; named once per queue), "" otherwise.
  std::string update(const nlohmann::json& queue, bool deleted);
  [[nodiscard]] const sched::jobs::QueueTree& tree() const { return tree_; }
  // Goes up with every update() (from 1), so what depends on the tree can tell it may differ.
  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  // Why the current set of objects is refused (the last good tree stays); empty when it is not.
  [[nodiscard]] const std::string& refused() const { return refused_; }
  // The leaf a pod's label names (empty: the default queue); nullopt when it is no leaf queue.
  [[nodiscard]] std::optional<std::size_t> leaf(const std::string& name) const;

  // The GPU model of a node (by name; "" when not known): what a bound pod's GPUs count as
  // against the queues' quotas per model (spec.resources.gpuModels).
  using NodeModel = std::function<std::string(const std::string& node)>;

  // What `pods` hold, per queue of the tree (by index): each pod's request counted in its leaf
  // and every queue above it; pods naming no leaf queue count nowhere. With `dra`, a pod's
  // request includes the GPUs of its ResourceClaims (allocated, else asked). With `model_of`, a
  // bound pod's GPUs count in its node's model too, a pending pod's in the one model it accepts.
  [[nodiscard]] std::vector<sched::jobs::Resources> holdings(
      const std::vector<const PodObject*>& pods, const DraState* dra = nullptr,
      const NodeModel& model_of = {}) const;

  // Each Queue object's status as KAI-Scheduler writes it (`allocated` and `requested`, resource
  // lists with cpu, memory and nvidia.com/gpu): what the pods of the queue and of the queues
  // under it hold (`bound`) and hold or ask for (`bound` and `pending`). By queue name; queues
  // without an object (the added default) are left out. With quotas per GPU model and
  // `model_of`, also `gpuModels`: per model the queue names, its GPUs `allocated` and
  // `requested` (gpuorch's, as the spec's field is).
  [[nodiscard]] std::map<std::string, nlohmann::json> statuses(
      const std::vector<const PodObject*>& bound, const std::vector<const PodObject*>& pending,
      const DraState* dra = nullptr, const NodeModel& model_of = {}) const;

 private:
  std::map<std::string, nlohmann::json> objects_;  // by name
  sched::jobs::QueueTree tree_;
  std::uint64_t generation_ = 1;
  std::string refused_;                         // the last refusal logged
  std::map<std::string, std::string> ignored_;  // by queue: the spec fields left out, logged
};

}  // namespace gpuorch::k8s
