#include "gpuorch/sched/scheduler.hpp"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace gpuorch::sched {

Scheduler::Scheduler(cluster::Cluster& cluster, Policy& policy, SchedulerOptions options)
    : cluster_(&cluster),
      policy_(&policy),
      options_(options),
      index_(options.index_budget_bytes),
      rank_(cluster.node_count()) {
  std::iota(rank_.begin(), rank_.end(), 0U);
}

void Scheduler::set_tie_break_rank(std::vector<std::uint32_t> rank) {
  assert(rank.size() == cluster_->node_count());
  rank_ = std::move(rank);
  index_.clear();  // the index orders its trees by rank
}

Decision Scheduler::decide(const PodRequest& pod) {
  if (!options_.incremental || !policy_->scores_per_node()) return decide_full_scan(pod);
  if (policy_->score_epoch() != score_epoch_) {
    index_.clear();
    score_epoch_ = policy_->score_epoch();
  }
  ScoreIndex::Answer a = index_.best(*cluster_, *policy_, pod, rank_);
  if (a.found) return placed(a.node, pod, a.gpu);
  // Nothing fits: the index counted every node's reason, as the full scan's diagnosis does.
  Decision d;
  d.outcome = a.fits_some_empty_node ? Outcome::kWaiting : Outcome::kInfeasible;
  d.diagnosis = a.diagnosis;
  return d;
}

Decision Scheduler::decide_on(cluster::NodeIndex n, const PodRequest& pod) {
  assert(check_node(*cluster_, n, pod) == kFits);
  return placed(n, pod, -1);
}

Decision Scheduler::decide_full_scan(const PodRequest& pod) {
  const cluster::Cluster& cluster = *cluster_;
  const auto n_nodes = static_cast<cluster::NodeIndex>(cluster.node_count());
  feasible_.clear();
  for (cluster::NodeIndex n = 0; n < n_nodes; ++n) {
    if (check_node(cluster, n, pod) == kFits) feasible_.push_back(n);
  }
  if (feasible_.empty()) return diagnose(pod);
  return best_of_feasible(pod);
}

Decision Scheduler::decide_among(std::span<const cluster::NodeIndex> nodes, const PodRequest& pod) {
  feasible_.clear();
  Decision none;
  bool fits_somewhere_empty = false;
  for (const cluster::NodeIndex n : nodes) {
    const FilterId r = check_node(*cluster_, n, pod);
    if (r == kFits) {
      feasible_.push_back(n);
    } else if (feasible_.empty()) {
      none.diagnosis.add(r);
      fits_somewhere_empty = fits_somewhere_empty || check_empty_node(*cluster_, n, pod) == kFits;
    }
  }
  if (!feasible_.empty()) return best_of_feasible(pod);
  none.outcome = fits_somewhere_empty ? Outcome::kWaiting : Outcome::kInfeasible;
  return none;
}

Decision Scheduler::best_of_feasible(const PodRequest& pod) {
  const cluster::Cluster& cluster = *cluster_;
  scores_.assign(feasible_.size(), 0);
  policy_->score(cluster, pod, feasible_, scores_);
  std::size_t best = 0;
  for (std::size_t i = 1; i < feasible_.size(); ++i) {
    if (scores_[i] > scores_[best] ||
        (scores_[i] == scores_[best] && rank_[feasible_[i]] < rank_[feasible_[best]])) {
      best = i;
    }
  }
  return placed(feasible_[best], pod, -1);
}

Decision Scheduler::diagnose(const PodRequest& pod) const {
  Decision d;
  const cluster::Cluster& cluster = *cluster_;
  const auto n_nodes = static_cast<cluster::NodeIndex>(cluster.node_count());
  bool fits_somewhere_empty = false;
  for (cluster::NodeIndex n = 0; n < n_nodes; ++n) {
    d.diagnosis.add(check_node(cluster, n, pod));
    fits_somewhere_empty = fits_somewhere_empty || check_empty_node(cluster, n, pod) == kFits;
  }
  d.outcome = fits_somewhere_empty ? Outcome::kWaiting : Outcome::kInfeasible;
  return d;
}

Decision Scheduler::placed(cluster::NodeIndex node, const PodRequest& pod, std::int32_t gpu_hint) {
  Decision d;
  d.outcome = Outcome::kPlaced;
  d.placement.node = node;
  d.placement.cpu_milli = pod.cpu_milli;
  d.placement.memory_mib = pod.memory_mib;
  d.placement.gpu_milli = pod.gpu_milli;
  // A per-node policy's cached NodeScore already names the GPU of a shared-GPU pod (the same one
  // choose_gpus would pick), which spares scoring the node again.
  if (pod.gpu_share() && gpu_hint >= 0) {
    d.placement.gpus = {gpu_hint};
  } else {
    d.placement.gpus = policy_->choose_gpus(*cluster_, node, pod);
  }
  assert(static_cast<int>(d.placement.gpus.size()) == (pod.cpu_only() ? 0 : pod.gpu_count));
  return d;
}

Decision Scheduler::schedule(const PodRequest& pod) {
  policy_->observe(pod);
  Decision d = decide(pod);
  if (d.outcome == Outcome::kPlaced) cluster_->apply(d.placement);
  return d;
}

}  // namespace gpuorch::sched
