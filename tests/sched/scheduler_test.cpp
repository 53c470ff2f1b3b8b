#include "gpuorch/sched/scheduler.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_left;
using test::gpu_node;
using test::placement;
using ::testing::ElementsAre;

struct Fixture {
  explicit Fixture(std::vector<cluster::NodeSpec> nodes, std::string_view policy = "dot-product")
      : cluster(std::move(nodes)),
        rng(1),
        p(make_policy(policy, context())),
        scheduler(cluster, *p),
        resolver(cluster) {}
  PolicyContext context() {
    PolicyContext c;
    c.cluster = &cluster;
    c.rng = &rng;
    return c;
  }
  PodRequest req(std::int64_t cpu, int gpus, std::int64_t milli, std::int64_t mem = 0,
                 std::vector<std::string> models = {}) {
    return resolver.resolve(test::pod("p", cpu, gpus, milli, mem, std::move(models)));
  }
  cluster::Cluster cluster;
  base::Rng rng;
  std::unique_ptr<Policy> p;
  Scheduler scheduler;
  RequestResolver resolver;
};

std::vector<cluster::NodeSpec> identical_nodes(int n) {
  std::vector<cluster::NodeSpec> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(gpu_node(fmt::format("n{}", i), 32000, 4));
  return nodes;
}

TEST(Scheduler, EqualScoresGoToTheLowestRankedNode) {
  Fixture f(identical_nodes(4));
  EXPECT_EQ(f.scheduler.decide(f.req(1000, 1, 500)).placement.node, 0U);  // default: node order
  f.scheduler.set_tie_break_rank({3, 2, 0, 1});
  EXPECT_EQ(f.scheduler.decide(f.req(1000, 1, 500)).placement.node, 2U);
  f.scheduler.set_tie_break_rank({1, 0, 2, 3});
  EXPECT_EQ(f.scheduler.decide(f.req(1000, 1, 500)).placement.node, 1U);
}

TEST(Scheduler, TieRankOnlyAmongTheBestScores) {
  Fixture f(identical_nodes(3));
  f.cluster.apply(placement(2, 16000, 1000, {0, 1}));  // node 2 has less free: better dot product
  f.scheduler.set_tie_break_rank({0, 1, 2});
  EXPECT_EQ(f.scheduler.decide(f.req(4000, 1, 1000)).placement.node, 2U);
  // Among the two equal nodes 0 and 1, the rank decides: block node 2 for this pod.
  f.cluster.apply(placement(2, 16000, 0, {}));
  f.scheduler.set_tie_break_rank({5, 4, 0});
  EXPECT_EQ(f.scheduler.decide(f.req(4000, 1, 1000)).placement.node, 1U);
}

TEST(Scheduler, DecideLeavesTheClusterScheduleReserves) {
  Fixture f(identical_nodes(2));
  const PodRequest p = f.req(2000, 2, 1000, 100);
  const auto v0 = f.cluster.version(0);
  const Decision d = f.scheduler.decide(p);
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(f.cluster.version(0), v0);
  EXPECT_EQ(f.cluster.gpu_milli_used(), 0);
  const Decision s = f.scheduler.schedule(p);
  ASSERT_EQ(s.outcome, Outcome::kPlaced);
  EXPECT_EQ(s.placement.node, 0U);
  EXPECT_EQ(s.placement.cpu_milli, 2000);
  EXPECT_EQ(s.placement.memory_mib, 100);
  EXPECT_EQ(s.placement.gpu_milli, 1000);
  EXPECT_THAT(s.placement.gpus, ElementsAre(0, 1));
  EXPECT_EQ(f.cluster.gpu_milli_used(), 2000);
  EXPECT_EQ(f.cluster.cpu_free(0), 30000);
  EXPECT_EQ(f.cluster.memory_free(0), test::kMemory - 100);
}

TEST(Scheduler, SharedPodGetsTheBestFittingGpu) {
  Fixture f({gpu_node("n", 32000, 4)});
  f.cluster.apply(placement(0, 0, 700, {1}));  // 300 left
  f.cluster.apply(placement(0, 0, 500, {2}));  // 500 left
  f.cluster.apply(placement(0, 0, 500, {3}));  // 500 left
  EXPECT_THAT(gpu_left(f.cluster, 0), ElementsAre(1000, 300, 500, 500));
  EXPECT_THAT(f.scheduler.decide(f.req(0, 1, 400)).placement.gpus,
              ElementsAre(2));  // 500, lowest index
  EXPECT_THAT(f.scheduler.decide(f.req(0, 1, 300)).placement.gpus, ElementsAre(1));
  EXPECT_THAT(f.scheduler.decide(f.req(0, 1, 600)).placement.gpus, ElementsAre(0));
}

TEST(Scheduler, WholeGpuPodGetsTheLowestIndexFreeGpus) {
  Fixture f({gpu_node("n", 32000, 8)});
  f.cluster.apply(placement(0, 0, 100, {0}));
  f.cluster.apply(placement(0, 0, 1000, {2}));
  EXPECT_THAT(f.scheduler.decide(f.req(0, 3, 1000)).placement.gpus, ElementsAre(1, 3, 4));
  EXPECT_THAT(f.scheduler.decide(f.req(0, 1, 1000)).placement.gpus, ElementsAre(1));
  EXPECT_TRUE(f.scheduler.decide(f.req(1000, 0, 0)).placement.gpus.empty());
}

TEST(Scheduler, WaitingWhenItFitsAnEmptyNodeButNoneNow) {
  Fixture f({gpu_node("a", 32000, 2), gpu_node("b", 32000, 2, "T4")});
  f.cluster.apply(placement(0, 0, 1000, {0, 1}));
  f.cluster.apply(placement(1, 0, 1000, {0}));
  const PodRequest p = f.req(1000, 2, 1000);
  const Decision d = f.scheduler.schedule(p);
  EXPECT_EQ(d.outcome, Outcome::kWaiting);
  EXPECT_EQ(d.diagnosis.nodes_checked, 2U);
  EXPECT_EQ(d.diagnosis.nodes_by_filter[filter_index(filter_id("gpu-count"))], 2U);
  EXPECT_EQ(d.main_reason(), filter_id("gpu-count"));
  EXPECT_EQ(d.diagnosis.explain(p), "2 nodes: 2 lack 2 free whole GPUs");
  EXPECT_EQ(f.cluster.gpu_milli_used(), 3000);  // nothing reserved
}

TEST(Scheduler, InfeasibleWhenNoNodeFitsEvenEmpty) {
  Fixture f({gpu_node("a", 32000, 2), gpu_node("b", 32000, 2, "T4"), gpu_node("c", 64000, 0)});
  const Decision many = f.scheduler.decide(f.req(1000, 4, 1000));
  EXPECT_EQ(many.outcome, Outcome::kInfeasible);
  EXPECT_EQ(many.main_reason(), filter_id("gpu-count"));
  EXPECT_EQ(many.diagnosis.nodes_by_filter[filter_index(filter_id("no-gpu"))], 1U);

  const Decision model = f.scheduler.decide(f.req(1000, 1, 500, 0, {"H100"}));
  EXPECT_EQ(model.outcome, Outcome::kInfeasible);
  EXPECT_EQ(model.main_reason(), filter_id("gpu-model"));
  EXPECT_EQ(model.diagnosis.explain(f.req(1000, 1, 500, 0, {"H100"})),
            "3 nodes: 2 have the wrong GPU model, 1 have no GPU");

  const Decision cpu = f.scheduler.decide(f.req(100000, 0, 0));
  EXPECT_EQ(cpu.outcome, Outcome::kInfeasible);
  EXPECT_EQ(cpu.main_reason(), filter_id("cpu"));
}

TEST(Scheduler, CpuOnlyPodWaitsWhenCpuIsTaken) {
  Fixture f({gpu_node("a", 8000, 1)});
  f.cluster.apply(placement(0, 7000, 0, {}));
  const Decision d = f.scheduler.decide(f.req(2000, 0, 0));
  EXPECT_EQ(d.outcome, Outcome::kWaiting);
  EXPECT_EQ(d.main_reason(), filter_id("cpu"));
}

TEST(Scheduler, MemoryIsAHardConstraint) {
  Fixture f({gpu_node("small", 32000, 4, "G2", 1000), gpu_node("big", 32000, 4, "G2", 8000)});
  const Decision d = f.scheduler.schedule(f.req(1000, 1, 500, 4000));
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_EQ(f.scheduler.decide(f.req(1000, 1, 500, 9000)).main_reason(), filter_id("memory"));
}

}  // namespace
}  // namespace gpuorch::sched
