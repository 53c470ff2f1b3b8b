#pragma once
// The scheduler core's view of a Kubernetes cluster: the Nodes as a cluster::Cluster, every pod
// bound to them (by any scheduler) applied to it, and the same sched::Scheduler, policy registry
// and tie-break ranking `gpuorch sim fill` uses. Nodes are fixed in a Cluster, so a change of
// the node set rebuilds it (rare); pods come and go incrementally.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::k8s {

struct MirrorOptions {
  std::string policy = "efd";
  std::uint64_t seed = 42;
  // The workload history efd and fgd estimate the target workload from; empty: the pods seen
  // on the cluster so far (every (re)build takes them anew).
  std::vector<workload::PodSpec> history;
  // Node label keys, outermost first (block, rack, hostname): a gang goes under the lowest level
  // that holds it whole (sched/gang.hpp).
  std::vector<std::string> topology_levels;
};

class ClusterMirror {
 public:
  explicit ClusterMirror(MirrorOptions options);

  // Sets the node set; the next ensure_built() rebuilds when it differs from the last build.
  void set_nodes(std::map<std::string, cluster::NodeSpec> nodes);
  // Whether two specs of a node are the same to the core (what set_nodes compares): a Node
  // update that changes nothing else (a kubelet's status report) needs no new node set.
  static bool same_node(const cluster::NodeSpec& a, const cluster::NodeSpec& b);
  // Builds the cluster (and re-applies every accounted pod) if the node set changed or no build
  // exists; `seen` is the history to use when the options have none. Returns true if it rebuilt.
  bool ensure_built(const std::vector<workload::PodSpec>& seen);
  [[nodiscard]] bool built() const { return cluster_ != nullptr; }
  // The next ensure_built() will build (no build yet, or the node set changed).
  [[nodiscard]] bool needs_build() const { return !cluster_ || nodes_changed_; }

  // A bound pod's resources, counted on its node (GPUs from its annotation when valid, else the
  // ones the core would pick). False when its node is unknown (counted once the node appears).
  bool account(const PodObject& pod);
  // A counted pod's update: what the job layer reads of it (queue, priority, start, whether it
  // terminates) follows; where it is and what it holds do not change.
  void refresh(const PodObject& pod);
  // Forgets a pod's resources (deleted, finished, or a failed bind).
  void release(const std::string& uid);
  [[nodiscard]] bool accounted(const std::string& uid) const { return placed_.contains(uid); }

  struct Result {
    sched::Decision decision;
    std::string node;           // placed: the node's name
    std::string unknown_model;  // a GPU model the pod asks for that no node has
  };
  // Decides for a pending pod and, when placed, counts it as bound (assumed) under its uid.
  Result schedule(const PodObject& pod);

  struct GangResult {
    bool placed = false;
    std::vector<std::string> nodes;  // per member placed, when placed
    std::vector<std::vector<int>> gpus;
    std::vector<std::string> uids;  // the members placed, in the order of nodes and gpus
    std::string domain;             // the topology domain it went to ("rack=r1"), if any
    std::string failed_pod;         // not placed: the member that found no node
    std::string message;            // not placed: why, in the words Result gives a pod
  };
  // All members or none (sched::place_gang); placed members are counted as bound (assumed).
  GangResult schedule_gang(const std::vector<PodObject>& members);

  // The job layer's verdict on a pending job in leaf `queue` of `queues` (`gpuorch scheduler
  // --queues`): `members` (one pod, or a gang's pending members, all or none) start when the
  // queue and its parents stay within their limits and the core places every member (as
  // schedule() / schedule_gang() do, counted as bound). What the queues hold is what the bound
  // pods hold, each in the leaf `queue_of` gives it (nullopt: counted in none); a gang's bound
  // members are one job, its members beyond the PodGroup's minMember its elastic replicas.
  // With `preempt`, a job that finds no room may take it back (reclaim, then lower priority; the
  // layer's post-filters): the victims are returned, no longer counted (`evicting`), and the
  // members hold their GPUs as a reservation until the caller binds them.
  // Accounted as replicas of the first member's request.
  struct AdmitOptions {
    std::function<std::optional<std::size_t>(const PodObject&)> queue_of;
    bool preempt = false;
    std::int64_t now_s = 0;  // Unix seconds: what a victim's run since PodObject::started_s cost
    // Whether a bound pod may be a victim; a gang is one only when all its bound members may.
    std::function<bool(const PodObject&)> preemptible;
    // A gang's minMember; 0 or absent: every bound member is needed (rigid).
    std::function<int(const std::string& gang)> gang_min;
    // When a gang last restarted while it kept running (it lost members), Unix seconds; -1 or
    // absent: never. What a preemption of it loses counts from there, or from its first
    // member's start.
    std::function<std::int64_t(const std::string& gang)> gang_restarted;
    // The fewest of `members` that may start (an elastic gang: what minMember still needs, 1
    // once it runs); 0: all of them. Those above it start when they fit, in member order.
    int min_members = 0;
    // The pod a bound entry that is no pod (a ResourceClaim's GPUs, DraState) holds GPUs for,
    // when only that pod uses them: the pod counts with them and, as a victim, frees them. ""
    // (or absent): none.
    std::function<std::string(const PodObject&)> held_for;
    // Changes whenever `queue_of`'s answers may (ClusterQueues::generation()): what the bound
    // pods hold per queue is then kept across decisions instead of summed at each. 0: summed at
    // each decision.
    std::uint64_t queues_generation = 0;
  };
  struct Victim {
    std::string uid;
    sched::jobs::PreemptReason reason = sched::jobs::PreemptReason::kReclaim;
    std::size_t queue = 0;  // the victim's leaf queue
    // A victim's claim (held_for): never evicted itself, gone when the claim is deallocated.
    bool claim = false;
  };
  struct Admission {
    GangResult placement;  // placed: each member's node and GPUs
    sched::jobs::WaitReason waiting = sched::jobs::WaitReason::kNone;
    std::string why;              // waiting: the layer's line
    std::vector<Victim> victims;  // placed by preemption: the pods to evict first
  };
  Admission admit(const sched::jobs::QueueTree& queues, std::size_t queue,
                  const std::vector<PodObject>& members, const AdmitOptions& options);
  // A victim whose eviction was refused counts on its node again.
  void restore(const std::string& uid);
  // A bound pod the caller evicts on its own (an elastic gang's shrink): counted nowhere from
  // now on, as admit()'s victims are, so that the job it was evicted for is placed on what it
  // frees; hold_evicted() then holds what that placement did not take until the pod is gone
  // (it still runs there while it terminates). restore() undoes it.
  void mark_evicting(const std::string& uid);
  void hold_evicted(const std::string& uid);
  // Chosen as a victim and not gone yet.
  [[nodiscard]] bool evicting(const std::string& uid) const;
  // Where an accounted pod is (or is to be) bound: its node and GPUs.
  [[nodiscard]] std::optional<std::pair<std::string, std::vector<int>>> assumed(
      const std::string& uid) const;

  [[nodiscard]] const cluster::Cluster& cluster() const { return *cluster_; }

 private:
  struct Bound {
    PodObject pod;
    std::string node;
    std::optional<cluster::Placement> placement;  // nullopt while its node is unknown
    // Chosen as a victim: what it held (`was`) went to the preemptor's reservation, and what
    // the reservation did not take is held (`holds`) until the pod is gone, since it still
    // runs there while it terminates; nobody else is placed on either meanwhile.
    bool evicting = false;
    std::optional<cluster::Placement> was;
    std::vector<cluster::Placement> holds;
  };
  // admit()'s common case: a rigid job within its queues' limits that fits what is free starts
  // there, as the layer would start it; nullopt: the layer decides (sizing, reasons, victims).
  std::optional<Admission> admit_on_free_room(const sched::jobs::QueueTree& queues,
                                              std::size_t queue,
                                              const std::vector<PodObject>& members,
                                              const AdmitOptions& options);
  // Places `members` (one pod as schedule(), several as schedule_gang()) and appends them to
  // `got`; false, with `got` unchanged but for a gang's failure message, and `why` filled.
  bool place_members(std::span<const PodObject> members, GangResult& got,
                     sched::jobs::PlacementFailure* why);
  // Applies the part of a victim's `was` that is still free, as its holds.
  void hold_rest(Bound& b);
  std::optional<cluster::Placement> placement_on(const PodObject& pod, const std::string& node);
  void build(const std::vector<workload::PodSpec>& seen);
  // What bound pods hold per queue of `queues` (each pod in its leaf and every queue above it).
  const std::vector<sched::jobs::Resources>& queue_holdings(const sched::jobs::QueueTree& queues,
                                                            const AdmitOptions& options);
  // A bound entry was added, changed or removed: its part of the holdings is counted again.
  void touched(const std::string& uid) {
    if (holdings_.valid) holdings_.dirty.insert(uid);
  }

  MirrorOptions options_;
  std::map<std::string, cluster::NodeSpec> nodes_;
  bool nodes_changed_ = true;
  std::unordered_map<std::string, Bound> placed_;  // by pod uid
  // queue_holdings()' running sums, valid for one tree generation; `dirty`: entries touched since.
  struct QueueHoldings {
    bool valid = false;
    std::uint64_t generation = 0;
    const sched::jobs::QueueTree* tree = nullptr;
    std::vector<sched::jobs::Resources> held;  // by queue index
    std::unordered_map<std::string, std::pair<std::size_t, sched::jobs::Resources>> counted;
    std::unordered_set<std::string> dirty;
  } holdings_;

  std::unique_ptr<cluster::Cluster> cluster_;
  std::unordered_map<std::string, cluster::NodeIndex> index_of_;
  workload::TargetWorkload target_;
  workload::TargetWorkload history_;
  std::unique_ptr<sched::FragmentationMeasure> measure_;
  std::unique_ptr<base::Rng> rng_;
  std::unique_ptr<sched::Policy> policy_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<sched::RequestResolver> resolver_;
  std::vector<std::uint32_t> rank_;
};

// kube-scheduler's wording with the core's per-reason counts and verdict:
// "0/1213 nodes are available: 900 lack a GPU with >= 810 free milli, 313 have the wrong GPU
// model. Waiting: ..." (with the unknown GPU model named first when there is one).
std::string unschedulable_message(const ClusterMirror::Result& r, const sched::PodRequest& request,
                                  std::size_t nodes);

}  // namespace gpuorch::k8s
