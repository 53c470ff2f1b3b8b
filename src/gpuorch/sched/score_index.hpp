#pragma once
// The scheduler core's incremental path for per-node policies (Policy::scores_per_node()).
//
// For every distinct pod request it has seen, the index keeps each node's filter result and score
// against the node's version, and a max segment tree over the nodes whose root is the best node:
// highest score, ties to the lowest tie-break rank, then the lowest node index (exactly the full
// scan's choice). A decision first catches up on the nodes that changed since this request was
// last decided (the cluster's change journal; each is re-filtered, re-scored and pushed up the
// tree in O(log N)), then reads the root. No per-pod pass over all nodes: a placement touches one
// node, so a request pays for the nodes changed since its last use, not for the cluster's size.
// The same per-node filter results, counted by reason, explain a pod that fits nowhere, so even
// a failing pod costs no pass over all nodes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/policy.hpp"

namespace gpuorch::sched {

class ScoreIndex {
 public:
  struct Answer {
    bool found = false;
    cluster::NodeIndex node = 0;  // when found: the best node
    std::int32_t gpu = -1;        // when found: NodeScore::gpu of that node
    // When not found: every node's first failing filter (as check_node gives it), and whether
    // the pod fits some node when it is empty.
    FilterDiagnosis diagnosis;
    bool fits_some_empty_node = false;
  };

  // budget_bytes bounds the memory of the per-request state (about 40 bytes per node and
  // request); beyond it the least recently used request is dropped and rebuilt when it returns.
  explicit ScoreIndex(std::size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // The best feasible node for the pod under the policy and tie-break ranks, or, when no node
  // passes the filters, why. The rank must not change between calls without clear().
  Answer best(const cluster::Cluster& cluster, Policy& policy, const PodRequest& pod,
              std::span<const std::uint32_t> rank);

  // Forgets everything (after a change of tie-break ranks).
  void clear();

  [[nodiscard]] std::size_t request_count() const { return slots_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  // A tree entry: the node's score, rank and index, compared in that order. The infeasible mark
  // (kNoNode) loses to every feasible node.
  struct Leaf {
    std::int64_t score;
    std::uint32_t rank;
    cluster::NodeIndex node;
    bool operator==(const Leaf&) const = default;
  };
  struct NodeEntry {
    std::uint32_t version = 0;  // the node version the leaf reflects; cluster versions start at 1
    std::int16_t gpu = -1;
    std::uint8_t reason = kUncounted;  // check_node's FilterId at that version
  };
  static constexpr std::uint8_t kUncounted = 0xff;  // not evaluated yet
  struct Slot {
    RequestKey key{};
    std::uint64_t cursor = 0;  // journal position caught up to; kNeverBuilt before the first use
    std::uint64_t last_used = 0;
    std::vector<NodeEntry> entries;     // per node
    std::vector<Leaf> tree;             // 2N entries: root at 1, leaf of node n at N + n
    FilterCounts nodes_by_filter{};     // over the evaluated entries
    bool fits_some_empty_node = false;  // capacities never change: computed once
  };

  static constexpr cluster::NodeIndex kNoNode = ~cluster::NodeIndex{0};
  static constexpr Leaf kInfeasible{std::numeric_limits<std::int64_t>::min(), ~std::uint32_t{0},
                                    kNoNode};
  static constexpr std::uint64_t kNeverBuilt = ~std::uint64_t{0};

  static const Leaf& better(const Leaf& a, const Leaf& b);
  Slot& slot_for(const PodRequest& pod, std::size_t node_count);
  void catch_up(Slot& slot, const cluster::Cluster& cluster, Policy& policy, const PodRequest& pod,
                std::span<const std::uint32_t> rank);
  // Re-filters and re-scores node n for the slot's request; returns its new leaf.
  static Leaf evaluate(Slot& slot, const cluster::Cluster& cluster, Policy& policy,
                       const PodRequest& pod, std::span<const std::uint32_t> rank,
                       cluster::NodeIndex n);
  // Gives node n the result of node `from`, evaluated in the same state; returns n's new leaf.
  static Leaf copy_result(Slot& slot, const cluster::Cluster& cluster,
                          std::span<const std::uint32_t> rank, cluster::NodeIndex from,
                          cluster::NodeIndex n);

  std::size_t budget_bytes_;
  std::vector<Slot> slots_;
  std::unordered_map<RequestKey, std::uint32_t, RequestKeyHash> slot_of_;
  std::uint64_t clock_ = 0;  // decisions so far, for least-recently-used eviction
  // State hash -> first node seen in that state, during one whole-cluster pass (scratch).
  std::unordered_map<std::uint64_t, cluster::NodeIndex> state_memo_;
};

}  // namespace gpuorch::sched
