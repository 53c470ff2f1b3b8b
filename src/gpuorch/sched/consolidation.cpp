#include "gpuorch/sched/consolidation.hpp"

#include <algorithm>
#include <cassert>
#include <tuple>

#include "gpuorch/sched/filter.hpp"

namespace gpuorch::sched {
namespace {

std::int64_t total_gpu_milli(const cluster::Placement& p) {
  return p.gpu_milli * static_cast<std::int64_t>(p.gpus.size());
}

bool holds_gpu(const cluster::Placement& p, int gpu) {
  return std::find(p.gpus.begin(), p.gpus.end(), gpu) != p.gpus.end();
}

}  // namespace

Consolidator::Consolidator(cluster::Cluster& cluster, Scheduler& scheduler,
                           ConsolidationOptions options)
    : cluster_(&cluster),
      scheduler_(&scheduler),
      options_(options),
      pods_on_(cluster.node_count()) {}

void Consolidator::bound(std::uint32_t id, const PodRequest& request,
                         const cluster::Placement& placement) {
  if (id >= pods_.size()) pods_.resize(std::max<std::size_t>(id + 1, pods_.size() * 2));
  Bound& b = pods_[id];
  assert(!b.live);
  auto& on = pods_on_[placement.node];
  b = Bound{&request, placement, static_cast<std::uint32_t>(on.size()), true};
  on.push_back(id);
}

void Consolidator::unbind(std::uint32_t id) {
  Bound& b = pods_[id];
  auto& on = pods_on_[b.placement.node];
  const std::uint32_t last = on.back();
  on[b.slot] = last;
  pods_[last].slot = b.slot;
  on.pop_back();
  b.live = false;
}

std::optional<Consolidator::Candidate> Consolidator::victims_on(cluster::NodeIndex n,
                                                                const PodRequest& pod) const {
  if (check_empty_node(*cluster_, n, pod) != kFits) return std::nullopt;
  const auto& on = pods_on_[n];
  const auto budget = static_cast<std::size_t>(options_.max_moves);
  Candidate c;
  c.node = n;
  auto take = [&](std::uint32_t id) {
    if (std::find(c.victims.begin(), c.victims.end(), id) != c.victims.end()) return;
    c.victims.push_back(id);
    c.moved_gpu_milli += total_gpu_milli(pods_[id].placement);
  };
  const auto left = cluster_->gpu_milli_left(n);

  if (pod.gpu_share()) {
    // The GPU that needs the fewest pods gone to free the pod's milli, then the least milli
    // moved. The pods of one GPU leave biggest first.
    auto& held = scratch_;  // (GPU, -milli, id): each GPU's pods, biggest first
    held.clear();
    for (const std::uint32_t id : on) {
      const auto& p = pods_[id].placement;
      for (const int g : p.gpus) held.emplace_back(g, -p.gpu_milli, id);
    }
    std::sort(held.begin(), held.end());
    std::size_t best_count = budget + 1;
    std::int64_t best_freed = 0;
    std::size_t best_begin = 0;
    for (std::size_t i = 0; i < held.size();) {
      const int g = std::get<0>(held[i]);
      std::size_t end = i;
      while (end < held.size() && std::get<0>(held[end]) == g) ++end;
      std::int64_t need = pod.gpu_milli - left[static_cast<std::size_t>(g)];
      std::size_t count = 0;
      std::int64_t freed = 0;
      for (std::size_t k = i; k < end && need > 0; ++k, ++count) {
        need += std::get<1>(held[k]);
        freed -= std::get<1>(held[k]);
      }
      if (need <= 0 && (count < best_count || (count == best_count && freed < best_freed))) {
        best_count = count;
        best_freed = freed;
        best_begin = i;
      }
      i = end;
    }
    // A GPU with room already (CPU or memory is what is short) needs no GPU victims.
    const bool free_gpu =
        std::any_of(left.begin(), left.end(), [&](std::int32_t l) { return l >= pod.gpu_milli; });
    if (!free_gpu) {
      if (best_count > budget) return std::nullopt;
      for (std::size_t k = best_begin; k < best_begin + best_count; ++k) {
        take(std::get<2>(held[k]));
      }
    }
  } else if (pod.gpu_count > 0) {
    // Whole GPUs: the k GPUs with the fewest pods on them (free ones cost nothing).
    auto& cost = gpu_cost_;  // (pods on the GPU, GPU)
    cost.clear();
    for (std::size_t g = 0; g < left.size(); ++g) cost.emplace_back(0U, static_cast<int>(g));
    for (const std::uint32_t id : on) {
      for (const int g : pods_[id].placement.gpus) ++cost[static_cast<std::size_t>(g)].first;
    }
    std::sort(cost.begin(), cost.end());
    for (int i = 0; i < pod.gpu_count; ++i) {
      const int g = cost[static_cast<std::size_t>(i)].second;
      for (const std::uint32_t id : on) {
        if (holds_gpu(pods_[id].placement, g)) take(id);
      }
      if (c.victims.size() > budget) return std::nullopt;
    }
  }

  // CPU and memory the victims so far do not free: more pods leave, the biggest CPU holder while
  // CPU is short, then the biggest memory holder.
  std::int64_t cpu = cluster_->cpu_free(n);
  std::int64_t memory = cluster_->memory_free(n);
  for (const std::uint32_t id : c.victims) {
    cpu += pods_[id].placement.cpu_milli;
    memory += pods_[id].placement.memory_mib;
  }
  while (cpu < pod.cpu_milli || memory < pod.memory_mib) {
    if (c.victims.size() >= budget) return std::nullopt;
    const bool cpu_short = cpu < pod.cpu_milli;
    std::optional<std::uint32_t> pick;
    for (const std::uint32_t id : on) {
      if (std::find(c.victims.begin(), c.victims.end(), id) != c.victims.end()) continue;
      const auto& p = pods_[id].placement;
      const std::int64_t v = cpu_short ? p.cpu_milli : p.memory_mib;
      if (v <= 0) continue;
      if (!pick) {
        pick = id;
        continue;
      }
      const auto& q = pods_[*pick].placement;
      if (v > (cpu_short ? q.cpu_milli : q.memory_mib)) pick = id;
    }
    if (!pick) return std::nullopt;
    take(*pick);
    cpu += pods_[*pick].placement.cpu_milli;
    memory += pods_[*pick].placement.memory_mib;
  }
  if (c.victims.empty() || c.victims.size() > budget) return std::nullopt;
  return c;
}

std::optional<ConsolidationPlan> Consolidator::try_candidate(const Candidate& c,
                                                             const PodRequest& pod) {
  for (const std::uint32_t id : c.victims) cluster_->release(pods_[id].placement);
  auto restore = [&](const std::vector<Move>& moved, const cluster::Placement* placed) {
    for (auto it = moved.rbegin(); it != moved.rend(); ++it) cluster_->release(it->to);
    if (placed != nullptr) cluster_->release(*placed);
    for (const std::uint32_t id : c.victims) cluster_->apply(pods_[id].placement);
  };
  if (check_node(*cluster_, c.node, pod) != kFits) {
    restore({}, nullptr);
    return std::nullopt;
  }
  ConsolidationPlan plan;
  plan.placement = scheduler_->decide_on(c.node, pod).placement;
  cluster_->apply(plan.placement);

  // The hardest to place first, while the most room is left.
  std::vector<std::uint32_t> order = c.victims;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& pa = pods_[a].placement;
    const auto& pb = pods_[b].placement;
    return std::make_tuple(total_gpu_milli(pb), pb.cpu_milli, a) <
           std::make_tuple(total_gpu_milli(pa), pa.cpu_milli, b);
  });
  for (const std::uint32_t id : order) {
    const Decision d = scheduler_->decide(*pods_[id].request);
    if (d.outcome != Outcome::kPlaced) {
      restore(plan.moves, &plan.placement);
      return std::nullopt;
    }
    cluster_->apply(d.placement);
    plan.moves.push_back(Move{id, pods_[id].placement, d.placement});
  }
  for (const Move& m : plan.moves) {
    const PodRequest* request = pods_[m.pod].request;
    unbind(m.pod);
    bound(m.pod, *request, m.to);
  }
  return plan;
}

std::optional<ConsolidationPlan> Consolidator::make_room(std::uint32_t id, const PodRequest& pod) {
  if (options_.max_moves <= 0 || options_.max_tries <= 0) return std::nullopt;
  const RequestKey key(pod);
  if (const auto it = hopeless_.find(key);
      it != hopeless_.end() && it->second == cluster_->journal_end()) {
    return std::nullopt;
  }
  std::vector<Candidate> candidates;
  const auto n_nodes = static_cast<cluster::NodeIndex>(cluster_->node_count());
  for (cluster::NodeIndex n = 0; n < n_nodes; ++n) {
    if (auto c = victims_on(n, pod)) candidates.push_back(std::move(*c));
  }
  const auto tries = std::min(candidates.size(), static_cast<std::size_t>(options_.max_tries));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(tries),
                    candidates.end(), [](const Candidate& a, const Candidate& b) {
                      return std::make_tuple(a.victims.size(), a.moved_gpu_milli, a.node) <
                             std::make_tuple(b.victims.size(), b.moved_gpu_milli, b.node);
                    });
  for (std::size_t i = 0; i < tries; ++i) {
    if (auto plan = try_candidate(candidates[i], pod)) {
      bound(id, pod, plan->placement);
      return plan;
    }
  }
  hopeless_[key] = cluster_->journal_end();
  return std::nullopt;
}

}  // namespace gpuorch::sched
