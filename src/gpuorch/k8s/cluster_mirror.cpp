#include "gpuorch/k8s/cluster_mirror.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuorch/sched/gang.hpp"
#include "gpuorch/sched/tie_break.hpp"

namespace gpuorch::k8s {

ClusterMirror::ClusterMirror(MirrorOptions options) : options_(std::move(options)) {}

bool ClusterMirror::same_node(const cluster::NodeSpec& a, const cluster::NodeSpec& b) {
  auto taints = [](const cluster::NodeSpec& s) {
    std::vector<std::tuple<std::string, std::string, std::string>> t;
    for (const auto& x : s.taints) t.emplace_back(x.key, x.value, x.effect);
    return t;
  };
  return a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.gpu_count == b.gpu_count &&
         a.gpu_model == b.gpu_model && a.labels == b.labels && a.unschedulable == b.unschedulable &&
         a.max_pods == b.max_pods && taints(a) == taints(b) && a.gpu_links == b.gpu_links;
}

void ClusterMirror::set_nodes(std::map<std::string, cluster::NodeSpec> nodes) {
  const bool equal =
      nodes.size() == nodes_.size() &&
      std::equal(nodes.begin(), nodes.end(), nodes_.begin(), [&](const auto& x, const auto& y) {
        return x.first == y.first && same_node(x.second, y.second);
      });
  if (equal) return;
  nodes_ = std::move(nodes);
  nodes_changed_ = true;
}

bool ClusterMirror::ensure_built(const std::vector<workload::PodSpec>& seen) {
  if (cluster_ && !nodes_changed_) return false;
  try {
    build(seen);
  } catch (...) {
    // Half a build (a cluster without a policy, when efd has no history yet) must not look built:
    // the next call would schedule through a scheduler that does not exist. Left unbuilt, the
    // next call tries again, and every accounted pod is re-applied then.
    scheduler_.reset();
    policy_.reset();
    resolver_.reset();
    measure_.reset();
    cluster_.reset();
    throw;
  }
  nodes_changed_ = false;
  return true;
}

void ClusterMirror::build(const std::vector<workload::PodSpec>& seen) {
  std::vector<cluster::NodeSpec> specs;
  specs.reserve(nodes_.size());
  for (const auto& [name, spec] : nodes_) specs.push_back(spec);
  scheduler_.reset();
  policy_.reset();
  resolver_.reset();
  cluster_ = std::make_unique<cluster::Cluster>(std::move(specs));
  index_of_.clear();
  for (cluster::NodeIndex n = 0; n < cluster_->node_count(); ++n) {
    index_of_.emplace(cluster_->spec(n).name, n);
  }
  const auto& history = options_.history.empty() ? seen : options_.history;
  target_ = workload::typical_pods(history);
  history_ = workload::typical_pods(history, 1.0);
  measure_ = std::make_unique<sched::FragmentationMeasure>(target_, *cluster_);
  rng_ = std::make_unique<base::Rng>(options_.seed);
  const sched::PolicyContext context{cluster_.get(), measure_.get(), rng_.get(), &history_};
  policy_ = sched::make_policy(options_.policy, context);
  scheduler_ = std::make_unique<sched::Scheduler>(*cluster_, *policy_);
  rank_ = sched::name_ranking(options_.seed, cluster_->specs());
  scheduler_->set_tie_break_rank(rank_);
  resolver_ = std::make_unique<sched::RequestResolver>(*cluster_);
  // Every bound pod again, in a fixed order (by uid) so a rebuild is deterministic.
  std::vector<std::string> uids;
  uids.reserve(placed_.size());
  for (auto& [uid, b] : placed_) {
    b.placement.reset();
    uids.push_back(uid);
  }
  std::sort(uids.begin(), uids.end());
  for (const auto& uid : uids) {
    Bound& b = placed_.at(uid);
    b.placement = placement_on(b.pod, b.node);
    if (b.placement) cluster_->apply(*b.placement);
  }
}

std::optional<cluster::Placement> ClusterMirror::placement_on(const PodObject& pod,
                                                              const std::string& node) {
  if (!cluster_ || !pod.error.empty()) return std::nullopt;
  const auto it = index_of_.find(node);
  if (it == index_of_.end()) return std::nullopt;
  const cluster::NodeIndex n = it->second;
  const sched::PodRequest r = resolver_->resolve(pod.spec);
  cluster::Placement p;
  p.node = n;
  // Another scheduler (or the kubelet's own admission) may have put more on a node than gpuorch
  // would: count what is there, never below zero.
  p.cpu_milli = std::min(r.cpu_milli, std::max<std::int64_t>(0, cluster_->cpu_free(n)));
  p.memory_mib = std::min(r.memory_mib, std::max<std::int64_t>(0, cluster_->memory_free(n)));
  p.gpu_milli = r.gpu_milli;
  const auto left = cluster_->gpu_milli_left(n);
  const bool annotated = static_cast<int>(pod.gpus.size()) == r.gpu_count &&
                         std::all_of(pod.gpus.begin(), pod.gpus.end(), [&](int g) {
                           return g < static_cast<int>(left.size()) &&
                                  left[static_cast<std::size_t>(g)] >= r.gpu_milli;
                         });
  if (annotated) {
    p.gpus = pod.gpus;
  } else if (r.gpu_share()) {
    const int g = sched::best_fit_gpu(left, r.gpu_milli);
    if (g >= 0) p.gpus = {g};
  } else if (r.gpu_count > 0) {
    p.gpus = sched::lowest_free_gpus(left, std::min(r.gpu_count, cluster_->fully_free_gpus(n)));
  }
  if (p.gpus.empty()) p.gpu_milli = 0;
  return p;
}

bool ClusterMirror::account(const PodObject& pod) {
  if (placed_.contains(pod.uid)) return true;
  Bound b{pod, pod.node_name, std::nullopt};
  b.placement = placement_on(pod, pod.node_name);
  if (b.placement) cluster_->apply(*b.placement);
  const bool known = b.placement.has_value();
  placed_.emplace(pod.uid, std::move(b));
  return known;
}

void ClusterMirror::release(const std::string& uid) {
  const auto it = placed_.find(uid);
  if (it == placed_.end()) return;
  if (it->second.placement && cluster_) cluster_->release(*it->second.placement);
  placed_.erase(it);
}

ClusterMirror::Result ClusterMirror::schedule(const PodObject& pod) {
  Result out;
  const std::size_t unknown_before = resolver_->unknown_models().size();
  const sched::PodRequest r = resolver_->resolve(pod.spec);
  if (resolver_->unknown_models().size() > unknown_before) {
    out.unknown_model = resolver_->unknown_models().back();
  } else {
    for (const auto& m : pod.spec.allowed_models) {
      if (!cluster_->find_model(m)) out.unknown_model = m;
    }
  }
  out.decision = scheduler_->schedule(r);
  if (out.decision.outcome == sched::Outcome::kPlaced) {
    const cluster::Placement& p = out.decision.placement;
    out.node = cluster_->spec(p.node).name;
    PodObject bound = pod;
    bound.node_name = out.node;
    bound.gpus = p.gpus;
    placed_.emplace(pod.uid, Bound{std::move(bound), out.node, p});
  }
  return out;
}

ClusterMirror::GangResult ClusterMirror::schedule_gang(const std::vector<PodObject>& members) {
  GangResult out;
  std::vector<workload::PodSpec> specs;
  specs.reserve(members.size());
  for (const auto& m : members) specs.push_back(m.spec);
  for (const auto& m : members) policy_->observe(resolver_->resolve(m.spec));
  const sched::GangDecision d =
      sched::place_gang(*cluster_, *scheduler_, *resolver_, specs, options_.topology_levels, rank_);
  if (!d.placed) {
    const PodObject& failed = members[d.failed_member];
    out.failed_pod = failed.key();
    Result r;
    r.decision = d.failure;
    sched::RequestResolver resolver(*cluster_);
    out.message = unschedulable_message(r, resolver.resolve(failed.spec), cluster_->node_count());
    return out;
  }
  out.placed = true;
  out.domain = d.domain;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const cluster::Placement& p = d.placements[i];
    const std::string node = cluster_->spec(p.node).name;
    out.nodes.push_back(node);
    out.gpus.push_back(p.gpus);
    PodObject bound = members[i];
    bound.node_name = node;
    bound.gpus = p.gpus;
    placed_.emplace(members[i].uid, Bound{std::move(bound), node, p});
  }
  return out;
}

ClusterMirror::Admission ClusterMirror::admit(
    const sched::jobs::QueueTree& queues, std::size_t queue, const std::vector<PodObject>& members,
    const std::function<std::optional<std::size_t>(const PodObject&)>& queue_of) {
  Admission out;
  if (members.empty()) return out;
  // Every bound pod is a running job of one replica in its queue: what the queues hold. Specs
  // and states are reserved first, so the pointers between them stay valid.
  std::vector<workload::JobSpec> specs;
  std::vector<sched::jobs::JobState> states;
  specs.reserve(placed_.size() + 1);
  states.reserve(placed_.size() + 1);
  for (const auto& [uid, b] : placed_) {
    if (!b.placement) continue;
    const auto q = queue_of(b.pod);
    if (!q) continue;
    workload::JobSpec& s = specs.emplace_back();
    s.name = b.pod.key();
    s.replica = b.pod.spec;
    s.priority = b.pod.priority;
    sched::jobs::JobState& st = states.emplace_back();
    st.spec = &s;
    st.queue = *q;
    st.placements = {*b.placement};
    st.running_since = 0;
  }
  workload::JobSpec& job = specs.emplace_back();
  job.name = members.front().gang.empty() ? members.front().key() : members.front().gang;
  job.replica = members.front().spec;
  job.min_replicas = job.max_replicas = static_cast<int>(members.size());
  job.priority = members.front().priority;
  sched::jobs::JobState& pending = states.emplace_back();
  pending.spec = &job;
  pending.queue = queue;
  // The core places the members as schedule() and schedule_gang() do (filters, the policy's
  // score, the GPU picker, topology levels for gangs), counted as bound.
  auto placer =
      [&](const workload::JobSpec&, int count, std::span<const cluster::Placement>,
          sched::jobs::PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
    if (static_cast<std::size_t>(count) != members.size()) return std::nullopt;
    if (members.size() == 1) {
      const Result r = schedule(members.front());
      if (r.decision.outcome == sched::Outcome::kPlaced) {
        out.placement.placed = true;
        out.placement.nodes = {r.node};
        out.placement.gpus = {r.decision.placement.gpus};
        return std::vector<cluster::Placement>{r.decision.placement};
      }
      if (why != nullptr) {
        why->infeasible = r.decision.outcome == sched::Outcome::kInfeasible;
        why->message = unschedulable_message(r, resolver_->resolve(members.front().spec),
                                             cluster_->node_count());
      }
      return std::nullopt;
    }
    out.placement = schedule_gang(members);
    if (!out.placement.placed) {
      if (why != nullptr) why->message = out.placement.message;
      return std::nullopt;
    }
    std::vector<cluster::Placement> placements;
    for (const auto& m : members) placements.push_back(*placed_.at(m.uid).placement);
    return placements;
  };
  sched::jobs::JobLayer layer(*cluster_, queues, placer);
  sched::jobs::RoundOptions options;
  options.preempt = false;
  layer.round(std::span<sched::jobs::JobState>(states), options);
  if (pending.replicas() == 0) {
    out.placement.placed = false;
    out.waiting = pending.waiting;
    out.why = pending.why;
  }
  return out;
}

std::string unschedulable_message(const ClusterMirror::Result& r, const sched::PodRequest& request,
                                  std::size_t nodes) {
  std::string reasons = r.decision.diagnosis.explain(request);
  if (const auto colon = reasons.find(": "); colon != std::string::npos) {
    reasons = reasons.substr(colon + 2);
  } else {
    reasons = "no node checked";
  }
  std::string msg = fmt::format("0/{} nodes are available: {}.", nodes, reasons);
  if (!r.unknown_model.empty()) {
    msg = fmt::format("GPU model '{}' is on no node. {}", r.unknown_model, msg);
  }
  msg += r.decision.outcome == sched::Outcome::kInfeasible
             ? " Infeasible: the pod fits no node even when it is empty."
             : " Waiting: the pod fits once resources on a node are freed.";
  return msg;
}

}  // namespace gpuorch::k8s
