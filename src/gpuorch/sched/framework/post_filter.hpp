#pragma once
// The post-filter step: what runs when a pod, or a gang, fits nowhere (kube-scheduler's PostFilter
// extension point, where DefaultPreemption lives). A post-filter may make room: evict (preempt)
// or move bound work, and say where the pod goes once that is done. Consolidation is one; the job
// layer's reclaim and priority preemption are others.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/scheduler.hpp"

namespace gpuorch::sched {

// What a post-filter is given: the request that failed and why (kube-scheduler passes the pod
// and the per-node filter statuses). The plugin reaches the cluster and the bound work through
// what it was built with, as kube-scheduler's plugins do through their framework handle.
struct PostFilterArgs {
  std::uint64_t id = 0;       // the caller's id of the pod, or of the job whose gang failed
  const PodRequest& request;  // the pod, or one member (replica) of the gang
  std::uint32_t count = 1;    // members that must fit together: 1 for a pod, a gang's minimum
  const Decision& failure;    // outcome (waiting or infeasible) and the per-filter diagnosis
};

// Bound work a post-filter displaced, by the caller's ids.
struct Victim {
  std::uint64_t id = 0;
  std::uint32_t replicas = 0;  // of a job: how many of its replicas leave; 0 = all of it
  // Set when the victim was moved rather than evicted (consolidation): where it runs now.
  std::optional<cluster::Placement> moved_to;
};

enum class PostFilterStatus : std::uint8_t {
  kUnschedulable,  // could not help; the next post-filter runs (kube-scheduler's Unschedulable)
  kSuccess,        // made room; no further post-filter runs
};

struct PostFilterResult {
  PostFilterStatus status = PostFilterStatus::kUnschedulable;
  // Why, in the core's vocabulary: a short stable key for machine-readable output
  // ("consolidation", "reclaim", "priority") and one line for the explanation.
  std::string reason;
  std::string message;
  std::vector<Victim> victims;
  // Where the pod goes once the victims have left (kube-scheduler's nominated node).
  std::optional<cluster::NodeIndex> nominated_node;
  // When the post-filter already bound the pod, or the gang's members: one placement each
  // (consolidation binds the pod with the moves). Empty: the caller places it.
  std::vector<cluster::Placement> placements;

  [[nodiscard]] bool success() const { return status == PostFilterStatus::kSuccess; }
};

class PostFilterPlugin {
 public:
  virtual ~PostFilterPlugin() = default;
  // Stable, unique within a registry ("consolidation").
  [[nodiscard]] virtual std::string_view name() const = 0;
  // May change the cluster only when it returns kSuccess; otherwise leaves it as it was.
  virtual PostFilterResult post_filter(const PostFilterArgs& args) = 0;
};

}  // namespace gpuorch::sched
