#pragma once
// The job layer: decides, at each scheduling round, which jobs run and on how many replicas,
// over the one scheduler core that places them. Its actions follow KAI-Scheduler's session:
//
//  1. resize: elastic jobs the policy wants smaller give back replicas above what it wants;
//  2. order (policies that preempt by their order, as Tiresias's least attained service does):
//     within each queue the jobs the policy ranks first keep or get the queue's GPUs, and a
//     running job ranked after them is preempted (reason kQueueOrder);
//  3. allocate: waiting jobs start as whole gangs of at least min replicas on free resources,
//     the queue furthest below its fair share first (dominant resource, DRF), its jobs by
//     priority then the policy's rank; nothing is held for a job that cannot start;
//  4. reclaim: a job whose queue is below its fair share takes resources back from queues above
//     theirs; 5. preempt: a job takes them from lower-priority jobs of its own queue (both are
//     post-filters, post_filters(), run in order per job that found no room). Victims:
//     lowest priority first, elastic replicas above min before whole jobs, then the fewest
//     GPU-hours lost; never a non-preemptible job; victims not needed in the end are restored,
//     so exactly what the job needs is freed;
//  6. grow: elastic jobs below what the policy wants grow next to their running replicas.
//
// Policies that size every job by its value per GPU (Optimus, Pollux, lasgo) decide 1, 2 and 4
// themselves through elastic_sizing.hpp's division of each queue's share (RoundOptions::sized;
// of each GPU model too, the round starting a job on the model it was sized on).
//
// GPU models (QueueTree::gpu_models, when a queue names one): a job's GPUs also count in the
// slot of the model they run on, so quotas, limits, fair shares and reclaim hold per model; a
// waiting job that accepts several models tries them as Kueue's flavor assignment does (those its
// queue lists first, within its share before over it) and is placed restricted to the one it
// takes; reclaim and preemption take only victims on that model. docs/jobs.md.
//
// Every job that still waits gets a reason in the core's vocabulary (WaitReason), every preempted
// one a PreemptReason. Placement is the caller's GangPlacer, which must go through
// sched::Scheduler (sched/gang.hpp), so the filters, the policy score, GPU models, the GPU picker
// and topology levels apply to every replica.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/framework/post_filter_registry.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "gpuorch/sched/jobs/resources.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/workload/job_spec.hpp"

namespace gpuorch::sched::jobs {

enum class WaitReason : std::uint8_t {
  kNone,           // running (or not asking for more)
  kOverLimit,      // starting it would take its queue (or a parent) past its limit
  kOverQuota,      // it would take its queue past its fair share, and nothing free is left over
  kShareHeld,      // within its queue's fair share, but others hold it and cannot give it back
  kLowerPriority,  // jobs of higher priority or earlier in the queue's order come first
  kFragmented,     // enough is free in total, but no placement of the whole gang exists
  kInfeasible,     // no placement even on an empty cluster
};
const char* wait_key(WaitReason r);  // "over-quota", ... for machine-readable output

enum class PreemptReason : std::uint8_t {
  kReclaim,     // its queue was over its fair share and another queue wanted its share back
  kPriority,    // a higher-priority job of its queue needed the resources
  kQueueOrder,  // the policy ranked waiting jobs of its queue first (least attained service)
  kResized,     // the policy's sizing gave its GPUs to jobs it values more (RoundOptions::sized)
  kPostFilter,  // a post-filter added to JobLayer::post_filters() made room with it
};
const char* preempt_key(PreemptReason r);

// The caller's record of one active job; a round reads it and updates placements and the
// round's outcome.
struct JobState {
  const workload::JobSpec* spec = nullptr;
  std::size_t queue = 0;  // a leaf of the queue tree
  // One placement per running replica, in the order they started; empty: not running.
  std::vector<cluster::Placement> placements;
  std::int64_t running_since = -1;  // start of its current run: what a preemption loses
  double rank = 0;                  // the policy's order within the queue: lower first
  // Ties of rank: lower first, in the queue's order and among victims alike (0 for every job:
  // the order of the round's span). A caller whose waiting jobs join a round from an index
  // (RoundOptions::more_to_allocate) sets it to its own order, so the round's span order, which
  // differs then, decides nothing.
  std::uint64_t seq = 0;
  // Elastic jobs: replicas the policy wants (clamped to min..max; 0: max). With
  // RoundOptions::sized, every job's count (0: not now), as sized by elastic_sizing.hpp.
  int wanted = 0;
  // With RoundOptions::sized and GPU models: the model slot the sizing counted the job's
  // replicas in (ElasticDemand::models, Sized::models; kResourceKinds: models no queue names),
  // where the round starts it; SIZE_MAX: the round chooses, as for any waiting job. A running
  // job stays on the model it runs on, unless RoundOptions::repack places it anew.
  std::size_t sized_model = SIZE_MAX;

  // Outcome of the last round.
  bool changed = false;  // placements differ from before the round
  // Chosen by the policy's order to hold its queue's share (RoundOptions::preempt_by_rank; every
  // job otherwise), placed or not: what least attained service counts as being served. A job
  // that only tried what other queues left idle, and failed, was not.
  bool selected = false;
  WaitReason waiting = WaitReason::kNone;
  std::optional<PreemptReason> preempted;
  std::string why;  // one line for explanations: the reason with its numbers

  [[nodiscard]] int replicas() const { return static_cast<int>(placements.size()); }
};

// What a round knows when its order (action 2) begins: what each queue's ranked jobs may take
// (max of its fair share and what it holds, by tree index), and the round's jobs of each queue
// in the order it walks them (priority, then rank).
struct OrderStart {
  std::span<const Amounts> budgets;
  std::span<const JobState* const> walk;  // queue q's jobs: walk[from[q] .. from[q + 1])
  std::span<const std::size_t> from;
  [[nodiscard]] std::span<const JobState* const> jobs(std::size_t q) const {
    return walk.subspan(from[q], from[q + 1] - from[q]);
  }
};

// When the pass over the share begins: what is free, and the leaves whose jobs may go over
// their share (those whose share is less than the cluster).
struct OverShareStart {
  const Amounts& free;
  std::span<const std::size_t> queues;
};

// A post-filter candidate the caller left out of a round that does not preempt by rank
// (RoundOptions::next_candidate): the round asks, in its order, for the next waiting job of
// `queue` strictly between `after` and `before` in the queue's order (priority, rank, seq;
// nullptr: from the queue's first, to its last) that is not in the round yet and that the
// post-filters could start now: its gang fits `room` (every resource; reclaim's bound: its queue
// stays within its fair share and no more is free or reclaimable), or its priority is above
// `priority_above` (priority preemption), or any job at all (`any`: post-filters the round
// cannot bound). `failed`: gangs (one replica's request, replicas) of that queue without GPU
// models, node constraints or topology levels whose reclaim just failed, with nothing changed
// since: the same gang fails again, so such jobs need not be asked for unless by priority.
struct CandidateQuery {
  std::size_t queue = 0;
  const JobState* after = nullptr;
  const JobState* before = nullptr;
  Amounts room{};
  int priority_above = 0;
  bool any = false;
  std::span<const std::pair<Resources, int>> failed;
};

struct RoundOptions {
  std::int64_t now = 0;
  // false: a queue's first waiting job that cannot start blocks the ones after it (strict FIFO,
  // Kueue's StrictFIFO); true: later jobs that fit start (BestEffortFIFO).
  bool backfill = true;
  bool preempt_by_rank = false;  // action 2
  // With preempt_by_rank: each queue's order gets only what the queue is guaranteed (quota, as
  // far as its jobs want it) to itself; what is left goes to the jobs left over, all queues
  // together, in the policy's order (overQuotaWeight then plays no part): least attained service
  // across tenants for what is over quota. Off: each queue's order gets its fair share (quota,
  // then the rest by overQuotaWeight) and keeps what it holds over it until reclaimed. Every
  // waiting job must be in the round (no more_to_order, more_over_share: std::invalid_argument).
  bool over_quota_by_rank = false;
  // The policy has sized every job (JobState::wanted, from size_by_value within the queues'
  // shares): jobs it sized to 0 wait or stop (kResized), the others start, shrink or grow to
  // their count; no reclaim or preemption beyond that, since the sizing already divided the
  // queues' shares.
  bool sized = false;
  // A job whose size changes is released and placed anew as a whole, packed like a job that
  // starts, instead of shrinking or growing next to its running replicas: for runtimes where a
  // resize restarts every replica anyway (checkpoint-restart, the Pollux artifact's rule), so
  // moving costs nothing more. Off, replicas never move (pods that keep running).
  bool repack = false;
  // Per queue (by tree index; empty: none): what waiting jobs the caller did not list want. A
  // caller that knows those jobs cannot start this round (a strict-FIFO queue's jobs behind
  // more than the cluster holds) leaves them out and passes their demand, so fair shares are
  // those of every job.
  std::span<const Resources> unlisted_demand;
  // Write each waiting or preempted job's one-line explanation (JobState::why); a simulator
  // that reports only the reasons turns it off.
  bool explain = true;
  // Run the post-filters (reclaim, priority preemption, and any added) for jobs that found no
  // room; off for a caller that cannot take resources back yet (a cluster without evictions):
  // such jobs then wait with their reason, and nothing running is touched.
  bool preempt = true;
  // With preempt_by_rank, a caller that leaves waiting jobs out (their demand in
  // unlisted_demand) adds back, where the round reaches them, those that may matter, so the
  // round decides as it would over every job (WaitingIndex answers both, waiting_index.hpp).
  // Each appends to `out` waiting jobs of leaf queues that are not in the round yet; the order
  // must not tie two jobs of a queue (distinct ranks). When the order (action 2) begins: every
  // job it could select within its queue's budget.
  std::function<void(const OrderStart&, std::vector<JobState*>& out)> more_to_order;
  // When the pass over the share begins (jobs the order left out try what is free), if any
  // queue may go over its share: every job of those queues that could start on what is free.
  std::function<void(const OverShareStart&, std::vector<JobState*>& out)> more_over_share;
  // Without preempt_by_rank, with backfill (sjf's round), a caller that leaves waiting rigid jobs
  // out (their demand in unlisted_demand, distinct priority, rank and seq in each queue) adds
  // back those that may matter, so the round decides as it would over every job: when the pass
  // over the waiting jobs begins (OverShareStart: what is free, every leaf), every job that
  // could start on what is free; then, as the post-filters reach each left-out job's place in
  // the round's order, the next one they could start (nullptr: none). A left-out job otherwise
  // changes nothing: it cannot start on what is free (that only shrinks in the pass, and a plain
  // gang that found no placement finds none later), and a post-filter that fails restores what
  // it took; so only the jobs asked for here, in this order, can change the round.
  std::function<void(const OverShareStart&, std::vector<JobState*>& out)> more_to_allocate;
  std::function<JobState*(const CandidateQuery&)> next_candidate;
};

// Why a gang found no placement.
struct PlacementFailure {
  bool explain = true;      // in: whether to write the message (it costs a pass over the nodes)
  bool infeasible = false;  // not even on an empty cluster
  std::string message;      // the core's explanation (nodes rejected per reason)
};

// Places `count` more replicas of `job` (next to `near`, its running replicas, when it has
// some): applies and returns one placement per replica, or nullopt with the cluster unchanged
// and, when `why` is given, the reason.
using GangPlacer = std::function<std::optional<std::vector<cluster::Placement>>(
    const workload::JobSpec& job, int count, std::span<const cluster::Placement> near,
    PlacementFailure* why)>;

struct RoundStats {
  int started = 0, grown = 0, shrunk = 0, preempted = 0, waiting = 0;
  int placement_attempts = 0;
};

// The GPU models (Resources slots; kResourceKinds: models no queue names) `job` may run on, in
// the order a waiting job tries them (its queue's gpuModels order, then the other models the
// queues name, then those no queue names); a running job's model alone, or with
// `running_may_move` (a sized round with RoundOptions::repack: a resized job restarts anyway)
// its model first, then the others. Empty when no queue names a model or the job has no GPUs.
// What a sized round's ElasticDemand::models are.
std::vector<std::size_t> model_order(const cluster::Cluster& cluster, const QueueTree& tree,
                                     const JobState& job, bool running_may_move = false);

// What the queues divide: every node's GPUs (milli), CPU (milli) and memory (MiB), and with
// `models` the GPUs of each model its queues name (QueueTree::model_slot).
Amounts cluster_capacity(const cluster::Cluster& cluster, const QueueTree* models = nullptr);

class JobLayer {
 public:
  JobLayer(cluster::Cluster& cluster, const QueueTree& queues, GangPlacer placer);
  ~JobLayer();
  JobLayer(const JobLayer&) = delete;
  JobLayer& operator=(const JobLayer&) = delete;

  // What a job that found no room runs, in order, until one makes room (kube-scheduler's
  // PostFilter step, docs/filters.md): the built-in `reclaim` (a queue below its fair share takes
  // back from queues above theirs) and `priority` (a job takes from lower-priority jobs of its
  // queue). A post-filter added here runs after them; it is given PostFilterArgs::id = the job's
  // index in the round's span, and on success it has bound the job's replicas (`placements`, at
  // least min) and released its victims' last `replicas` replicas (0: all; `id` = their index),
  // which the round then records.
  PostFilterRegistry& post_filters() { return post_filters_; }

  // Decides one round for `jobs` (every active job, each with a leaf queue); applies every change
  // to the cluster and to the jobs' placements.
  RoundStats round(std::span<JobState* const> jobs, const RoundOptions& options);
  RoundStats round(std::span<JobState> jobs, const RoundOptions& options);
  // Gives back `job`'s last `n` replicas between rounds (the cluster scheduler's shrink of an
  // elastic gang for a waiting job): released in the cluster and dropped from its placements.
  void shrink(JobState& job, int n);

  // Of the last round: each queue's fair share and what its jobs hold after it.
  [[nodiscard]] const std::vector<Amounts>& fair_shares() const { return fair_; }
  [[nodiscard]] const std::vector<Amounts>& allocated() const { return allocated_; }
  [[nodiscard]] const Amounts& capacity() const { return capacity_; }

 private:
  struct Round;
  class RoundPostFilter;
  cluster::Cluster* cluster_;
  const QueueTree* queues_;
  GangPlacer placer_;
  RequestResolver resolver_;  // the post-filters' view of a replica's request
  PostFilterRegistry post_filters_;
  RoundPostFilter* reclaim_ = nullptr;  // the built-in entries of post_filters_
  RoundPostFilter* priority_ = nullptr;
  Amounts capacity_{};
  std::vector<Amounts> fair_;
  std::vector<Amounts> allocated_;
};

}  // namespace gpuorch::sched::jobs
