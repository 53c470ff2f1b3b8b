#pragma once
// `gpuorch scheduler`: places the pods whose spec.schedulerName is ours on a real cluster with the
// scheduler core. Informers keep Nodes and Pods current; one thread decides, pod by pod in
// priority order, through ClusterMirror (the same core and policies as `gpuorch sim`); binders
// write the GPU choice onto the pod and bind it through pods/binding; a pod that fits nowhere gets
// PodScheduled=False (Unschedulable) and an Event with the core's explanation, and is tried again
// when the cluster changes, never in a busy loop: every failure (no room, a refused bind, a
// decision that threw) makes the pod wait its backoff (1 s doubling to 10 s, as kube-scheduler).
// A pod with spec.schedulingGates is never decided (PodScheduled=False, SchedulingGated) until
// its last gate is removed; a required constraint the core does not evaluate (inter-pod
// affinity, topology spread, host ports, node-bound volumes) makes it Unschedulable with the
// field's name instead of being ignored. DRA claims are allocated by the core and written before
// the binding (scheduler_dra.cpp), a gang's all before any member's (scheduler_dra_jobs.cpp).
// Status writes the API server did not take are retried with backoff.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/cluster_queues.hpp"
#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/mirror_feed.hpp"
#include "gpuorch/k8s/mirror/pod_group.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/k8s/scheduler/retried_writes.hpp"
#include "gpuorch/sched/backoff.hpp"
#include "gpuorch/sched/jobs/measured_growth.hpp"
#include "gpuorch/sched/pending_queue.hpp"

namespace gpuorch::k8s {

struct SchedulerServiceOptions {
  std::string scheduler_name = "gpuorch";
  MirrorOptions mirror;
  int binders = 4;  // concurrent bind calls (decisions stay sequential)
  // Unschedulable pods are retried on every cluster change, and at the latest after this long.
  std::chrono::seconds retry_unschedulable{60};
  // Per-pod wait after a failure: initial, doubled per failure in a row, at most max.
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{10000};
  // The discovery of the PodGroup API is retried this long, then run() throws (the process
  // exits non-zero and is restarted); the informers must have listed within sync_timeout.
  std::chrono::seconds startup_timeout{20};
  std::chrono::seconds sync_timeout{120};
  // The decision loop counts as stuck (alive() false) when it has not come round for this long.
  std::chrono::seconds stale_after{30};
  // Decide through the job layer over the cluster's Queues (scheduling.run.ai/v2, label
  // kai.scheduler/queue; docs/scheduler.md): limits hold, reasons are the layer's.
  bool queues = false;
  // With queues: a job that finds no room takes it back from queues over their fair share and
  // from lower priorities (the layer's victims, evicted through the Eviction API; the job is
  // bound on the GPUs they free, held for it meanwhile, once they are gone).
  bool preemption = true;
  // With queues: an elastic gang (more pods than its PodGroup's minMember) grows onto freed
  // resources at most once per this long, so restarts of its training do not eat the gain.
  std::chrono::seconds resize_interval{300};
  // With queues: what one resize idles an elastic job (rendezvous, restart, checkpoint load), so
  // a gang grows only when its fitted speedup pays for it over a resize interval
  // (sched/jobs/measured_growth.hpp). nullopt: a tenth of resize_interval (30 s at 300 s, the
  // simulator's restart cost).
  std::optional<std::chrono::milliseconds> resize_cost;
  // After a bound pod finishes or goes, no decision for this long (each further one extends it,
  // to at most four times this from the first): a job's pods finish one by one, and a waiting
  // job should see all that the job held come free as one change, not a smaller job take the
  // first of it. 0: decide at once.
  std::chrono::milliseconds settle_after_finish{0};
  base::LogSink log;  // one line per bind/failure; may be empty
};

struct SchedulerCounters {
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> binds{0};
  std::atomic<std::uint64_t> bind_errors{0};
  std::atomic<std::uint64_t> unschedulable{0};
  std::atomic<std::uint64_t> queue_length{0};
  // Decision-to-bound latency, seconds, cumulative buckets as Prometheus histograms keep them.
  static constexpr double kBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,   0.25,   0.5,   1,    2.5,   5};
  std::array<std::atomic<std::uint64_t>, std::size(kBuckets) + 1> latency{};
  std::atomic<std::uint64_t> latency_sum_us{0};
};

class SchedulerService {
 public:
  SchedulerService(ApiClient& api, SchedulerServiceOptions options);
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  // Blocks until `stop`: informers, the decision loop and the binders. Throws
  // std::runtime_error (one line) when it cannot start: the PodGroup discovery failed for
  // startup_timeout, or the informers did not sync within sync_timeout.
  void run(const std::atomic<bool>& stop);
  // The decision loop (or the start-up before it) came round within stale_after: what
  // /healthz and the leader's lease renewal go by.
  [[nodiscard]] bool alive() const;

  [[nodiscard]] const SchedulerCounters& counters() const { return counters_; }
  // Prometheus text: scheduling latency histogram, queue length, binds, failures.
  [[nodiscard]] std::string metrics() const;
  [[nodiscard]] bool synced() const { return synced_.load(); }

  // What the informers deliver (the decision thread's own calls), public so that a test can give
  // the scheduler and the extender the same objects without an API server and compare what
  // their feeds hold.
  void handle_pod(const nlohmann::json& obj, bool deleted);
  void handle_node(const nlohmann::json& obj, bool deleted);
  [[nodiscard]] const MirrorFeed& feed() const { return feed_; }

 private:
  struct Event {
    enum class Kind : std::uint8_t {
      kNode,
      kPod,
      kPodGroup,
      kUpstreamPodGroup,
      kQueue,
      kResourceSlice,
      kDeviceClass,
      kResourceClaim,
      kClaimsWritten,  // a bind's claims were written (the binding itself may still fail)
      kBindDone,
      kBindFailed,
      kSynced
    } kind;
    enum class Type : std::uint8_t { kUpsert, kDelete } type = Type::kUpsert;
    nlohmann::json object;
    std::string uid;
  };
  // A ResourceClaim's status (allocation, reservedFor) written before the pod's binding.
  struct ClaimWrite {
    std::string path;  // the claim's status subresource; `create`: the claims' collection
    nlohmann::json claim;
    // KEP-5004's bridge: `claim` is created (generateName), then its `status` written, then the
    // pod's status.extendedResourceClaimStatus (`pod_status`) names it (write_claim).
    bool create = false;
    nlohmann::json status;
    nlohmann::json pod_status;
  };
  struct BindJob {
    PodObject pod;
    std::string node;
    std::vector<int> gpus;
    std::int64_t gpu_milli = 0;
    std::chrono::steady_clock::time_point decided;
    std::vector<ClaimWrite> claims;
    // A gang whose members have claims: every member's claims are written before any member
    // is bound, and taken back when one is refused (bind_gang); `pod` etc. are unused then.
    std::vector<BindJob> gang;
  };
  // A pending pod placed with others (a gang's members, the job layer's admission): what the
  // core is asked for it, with its claims' GPUs, or with KEP-5004's bridge claim (`extended`).
  struct MemberAsk {
    DraState::Ask ask;  // ask.pods: one per way of meeting its claims; the pod as it is if none
    nlohmann::json extended;  // the bridge's claim to create, or null
    bool claims = false;      // kept with claim writes (keep_claims)
    [[nodiscard]] std::size_t ways() const { return ask.pods.size(); }
  };

  void push(Event e);
  void handle(Event& e);
  // Either gang API (k8s/mirror/pod_group.hpp); `upstream`: scheduling.k8s.io/v1beta1's.
  void handle_podgroup(const nlohmann::json& obj, bool deleted, bool upstream);
  // DRA (scheduler_dra.cpp): ResourceSlices become the nodes' GPUs, claims allocated by anyone
  // count as used, a pod's claims are allocated by the core and written before its binding.
  bool discover_dra(const std::atomic<bool>& stop);
  void handle_claim(const nlohmann::json& obj, bool deleted);
  void decide_with_claims(const PodObject& pod);
  // KEP-5004's bridge: a pod asking GPU resources that a DeviceClass maps to DRA devices, placed
  // on them with the claim kube-scheduler would make (or a pod whose claim exists already). False
  // when it is not placed that way (`why`: why not), and device plugins' GPUs are tried.
  bool decide_extended(const PodObject& pod, std::string& why);
  // One ClaimWrite of a bind (binder thread): the claim as written (created, for the bridge).
  nlohmann::json write_claim(const PodObject& pod, const ClaimWrite& w);
  // Gangs and the job layer with claims (scheduler_dra_jobs.cpp). `bridge`: KEP-5004's bridge
  // may apply (nvidia.com/gpu on DRA nodes). "" or why the members cannot be placed together now.
  std::string member_asks(const std::vector<PodObject>& members, bool bridge,
                          std::vector<MemberAsk>& out);
  // The members as the core is asked for them, each in its `way`-th way (its last if fewer);
  // `bridged`: false asks bridge members for device plugins' GPUs instead.
  [[nodiscard]] std::vector<PodObject> asked(const std::vector<PodObject>& members,
                                             const std::vector<MemberAsk>& asks, std::size_t way,
                                             bool bridged) const;
  // A member placed (counted as bound in the mirror under its uid) in its `way`-th way: its
  // claims hold its GPUs from now on; the claim writes of its bind. Throws before holding
  // anything when they cannot be made.
  std::vector<ClaimWrite> keep_claims(const PodObject& pod, const MemberAsk& a, std::size_t way,
                                      const std::string& node, const std::vector<int>& gpus);
  // The status writes that allocate and reserve a placed pod's claims.
  [[nodiscard]] std::vector<ClaimWrite> claim_writes(const PodObject& pod,
                                                     const DraState::Placement& placement) const;
  // A gang placed (`r`, its members in `way`; `bridged`: bridge members on DRA devices): each
  // member's claims hold its GPUs, their writes in `writes` by uid (every member with claims).
  // False, with every member told why and nothing held, when a write cannot be made.
  bool keep_gang_claims(const std::vector<PodObject>& pending, const std::vector<MemberAsk>& asks,
                        std::size_t way, bool bridged, const ClusterMirror::GangResult& r,
                        std::unordered_map<std::string, std::vector<ClaimWrite>>& writes);
  // --queues: a pod with claims (or the bridge) through the job layer; false (and `why`) when
  // the layer does not start it.
  bool place_claimed_job(const PodObject& pod, const MemberAsk& a, std::string& why);
  // Binder thread: a gang's claims, all before any binding; then its members' bindings.
  void bind_gang(const std::vector<BindJob>& members);
  // Takes back what a gang's member wrote before another write was refused.
  void take_back(const PodObject& pod, const ClaimWrite& w, const nlohmann::json& written);
  void bind_pod(const BindJob& job);
  // A bind that failed: the claims it was to allocate count as the API server has them.
  void drop_assumed_claims(const std::string& pod_uid);
  // A pod of ours gone or finished leaves the claims reserved for it (deallocated when nobody
  // else holds them), as kube-controller-manager's resourceclaim controller does.
  void release_claims_of(const PodObject& pod);
  // Whether the PodGroup API is served; retried with backoff (false: stopped meanwhile).
  bool discover_podgroups(const std::atomic<bool>& stop);
  // With --queues, the Queue API must be served (retried like the PodGroup discovery; a 404 is
  // a start-up error: the user asked for queues the cluster does not have).
  bool discover_queues(const std::atomic<bool>& stop);
  // --queues: the job layer's admission of a job's pending members (ClusterMirror::admit) in the
  // queue their label names; not placed: the reason in `message`. Placed by preemption
  // (`nominated`): its victims are evicted and it is bound once they are gone (victim_gone).
  struct JobDecision {
    ClusterMirror::GangResult placement;
    bool nominated = false;
  };
  // --queues: how far elastic gang `gang` should run now (at least minMember): the job layer's
  // sizing over the throughput model fitted to what its pods' gpuorch.io/throughput annotations
  // measured (remembered per size, as the launcher overwrites them), or the prior.
  sched::jobs::GrowthAdvice growth_advice(const std::string& gang, int bound, int present,
                                          int min_member, double gpus_per_pod);
  // Folds a pod's gpuorch.io/throughput report into what its gang measured (newest per size).
  void note_throughput(const PodObject& p);
  sched::jobs::GangGrowth gang_growth(const std::string& gang, int bound, int present,
                                      int min_member, double gpus_per_pod,
                                      std::vector<workload::ThroughputReport>& measured);
  // --queues: `waiting` found no room. An elastic gang whose fitted model says its pods above
  // some count add less than a resize costs (advise_shrink) gives those back, evicted, when
  // what is free and what they free hold the job; one gang per call, each at most once per
  // resize interval, and never below minMember. With `nominate`, the job is then decided
  // again (place_job, `min_members` as there) on what the shrink frees and, placed, nominated
  // there as a preemptor is: its reservation keeps everyone else off those GPUs until the
  // evicted pods are gone, and it is bound then (victim_gone). Placed: the nomination made.
  JobDecision shrink_for(const std::vector<PodObject>& waiting, int min_members = 0,
                         bool nominate = true);
  // `waiting` decided again once `freeing` (evicted by a shrink, counted nowhere) is gone from
  // the mirror; placed, it holds a nomination that waits for them too.
  JobDecision nominate_on(const std::vector<PodObject>& waiting, int min_members,
                          const std::vector<ClusterMirror::Victim>& freeing);
  // Unix seconds of elastic gang `gang`'s last start, growth or shrink, from what the API shows,
  // so that the resize interval holds across restarts and goes by the cluster's clock (a
  // time-compressed replay's simulated one too): when its newest member joined
  // (PodObject::joined_s; one being bound joins now) and the PodGroup's gpuorch.io/resized-at,
  // written at each growth and shrink (a shrink starts no pod, and the pods a growth started
  // may be taken back); -1: none.
  [[nodiscard]] std::int64_t gang_resized_s(const std::string& gang, std::int64_t now_s) const;
  // A mark on `gang`'s PodGroup as the API shows it, or as written and not yet seen back.
  [[nodiscard]] std::int64_t gang_mark_s(const std::string& gang, const char* annotation) const;
  // Writes now as gpuorch.io/resized-at (`resized`) and gpuorch.io/restarted-at (`restarted`)
  // on `gang`'s PodGroup; until seen there, remembered.
  void mark_gang(const std::string& gang, bool resized, bool restarted);
  // The gangs that lose some of their running members to `victims` and keep running restart.
  void mark_restarted(const std::vector<ClusterMirror::Victim>& victims);
  // `min_members`: ClusterMirror::AdmitOptions::min_members (0: all of them).
  JobDecision place_job(const std::vector<PodObject>& members, int min_members = 0);
  // Whether a bound pod may be a victim now: ours, not system-critical, not terminating, not
  // one whose eviction was refused within the backoff, not a preemptor waiting to be bound.
  [[nodiscard]] bool preemptible(const PodObject& pod,
                                 std::chrono::steady_clock::time_point now) const;
  // POST pods/eviction (dry run: the API server checks the PodDisruptionBudgets and deletes
  // nothing). False with `why` when refused; a pod already gone counts as evicted.
  bool evict(const PodObject& pod, bool dry_run, std::string& why);
  // The job's members hold their reservation until `victims` are gone: nominatedNodeName and
  // Events on both sides.
  void nominate(const std::vector<PodObject>& members, const ClusterMirror::Admission& admission,
                std::size_t queue);
  // A pod that was evicted for a nomination is gone; the last one binds the preemptor.
  void victim_gone(const std::string& uid);
  void member_gone(const std::string& uid);
  // --queues: each Queue's status.allocated and status.requested, written when it changed.
  void write_queue_statuses();
  void beat();
  void decide(const PodObject& pod);
  void report_gated(const PodObject& pod);
  void write_condition(const PodObject& pod, const std::string& reason, const std::string& message,
                       bool event);
  void forget_queued(const std::string& uid);
  void requeue(const std::string& uid);
  // The cluster changed in a way that may let pending pods go: they are retried, after
  // --settle-after-finish (further changes extend it), so that changes written together are
  // decided together.
  void settle_after_change();
  void fail_attempt(const std::string& uid);
  // A gang's pending members decided together (the member just popped from the queue among them).
  void schedule_gang(const std::string& gang);
  bool ensure_built(const PodObject& pod);
  void queue_bind(const PodObject& pod, const std::string& node, const std::vector<int>& gpus,
                  std::vector<ClaimWrite> claims = {});
  // A pod's bind, counted as in flight from now on (queue_bind pushes it).
  BindJob bind_job(const PodObject& pod, const std::string& node, const std::vector<int>& gpus,
                   std::vector<ClaimWrite> claims);
  // A gang's binds: one job when some member has claims (bind_gang), else one per member.
  void queue_gang_bind(std::vector<BindJob> members);
  void push_bind(BindJob job);
  void post_podgroup_event(const std::string& gang, const std::string& type,
                           const std::string& reason, const std::string& message);
  void write_podgroup_status(const std::string& gang, const std::string& phase, int scheduled);
  // Throws when the API server does not take it (callers retry through writes_).
  void post_event(const std::string& ns, const nlohmann::json& involved, const std::string& type,
                  const std::string& reason, const std::string& message);
  void retry_unschedulable();
  bool schedule_next();
  void report_unschedulable(const PodObject& pod, const std::string& message);
  void bind_loop(const std::atomic<bool>& stop);
  void bind(const BindJob& job);
  // Whether the API server has `pod` (same uid) bound to `node`; true when it cannot tell.
  bool bound_to(const PodObject& pod, const std::string& node);
  void reread(const PodObject& pod);  // after a bind refused as stale: its current state
  void log(const std::string& line, base::Severity severity = base::Severity::kInfo,
           base::SourceLocation where = base::SourceLocation::current()) const;
  [[nodiscard]] bool ours(const PodObject& pod) const;

  ApiClient& api_;
  SchedulerServiceOptions options_;
  // Nodes, pods, DRA objects and the mirror they make, kept as the extender's and the admission
  // check's are; mirror_ and dra_ name the feed's, which every decision uses.
  MirrorFeed feed_;
  ClusterMirror& mirror_;
  DraState& dra_;
  SchedulerCounters counters_;
  std::atomic<bool> synced_{false};
  int synced_informers_ = 0;

  std::mutex events_mutex_;
  std::condition_variable events_cv_;
  std::deque<Event> events_;

  // Decision-thread state.
  // Waiting to be decided, by uid, in the core's order (priority, then creation time).
  sched::PendingQueue active_;
  std::unordered_map<std::string, std::string> unschedulable_;  // uid -> its message
  // The message each pod was last given, so an unchanged verdict is not written again.
  std::unordered_map<std::string, std::string> reported_;
  std::unordered_set<std::string> binding_;  // uid: a bind is in flight
  sched::Backoff backoff_;                   // failures in a row, and who waits them out
  RetriedWrites writes_;                     // conditions, Events, PodGroup status not yet taken
  ClusterQueues queues_;                     // --queues: the cluster's Queue objects
  std::map<std::string, std::string> queue_status_written_;  // by queue: the status last written
  std::chrono::steady_clock::time_point last_queue_status_;
  bool queue_status_dirty_ = true;  // pods, binds or Queues changed since the last write
  std::unordered_set<std::string> preferences_logged_;  // uid: its ignored soft constraints
  std::atomic<std::int64_t> heartbeat_ns_{0};           // steady clock of the last round
  // PodGroups (scheduling.x-k8s.io/v1alpha1, and scheduling.k8s.io/v1beta1's) by
  // "namespace/name".
  // The group as parsed (k8s/mirror/pod_group.hpp) and what the scheduler keeps beside it.
  struct PodGroupInfo : PodGroup {
    nlohmann::json object;
    std::string written;            // the status last written ("phase/scheduled")
    std::int64_t resized_s = -1;    // annotation gpuorch.io/resized-at, Unix seconds
    std::int64_t restarted_s = -1;  // annotation gpuorch.io/restarted-at
  };
  std::map<std::string, PodGroupInfo> podgroups_;
  bool podgroups_served_ = false;
  bool upstream_podgroups_served_ = false;  // scheduling.k8s.io/v1beta1 (GenericWorkload)
  std::map<std::string, std::chrono::steady_clock::time_point> gang_waiting_since_;
  // Marks written on a gang's PodGroup and not yet seen there: by gang and annotation, the text
  // written and its Unix seconds.
  std::map<std::string, std::map<std::string, std::pair<std::string, std::int64_t>>> marks_unseen_;
  // What each elastic gang measured, newest per (nodes, world size, local batch).
  std::map<std::string, std::map<std::tuple<int, int, int>, workload::ThroughputReport>>
      gang_measured_;
  // shrink_for walked the pods since the resize clocks last moved or the periodic retry.
  bool shrink_checked_ = false;
  // The settle window after finishes (SchedulerOptions::settle_after_finish).
  std::chrono::steady_clock::time_point settle_from_{}, settle_until_{};
  // A job waited for pods just bound to be seen bound before preempting (place_job): until
  // when at most, and its members.
  bool preempt_awaits_bound_ = false;
  std::chrono::steady_clock::time_point awaits_bound_until_{};
  std::vector<std::string> awaiting_bound_;
  std::chrono::steady_clock::time_point last_retry_;
  // Preemptions under way (--queues): by job ("namespace/name" of its pod or gang), the members
  // holding their reservation in the mirror and the victims not yet gone.
  struct Nomination {
    std::vector<std::string> members;
    std::unordered_set<std::string> victims;
  };
  std::map<std::string, Nomination> nominations_;
  std::unordered_map<std::string, std::string> nominated_;  // member uid -> job
  std::unordered_map<std::string, std::string> evicted_;    // victim uid -> job
  // Victims the Eviction API refused (a PodDisruptionBudget): not chosen again until then.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> eviction_refused_;
  bool cluster_changed_ = false;
  // DRA (resource.k8s.io/v1, when served).
  bool dra_served_ = false;
  std::unordered_map<std::string, std::vector<std::string>> assumed_claims_;  // pod uid -> claims
  // --queues: members with claims nominated (waiting for their victims): how they were asked.
  std::unordered_map<std::string, std::pair<MemberAsk, std::size_t>> nominated_claims_;

  std::mutex bind_mutex_;
  std::condition_variable bind_cv_;
  std::deque<BindJob> bind_queue_;
};

}  // namespace gpuorch::k8s
