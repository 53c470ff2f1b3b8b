#include "gpuorch/sched/score_index.hpp"

#include <algorithm>
#include <cassert>

#include "gpuorch/sched/filter.hpp"

namespace gpuorch::sched {

namespace {

// A node's resource state (what Policy::scores_by_state allows a score to read), hashed and
// compared for the whole-cluster pass.
std::uint64_t state_hash(const cluster::Cluster& c, cluster::NodeIndex n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ULL;
    h ^= h >> 29;
  };
  const cluster::NodeSpec& spec = c.spec(n);
  mix(static_cast<std::uint64_t>(c.model(n)));
  mix(static_cast<std::uint64_t>(spec.cpu_milli));
  mix(static_cast<std::uint64_t>(spec.memory_mib));
  mix(static_cast<std::uint64_t>(c.cpu_free(n)));
  mix(static_cast<std::uint64_t>(c.memory_free(n)));
  mix(static_cast<std::uint64_t>(spec.gpu_count));
  for (const std::int32_t left : c.gpu_milli_left(n)) mix(static_cast<std::uint64_t>(left));
  for (const auto& k : c.gpu_pod_kinds(n)) {
    mix(static_cast<std::uint64_t>(k.kind));
    mix(static_cast<std::uint64_t>(k.count));
  }
  if (spec.max_pods != 0) {
    mix(static_cast<std::uint64_t>(spec.max_pods));
    mix(static_cast<std::uint64_t>(c.pod_count(n)));
  }
  return h;
}

bool same_state(const cluster::Cluster& c, cluster::NodeIndex a, cluster::NodeIndex b) {
  const cluster::NodeSpec& sa = c.spec(a);
  const cluster::NodeSpec& sb = c.spec(b);
  if (c.model(a) != c.model(b) || sa.cpu_milli != sb.cpu_milli || sa.memory_mib != sb.memory_mib ||
      sa.gpu_count != sb.gpu_count || c.cpu_free(a) != c.cpu_free(b) ||
      c.memory_free(a) != c.memory_free(b) || sa.max_pods != sb.max_pods ||
      (sa.max_pods != 0 && c.pod_count(a) != c.pod_count(b))) {
    return false;
  }
  const auto la = c.gpu_milli_left(a);
  const auto lb = c.gpu_milli_left(b);
  if (!std::equal(la.begin(), la.end(), lb.begin(), lb.end())) return false;
  const auto ka = c.gpu_pod_kinds(a);
  const auto kb = c.gpu_pod_kinds(b);
  return std::equal(ka.begin(), ka.end(), kb.begin(), kb.end(),
                    [](const cluster::PodKindCount& x, const cluster::PodKindCount& y) {
                      return x.kind == y.kind && x.count == y.count;
                    });
}

}  // namespace

const ScoreIndex::Leaf& ScoreIndex::better(const Leaf& a, const Leaf& b) {
  // The full scan's order: higher score, then lower rank, then lower node index (the scan keeps
  // the first of equal (score, rank) in node order). kInfeasible has the lowest possible score
  // and the highest rank and index, so any feasible node beats it.
  if (a.score != b.score) return a.score > b.score ? a : b;
  if (a.rank != b.rank) return a.rank < b.rank ? a : b;
  return a.node <= b.node ? a : b;
}

void ScoreIndex::clear() {
  slots_.clear();
  slot_of_.clear();
}

std::size_t ScoreIndex::memory_bytes() const {
  std::size_t bytes = 0;
  for (const Slot& s : slots_) {
    bytes += s.entries.capacity() * sizeof(NodeEntry) + s.tree.capacity() * sizeof(Leaf);
  }
  return bytes;
}

ScoreIndex::Slot& ScoreIndex::slot_for(const PodRequest& pod, std::size_t node_count) {
  const RequestKey key(pod);
  if (const auto it = slot_of_.find(key); it != slot_of_.end()) return slots_[it->second];

  const std::size_t slot_bytes = node_count * (sizeof(NodeEntry) + 2 * sizeof(Leaf));
  const std::size_t max_slots =
      std::max<std::size_t>(1, budget_bytes_ / std::max<std::size_t>(1, slot_bytes));
  std::uint32_t index = 0;
  if (slots_.size() < max_slots) {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    // Over budget: reuse the least recently used request's memory.
    const auto lru =
        std::min_element(slots_.begin(), slots_.end(),
                         [](const Slot& a, const Slot& b) { return a.last_used < b.last_used; });
    index = static_cast<std::uint32_t>(lru - slots_.begin());
    slot_of_.erase(lru->key);
  }
  Slot& slot = slots_[index];
  slot.key = key;
  slot.cursor = kNeverBuilt;
  slot.entries.assign(node_count, NodeEntry{});
  slot.tree.assign(2 * node_count, kInfeasible);
  slot.nodes_by_filter = {};
  slot.fits_some_empty_node = false;
  slot_of_.emplace(key, index);
  return slot;
}

ScoreIndex::Leaf ScoreIndex::evaluate(Slot& slot, const cluster::Cluster& cluster, Policy& policy,
                                      const PodRequest& pod, std::span<const std::uint32_t> rank,
                                      cluster::NodeIndex n) {
  NodeEntry& e = slot.entries[n];
  e.version = cluster.version(n);
  const FilterId reason = check_node(cluster, n, pod);
  if (e.reason != kUncounted) --slot.nodes_by_filter[e.reason];
  e.reason = static_cast<std::uint8_t>(reason);
  ++slot.nodes_by_filter[e.reason];
  if (reason != kFits) {
    e.gpu = -1;
    return kInfeasible;
  }
  const NodeScore s = policy.score_node(cluster, n, pod);
  assert(s.score != kInfeasible.score);
  assert(s.gpu >= -1 && s.gpu <= INT16_MAX);
  e.gpu = static_cast<std::int16_t>(s.gpu);
  return Leaf{s.score, rank[n], n};
}

ScoreIndex::Leaf ScoreIndex::copy_result(Slot& slot, const cluster::Cluster& cluster,
                                         std::span<const std::uint32_t> rank,
                                         cluster::NodeIndex from, cluster::NodeIndex n) {
  const std::size_t n_nodes = cluster.node_count();
  NodeEntry& e = slot.entries[n];
  const NodeEntry& source = slot.entries[from];
  e.version = cluster.version(n);
  if (e.reason != kUncounted) --slot.nodes_by_filter[e.reason];
  e.reason = source.reason;
  ++slot.nodes_by_filter[e.reason];
  e.gpu = source.gpu;
  const Leaf& leaf = slot.tree[n_nodes + from];
  if (leaf.node == kNoNode) return kInfeasible;
  return Leaf{leaf.score, rank[n], n};
}

void ScoreIndex::catch_up(Slot& slot, const cluster::Cluster& cluster, Policy& policy,
                          const PodRequest& pod, std::span<const std::uint32_t> rank) {
  const std::size_t n_nodes = cluster.node_count();
  Leaf* tree = slot.tree.data();
  const auto changes = cluster.changes_since(slot.cursor);
  // Many changes (or a new request, or a journal trimmed past our cursor): refresh the stale
  // leaves and rebuild the inner nodes bottom-up, O(N), cheaper than a walk up per change then.
  if (!changes || changes->size() * 8 > n_nodes) {
    // For a policy that scores by state, nodes in a state already scored in this pass copy that
    // result: a fresh cluster has a few distinct states, so a first decision costs N hashes and
    // a handful of scores instead of N scores.
    const bool by_state = policy.scores_by_state();
    state_memo_.clear();
    for (cluster::NodeIndex n = 0; n < n_nodes; ++n) {
      if (slot.entries[n].version == cluster.version(n)) continue;
      if (by_state) {
        // Nodes in one state but with different constraint verdicts (labels, taints) differ.
        const auto verdict = [&pod](cluster::NodeIndex m) {
          return pod.node_reasons.empty() ? kFits : pod.node_reasons[m];
        };
        const std::uint64_t key =
            state_hash(cluster, n) ^ (static_cast<std::uint64_t>(verdict(n)) << 56U);
        const auto [it, inserted] = state_memo_.try_emplace(key, n);
        if (!inserted && verdict(it->second) == verdict(n) && same_state(cluster, it->second, n)) {
          tree[n_nodes + n] = copy_result(slot, cluster, rank, it->second, n);
          continue;
        }
      }
      tree[n_nodes + n] = evaluate(slot, cluster, policy, pod, rank, n);
    }
    for (std::size_t i = n_nodes - 1; i >= 1; --i) tree[i] = better(tree[2 * i], tree[2 * i + 1]);
  } else {
    for (const cluster::NodeIndex n : *changes) {
      // A node changed twice appears twice; the version says whether it is still stale.
      if (slot.entries[n].version == cluster.version(n)) continue;
      std::size_t i = n_nodes + n;
      tree[i] = evaluate(slot, cluster, policy, pod, rank, n);
      // Walk up; once an inner node keeps its value, everything above it does too.
      for (i >>= 1; i >= 1; i >>= 1) {
        const Leaf& m = better(tree[2 * i], tree[2 * i + 1]);
        if (m == tree[i]) break;
        tree[i] = m;
      }
    }
  }
  slot.cursor = cluster.journal_end();
}

ScoreIndex::Answer ScoreIndex::best(const cluster::Cluster& cluster, Policy& policy,
                                    const PodRequest& pod, std::span<const std::uint32_t> rank) {
  const std::size_t n_nodes = cluster.node_count();
  assert(rank.size() == n_nodes);
  Answer a;
  if (n_nodes == 0) return a;
  Slot& slot = slot_for(pod, n_nodes);
  slot.last_used = ++clock_;
  if (slot.cursor == kNeverBuilt) {
    for (cluster::NodeIndex n = 0; n < n_nodes && !slot.fits_some_empty_node; ++n) {
      slot.fits_some_empty_node = check_empty_node(cluster, n, pod) == kFits;
    }
  }
  catch_up(slot, cluster, policy, pod, rank);
  // The 2N layout keeps every leaf under the root for any N (not only powers of two), and "best
  // of" is a total order, so the root is the best leaf. With one node the root is its leaf.
  const Leaf& root = slot.tree[1];
  if (root.node != kNoNode) {
    a.found = true;
    a.node = root.node;
    a.gpu = slot.entries[root.node].gpu;
    return a;
  }
  // Every entry is current after catch_up, so the counts are what a pass of check_node over all
  // nodes would add up (none of them kFits here).
  a.diagnosis.nodes_by_filter = slot.nodes_by_filter;
  a.diagnosis.nodes_checked = static_cast<std::uint32_t>(n_nodes);
  a.fits_some_empty_node = slot.fits_some_empty_node;
  return a;
}

}  // namespace gpuorch::sched
