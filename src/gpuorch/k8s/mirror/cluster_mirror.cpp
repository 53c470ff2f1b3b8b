#include "gpuorch/k8s/mirror/cluster_mirror.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

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
  holdings_.valid = false;  // placements are made anew
  // Every bound pod again, in a fixed order (by uid) so a rebuild is deterministic.
  std::vector<std::string> uids;
  uids.reserve(placed_.size());
  for (auto& [uid, b] : placed_) {
    b.placement.reset();
    b.holds.clear();
    uids.push_back(uid);
  }
  std::sort(uids.begin(), uids.end());
  for (const auto& uid : uids) {
    Bound& b = placed_.at(uid);
    if (b.evicting) continue;
    b.placement = placement_on(b.pod, b.node);
    if (b.placement) cluster_->apply(*b.placement);
  }
  // Victims still terminating hold what the reservations left of theirs, as before the rebuild.
  for (const auto& uid : uids) {
    Bound& b = placed_.at(uid);
    const auto at = index_of_.find(b.node);
    if (!b.evicting || !b.was || at == index_of_.end()) continue;
    b.was->node = at->second;
    hold_rest(b);
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
  Bound b{pod, pod.node_name, std::nullopt, false, std::nullopt, {}};
  b.placement = placement_on(pod, pod.node_name);
  if (b.placement) cluster_->apply(*b.placement);
  const bool known = b.placement.has_value();
  placed_.emplace(pod.uid, std::move(b));
  touched(pod.uid);
  return known;
}

void ClusterMirror::refresh(const PodObject& pod) {
  const auto it = placed_.find(pod.uid);
  if (it == placed_.end()) return;
  PodObject& b = it->second.pod;
  b.queue = pod.queue;
  b.priority = pod.priority;
  b.started_s = pod.started_s;
  b.deleting = pod.deleting;
  touched(pod.uid);  // its queue label may have changed
}

void ClusterMirror::release(const std::string& uid) {
  const auto it = placed_.find(uid);
  if (it == placed_.end()) return;
  if (cluster_) {
    if (it->second.placement) cluster_->release(*it->second.placement);
    for (const auto& h : it->second.holds) cluster_->release(h);
  }
  placed_.erase(it);
  touched(uid);
}

void ClusterMirror::hold_rest(Bound& b) {
  b.holds.clear();
  if (!cluster_ || !b.was) return;
  const cluster::Placement& was = *b.was;
  const cluster::NodeIndex n = was.node;
  if (n >= cluster_->node_count()) return;
  const auto left = cluster_->gpu_milli_left(n);
  // One placement applies the same milli to each of its GPUs: GPUs the reservation took part
  // of are held in groups by what is left of them.
  std::map<std::int64_t, std::vector<int>> by_left;
  for (const int g : was.gpus) {
    if (g < 0 || static_cast<std::size_t>(g) >= left.size()) continue;
    const std::int64_t rest =
        std::min<std::int64_t>(left[static_cast<std::size_t>(g)], was.gpu_milli);
    if (rest > 0) by_left[rest].push_back(g);
  }
  cluster::Placement first;
  first.node = n;
  first.cpu_milli = std::clamp<std::int64_t>(cluster_->cpu_free(n), 0, was.cpu_milli);
  first.memory_mib = std::clamp<std::int64_t>(cluster_->memory_free(n), 0, was.memory_mib);
  for (auto& [milli, gpus] : by_left) {
    cluster::Placement h = b.holds.empty() ? first : cluster::Placement{n, 0, 0, 0, {}};
    h.gpu_milli = milli;
    h.gpus = std::move(gpus);
    cluster_->apply(h);
    b.holds.push_back(std::move(h));
  }
  if (b.holds.empty() && (first.cpu_milli > 0 || first.memory_mib > 0)) {
    cluster_->apply(first);
    b.holds.push_back(first);
  }
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
    placed_.emplace(pod.uid, Bound{std::move(bound), out.node, p, false, std::nullopt, {}});
    touched(pod.uid);
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
    out.uids.push_back(members[i].uid);
    PodObject bound = members[i];
    bound.node_name = node;
    bound.gpus = p.gpus;
    placed_.emplace(members[i].uid, Bound{std::move(bound), node, p, false, std::nullopt, {}});
    touched(members[i].uid);
  }
  return out;
}

namespace {

bool same_placement(const cluster::Placement& a, const cluster::Placement& b) {
  return a.node == b.node && a.gpus == b.gpus && a.gpu_milli == b.gpu_milli &&
         a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib;
}

}  // namespace

std::optional<ClusterMirror::Admission> ClusterMirror::admit_on_free_room(
    const sched::jobs::QueueTree& queues, std::size_t queue, const std::vector<PodObject>& members,
    const AdmitOptions& options) {
  // Elastic jobs are sized by the layer (its size, else its minimum, then growth).
  if (options.min_members > 0 && options.min_members < static_cast<int>(members.size())) {
    return std::nullopt;
  }
  // With quotas per GPU model the layer chooses the model (its queue's order, its shares and
  // limits per model), which a placement on what is free would not.
  if (!queues.gpu_models().empty()) return std::nullopt;
  // The queue and its parents within their limits, as the layer's allocation checks first.
  const sched::jobs::Resources need =
      sched::jobs::request_of(members.front().spec) * static_cast<std::int64_t>(members.size());
  std::vector<std::size_t> chain;
  bool limited = false;
  for (int at = static_cast<int>(queue); at >= 0; at = queues.parent(std::size_t(at))) {
    chain.push_back(std::size_t(at));
    for (const double l : queues.limit(std::size_t(at))) limited = limited || std::isfinite(l);
  }
  if (limited) {
    const std::vector<sched::jobs::Resources>& held = queue_holdings(queues, options);
    for (const std::size_t q : chain) {
      for (std::size_t k = 0; k < sched::jobs::kResourceKinds; ++k) {
        if (double(held[q].v[k] + need.v[k]) > queues.limit(q)[k] + 1e-9) return std::nullopt;
      }
    }
  }
  // A job alone in its round that fits what is free starts there (no share is checked when
  // nothing must be taken back); the same placement the layer's placer would make, without
  // building the layer's view of every bound pod.
  Admission out;
  if (!place_members(members, out.placement, nullptr)) return std::nullopt;
  return out;
}

const std::vector<sched::jobs::Resources>& ClusterMirror::queue_holdings(
    const sched::jobs::QueueTree& queues, const AdmitOptions& options) {
  QueueHoldings& h = holdings_;
  // One bound entry's part: in its leaf and every queue above it (+1 adds, -1 takes away).
  auto add = [&](std::size_t leaf, const sched::jobs::Resources& r, std::int64_t sign) {
    for (int at = static_cast<int>(leaf); at >= 0; at = queues.parent(std::size_t(at))) {
      if (sign > 0) {
        h.held[std::size_t(at)] += r;
      } else {
        h.held[std::size_t(at)] -= r;
      }
    }
  };
  auto count = [&](const std::string& uid, const Bound& b) {
    if (!b.placement || b.evicting) return;
    const auto q = options.queue_of(b.pod);
    if (!q) return;
    const auto r = sched::jobs::request_of(b.pod.spec);
    add(*q, r, +1);
    h.counted[uid] = {*q, r};
  };
  const bool same = h.valid && options.queues_generation != 0 &&
                    h.generation == options.queues_generation && h.tree == &queues &&
                    h.held.size() == queues.size();
  if (!same) {
    h.held.assign(queues.size(), sched::jobs::Resources{});
    h.counted.clear();
    h.dirty.clear();
    for (const auto& [uid, b] : placed_) count(uid, b);
    h.valid = options.queues_generation != 0;
    h.generation = options.queues_generation;
    h.tree = &queues;
    return h.held;
  }
  for (const std::string& uid : h.dirty) {
    if (const auto was = h.counted.find(uid); was != h.counted.end()) {
      add(was->second.first, was->second.second, -1);
      h.counted.erase(was);
    }
    if (const auto it = placed_.find(uid); it != placed_.end()) count(uid, it->second);
  }
  h.dirty.clear();
  return h.held;
}

bool ClusterMirror::place_members(std::span<const PodObject> members, GangResult& got,
                                  sched::jobs::PlacementFailure* why) {
  if (members.size() == 1) {
    const PodObject& member = members.front();
    const Result r = schedule(member);
    if (r.decision.outcome != sched::Outcome::kPlaced) {
      if (why != nullptr) {
        why->infeasible = r.decision.outcome == sched::Outcome::kInfeasible;
        why->message =
            unschedulable_message(r, resolver_->resolve(member.spec), cluster_->node_count());
      }
      return false;
    }
    got.placed = true;
    got.nodes.push_back(r.node);
    got.gpus.push_back(r.decision.placement.gpus);
    got.uids.push_back(member.uid);
    return true;
  }
  GangResult g = schedule_gang({members.begin(), members.end()});
  if (!g.placed) {
    if (!got.placed) {
      got.failed_pod = g.failed_pod;
      got.message = g.message;
    }
    if (why != nullptr) why->message = g.message;
    return false;
  }
  if (!got.placed) got.domain = g.domain;
  got.placed = true;
  got.failed_pod.clear();
  got.message.clear();
  for (std::size_t i = 0; i < g.uids.size(); ++i) {
    got.nodes.push_back(std::move(g.nodes[i]));
    got.gpus.push_back(std::move(g.gpus[i]));
    got.uids.push_back(std::move(g.uids[i]));
  }
  return true;
}

ClusterMirror::Admission ClusterMirror::admit(const sched::jobs::QueueTree& queues,
                                              std::size_t queue,
                                              const std::vector<PodObject>& members,
                                              const AdmitOptions& options) {
  Admission out;
  if (members.empty()) return out;
  if (const auto placed = admit_on_free_room(queues, queue, members, options)) return *placed;
  // A claim's GPUs held for one pod (AdmitOptions::held_for) are that pod's in the job layer's
  // eyes: it holds them with its CPU and memory, and a victim gives them back with it.
  std::unordered_map<std::string, std::vector<const Bound*>> held;  // pod uid -> its claims
  std::unordered_set<std::string> held_by_pod;
  if (options.held_for) {
    for (const auto& [uid, b] : placed_) {
      if (!b.placement || b.evicting || b.placement->gpus.empty()) continue;
      const std::string pod = options.held_for(b.pod);
      const auto owner = pod.empty() ? placed_.end() : placed_.find(pod);
      if (owner == placed_.end() || !owner->second.placement || owner->second.evicting ||
          owner->second.placement->node != b.placement->node ||
          !owner->second.placement->gpus.empty()) {
        continue;
      }
      held[pod].push_back(&b);
      held_by_pod.insert(uid);
    }
  }
  // Every bound pod is a running replica in its queue: what the queues hold. A pod alone is a
  // job of one; a gang's bound members are one job. In a fixed order (pod key), so the same
  // cluster gives the same victims.
  std::vector<const Bound*> running;
  running.reserve(placed_.size());
  for (const auto& [uid, b] : placed_) {
    if (b.placement && !b.evicting && options.queue_of(b.pod) && !held_by_pod.contains(uid)) {
      running.push_back(&b);
    }
  }
  // What each running pod holds, its claims' GPUs included, and the request that is.
  const auto whole = [&](const Bound* b) {
    std::pair<cluster::Placement, workload::PodSpec> w{*b->placement, b->pod.spec};
    const auto it = held.find(b->pod.uid);
    if (it == held.end()) return w;
    for (const Bound* claim : it->second) {
      w.first.gpus.insert(w.first.gpus.end(), claim->placement->gpus.begin(),
                          claim->placement->gpus.end());
      w.first.gpu_milli = claim->placement->gpu_milli;
      w.second.gpu_count += static_cast<int>(claim->placement->gpus.size());
      w.second.gpu_milli = claim->placement->gpu_milli;
    }
    std::sort(w.first.gpus.begin(), w.first.gpus.end());
    return w;
  };
  std::sort(running.begin(), running.end(),
            [](const Bound* x, const Bound* y) { return x->pod.key() < y->pod.key(); });
  // Specs and states are reserved first, so the pointers between them stay valid.
  std::vector<workload::JobSpec> specs;
  std::vector<sched::jobs::JobState> states;
  std::vector<std::vector<const Bound*>> replicas;  // per running state: its pods, in order
  specs.reserve(running.size() + 1);
  states.reserve(running.size() + 1);
  std::map<std::string, std::size_t> gang_state;
  for (const Bound* b : running) {
    const std::string& gang = b->pod.gang;
    if (!gang.empty()) {
      if (const auto it = gang_state.find(gang); it != gang_state.end()) {
        sched::jobs::JobState& st = states[it->second];
        st.placements.push_back(whole(b).first);
        replicas[it->second].push_back(b);
        st.running_since = std::min(st.running_since, b->pod.started_s);
        continue;
      }
      gang_state.emplace(gang, states.size());
    }
    auto [placement, replica] = whole(b);
    workload::JobSpec& s = specs.emplace_back();
    s.name = gang.empty() ? b->pod.key() : gang;
    s.replica = std::move(replica);
    s.priority = b->pod.priority;
    sched::jobs::JobState& st = states.emplace_back();
    st.spec = &s;
    st.queue = *options.queue_of(b->pod);
    st.placements = {std::move(placement)};
    st.running_since = b->pod.started_s;
    replicas.push_back({b});
  }
  for (std::size_t i = 0; i < states.size(); ++i) {
    workload::JobSpec& s = specs[i];
    const int n = states[i].replicas();
    const int min = replicas[i].front()->pod.gang.empty() || !options.gang_min
                        ? n
                        : options.gang_min(replicas[i].front()->pod.gang);
    s.max_replicas = n;
    s.min_replicas = min <= 0 ? n : std::min(min, n);
    s.preemptible = options.preempt && options.preemptible &&
                    std::all_of(replicas[i].begin(), replicas[i].end(),
                                [&](const Bound* b) { return options.preemptible(b->pod); });
    if (const std::string& gang = replicas[i].front()->pod.gang;
        !gang.empty() && options.gang_restarted) {
      states[i].running_since = std::max(states[i].running_since, options.gang_restarted(gang));
    }
    // A start time not known costs nothing: such a pod is the cheapest victim of its priority.
    if (states[i].running_since < 0) states[i].running_since = options.now_s;
  }
  const std::size_t running_jobs = states.size();
  workload::JobSpec& job = specs.emplace_back();
  job.name = members.front().gang.empty() ? members.front().key() : members.front().gang;
  job.replica = members.front().spec;
  job.max_replicas = static_cast<int>(members.size());
  job.min_replicas =
      options.min_members <= 0 ? job.max_replicas : std::min(options.min_members, job.max_replicas);
  job.priority = members.front().priority;
  sched::jobs::JobState& pending = states.emplace_back();
  pending.spec = &job;
  pending.queue = queue;
  // The core places the members as schedule() and schedule_gang() do (filters, the policy's
  // score, the GPU picker, topology levels for gangs), counted as bound; an elastic job's
  // members in order, as many as the layer asks for at a time (it starts, then grows). Only
  // this job's: a running gang that lost replicas above minMember to it does not grow back in
  // its round (the layer would grow it onto what is left, and these members would be bound as
  // its replicas), since an admission binds no pod of another job; the gang's pods left pending
  // grow it in a decision of their own, by its resize interval (docs/sim-timeline.md, "Same
  // answer over time").
  std::size_t next = 0;
  auto placer =
      [&](const workload::JobSpec& spec, int count, std::span<const cluster::Placement>,
          sched::jobs::PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
    const auto n = static_cast<std::size_t>(count);
    if (spec.name != job.name || count <= 0 || next + n > members.size()) return std::nullopt;
    std::span<const PodObject> subset(members.data() + next, n);
    // The layer restricts a job that accepts several GPU models to the one it chose for it
    // (quotas per model): the members are placed so.
    std::vector<PodObject> restricted;
    if (spec.replica.allowed_models != subset.front().spec.allowed_models) {
      restricted.assign(subset.begin(), subset.end());
      for (PodObject& m : restricted) m.spec.allowed_models = spec.replica.allowed_models;
      subset = restricted;
    }
    if (!place_members(subset, out.placement, why)) return std::nullopt;
    next += n;
    std::vector<cluster::Placement> placements;
    for (const PodObject& m : subset) placements.push_back(*placed_.at(m.uid).placement);
    return placements;
  };
  sched::jobs::JobLayer layer(*cluster_, queues, placer);
  sched::jobs::RoundOptions round;
  round.now = options.now_s;
  round.preempt = options.preempt && !members.front().preempt_never;
  layer.round(std::span<sched::jobs::JobState>(states), round);
  if (pending.replicas() == 0) {
    out.placement.placed = false;
    out.waiting = pending.waiting;
    out.why = pending.why;
    return out;
  }
  // The victims: the replicas a running job no longer holds. The layer released them in the
  // cluster already; a victim it restored holds what it held, and replicas of one job are
  // alike, so they are matched by placement, not position.
  for (std::size_t i = 0; i < running_jobs; ++i) {
    const sched::jobs::JobState& st = states[i];
    if (!st.changed && st.replicas() == static_cast<int>(replicas[i].size())) continue;
    std::vector<bool> kept(replicas[i].size(), false);
    for (const cluster::Placement& p : st.placements) {
      for (std::size_t k = 0; k < replicas[i].size(); ++k) {
        if (!kept[k] && same_placement(whole(replicas[i][k]).first, p)) {
          kept[k] = true;
          break;
        }
      }
    }
    for (std::size_t k = 0; k < replicas[i].size(); ++k) {
      if (kept[k]) continue;
      const auto reason = st.preempted.value_or(sched::jobs::PreemptReason::kPostFilter);
      Bound& victim = placed_.at(replicas[i][k]->pod.uid);
      // Its claims' GPUs go with it, each freed when its claim is deallocated (a victim too).
      std::vector<const Bound*> claims;
      if (const auto h = held.find(victim.pod.uid); h != held.end()) claims = h->second;
      victim.was = std::move(victim.placement);
      victim.placement.reset();
      victim.evicting = true;
      touched(victim.pod.uid);
      out.victims.push_back({victim.pod.uid, reason, st.queue, false});
      for (const Bound* c : claims) {
        Bound& claim = placed_.at(c->pod.uid);
        claim.was = std::move(claim.placement);
        claim.placement.reset();
        claim.evicting = true;
        touched(claim.pod.uid);
        out.victims.push_back({claim.pod.uid, reason, st.queue, true});
      }
    }
  }
  // Until they are gone the victims still run: what the reservation left of theirs is held.
  for (const Victim& v : out.victims) hold_rest(placed_.at(v.uid));
  return out;
}

void ClusterMirror::restore(const std::string& uid) {
  const auto it = placed_.find(uid);
  if (it == placed_.end() || !it->second.evicting) return;
  Bound& b = it->second;
  if (cluster_) {
    for (const auto& h : b.holds) cluster_->release(h);
  }
  b.holds.clear();
  b.evicting = false;
  b.was.reset();
  b.placement = placement_on(b.pod, b.node);
  if (b.placement) cluster_->apply(*b.placement);
  touched(uid);
}

void ClusterMirror::mark_evicting(const std::string& uid) {
  const auto it = placed_.find(uid);
  if (it == placed_.end() || it->second.evicting) return;
  Bound& b = it->second;
  if (cluster_ && b.placement) cluster_->release(*b.placement);
  b.was = std::move(b.placement);
  b.placement.reset();
  b.evicting = true;
  touched(uid);
}

void ClusterMirror::hold_evicted(const std::string& uid) {
  const auto it = placed_.find(uid);
  if (it != placed_.end() && it->second.evicting && it->second.holds.empty()) {
    hold_rest(it->second);
  }
}

bool ClusterMirror::evicting(const std::string& uid) const {
  const auto it = placed_.find(uid);
  return it != placed_.end() && it->second.evicting;
}

std::optional<std::pair<std::string, std::vector<int>>> ClusterMirror::assumed(
    const std::string& uid) const {
  const auto it = placed_.find(uid);
  if (it == placed_.end() || !it->second.placement) return std::nullopt;
  return std::make_pair(it->second.node, it->second.placement->gpus);
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
