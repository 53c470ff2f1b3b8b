#include "gpuorch/sched/consolidation.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "support/policy_bench.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_left;
using test::gpu_node;
using ::testing::ElementsAre;

// Everything the filters read, per node: what must be identical after a plan that was not carried
// out.
struct NodeState {
  std::int64_t cpu;
  std::int64_t memory;
  std::vector<std::int32_t> gpus;
  bool operator==(const NodeState&) const = default;
};
std::vector<NodeState> state(const cluster::Cluster& c) {
  std::vector<NodeState> out;
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
    out.push_back({c.cpu_free(n), c.memory_free(n), gpu_left(c, n)});
  }
  return out;
}

struct Fixture : test::PolicyBench {
  Fixture(std::vector<cluster::NodeSpec> nodes, int max_moves)
      : PolicyBench("best-fit", std::move(nodes)),
        consolidator(cluster, scheduler, ConsolidationOptions{max_moves, 8}) {}
  // Resolves and keeps the request (the consolidator holds on to it while the pod is bound).
  const PodRequest& req(std::int64_t cpu, int gpus, std::int64_t milli,
                        std::vector<std::string> models = {}) {
    requests.push_back(PolicyBench::req(cpu, gpus, milli, std::move(models)));
    return requests.back();
  }
  // Binds the pod where the scheduler puts it; returns its node.
  cluster::NodeIndex bind(std::uint32_t id, const PodRequest& pod) {
    const Decision d = scheduler.schedule(pod);
    EXPECT_EQ(d.outcome, Outcome::kPlaced);
    consolidator.bound(id, pod, d.placement);
    return d.placement.node;
  }
  Consolidator consolidator;
  std::deque<PodRequest> requests;  // stable addresses
};

TEST(Consolidation, MovesAnyModelPodOffTheOnlyNodeThePendingPodCanUse) {
  Fixture f({gpu_node("t4", 8000, 1, "T4"), gpu_node("g2", 8000, 1, "G2")}, 1);
  ASSERT_EQ(f.bind(0, f.req(1000, 1, 1000)), 0U);  // lands on the T4 (node order breaks the tie)
  const PodRequest& t4_only = f.req(1000, 1, 1000, {"T4"});
  ASSERT_EQ(f.scheduler.schedule(t4_only).outcome, Outcome::kWaiting);

  const auto plan = f.consolidator.make_room(1, t4_only);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->placement.node, 0U);
  ASSERT_EQ(plan->moves.size(), 1U);
  EXPECT_EQ(plan->moves[0].pod, 0U);
  EXPECT_EQ(plan->moves[0].from.node, 0U);
  EXPECT_EQ(plan->moves[0].to.node, 1U);
  EXPECT_EQ(f.cluster.gpu_milli_used(), 2000);
  EXPECT_THAT(gpu_left(f.cluster, 0), ElementsAre(0));
  EXPECT_THAT(gpu_left(f.cluster, 1), ElementsAre(0));
}

TEST(Consolidation, NeverMovesMoreThanTheBudget) {
  for (const int budget : {3, 4}) {
    SCOPED_TRACE(budget);
    Fixture f({gpu_node("t4", 8000, 1, "T4"), gpu_node("g2", 8000, 1, "G2")}, budget);
    for (std::uint32_t i = 0; i < 4; ++i) f.bind(i, f.req(100, 1, 250));
    ASSERT_THAT(gpu_left(f.cluster, 0), ElementsAre(0));  // best-fit stacks all four on the T4
    const auto before = state(f.cluster);
    const auto plan = f.consolidator.make_room(4, f.req(1000, 1, 1000, {"T4"}));
    if (budget == 3) {
      EXPECT_FALSE(plan);
      EXPECT_EQ(state(f.cluster), before);
    } else {
      ASSERT_TRUE(plan);
      EXPECT_EQ(plan->moves.size(), 4U);
      EXPECT_THAT(gpu_left(f.cluster, 1), ElementsAre(0));
    }
  }
}

TEST(Consolidation, LeavesTheClusterAsItWasWhenAMovedPodFindsNoNode) {
  Fixture f({gpu_node("t4", 8000, 1, "T4"), gpu_node("g2", 8000, 1, "G2")}, 4);
  f.bind(0, f.req(1000, 1, 1000));
  f.bind(1, f.req(1000, 1, 1000));  // both GPUs full: the moved pod would have nowhere to go
  const auto before = state(f.cluster);
  const std::int64_t used = f.cluster.gpu_milli_used();
  EXPECT_FALSE(f.consolidator.make_room(2, f.req(1000, 1, 1000, {"T4"})));
  EXPECT_EQ(state(f.cluster), before);
  EXPECT_EQ(f.cluster.gpu_milli_used(), used);
  // The consolidator's own books are intact too: a later plan still finds pod 0 or 1 where it is.
  EXPECT_FALSE(f.consolidator.make_room(3, f.req(1000, 1, 1000, {"T4"})));
}

TEST(Consolidation, FreesCpuHeldByACpuOnlyPod) {
  // The GPU node's CPU is taken by a CPU-only pod that the CPU node could run as well.
  Fixture f({gpu_node("gpu", 8000, 1, "T4"), gpu_node("cpu", 8000, 0)}, 1);
  f.cluster.apply(test::placement(1, 2000, 0, {}));  // the CPU node has room for one more 6000
  const PodRequest& cpu_pod = f.req(6000, 0, 0);
  const Decision d = f.scheduler.decide_on(0, cpu_pod);
  f.cluster.apply(d.placement);
  f.consolidator.bound(0, cpu_pod, d.placement);
  const PodRequest& gpu_pod = f.req(4000, 1, 1000);
  ASSERT_EQ(f.scheduler.schedule(gpu_pod).outcome, Outcome::kWaiting);
  const auto plan = f.consolidator.make_room(1, gpu_pod);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->moves.size(), 1U);
  EXPECT_EQ(plan->moves[0].to.node, 1U);
  EXPECT_EQ(f.cluster.cpu_free(0), 4000);
  EXPECT_EQ(f.cluster.cpu_free(1), 0);
}

TEST(Consolidation, EmptiesWholeGpusForAMultiGpuPod) {
  Fixture f({gpu_node("two", 8000, 2), gpu_node("a", 8000, 1), gpu_node("b", 8000, 1)}, 2);
  // Pods on both GPUs of the only two-GPU node; best-fit puts the second next to the first.
  const auto& whole = f.req(1000, 1, 1000);
  const auto& half = f.req(1000, 1, 500);
  f.cluster.apply(test::placement(0, 1000, 1000, {0}));
  f.consolidator.bound(0, whole, test::placement(0, 1000, 1000, {0}));
  f.cluster.apply(test::placement(0, 1000, 500, {1}));
  f.consolidator.bound(1, half, test::placement(0, 1000, 500, {1}));
  const auto& pair = f.req(2000, 2, 1000);
  ASSERT_EQ(f.scheduler.schedule(pair).outcome, Outcome::kWaiting);

  const auto plan = f.consolidator.make_room(2, pair);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->placement.node, 0U);
  EXPECT_THAT(plan->placement.gpus, ElementsAre(0, 1));
  ASSERT_EQ(plan->moves.size(), 2U);
  EXPECT_EQ(plan->moves[0].pod, 0U);  // the bigger pod is re-placed first
  EXPECT_NE(plan->moves[0].to.node, plan->moves[1].to.node);
  EXPECT_EQ(f.cluster.gpu_milli_used(), 3500);
}

TEST(Consolidation, OffWithoutABudget) {
  Fixture f({gpu_node("t4", 8000, 1, "T4"), gpu_node("g2", 8000, 1, "G2")}, 0);
  f.bind(0, f.req(1000, 1, 1000));
  EXPECT_FALSE(f.consolidator.make_room(1, f.req(1000, 1, 1000, {"T4"})));
}

}  // namespace
}  // namespace gpuorch::sched
