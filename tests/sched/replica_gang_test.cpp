// Gangs of identical replicas through the scheduler core: the spreading rules of the time-based
// simulator's policies as core policies, growth next to running replicas, all or nothing, and
// the explanation of a gang that waits.
#include "gpuorch/sched/replica_gang.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "gpuorch/sched/policy.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

struct NodeGpus {
  cluster::NodeIndex node;
  std::size_t gpus;
};

// A node's replicas, one placement each, counted together.
std::vector<NodeGpus> spread_of(const ReplicaGangDecision& d) {
  std::vector<NodeGpus> out;
  for (const auto& p : d.placements) {
    if (out.empty() || out.back().node != p.node) out.push_back({p.node, 0});
    out.back().gpus += p.gpus.size();
  }
  return out;
}

// The GPUs of the gang's replicas on its `k`-th node.
std::vector<int> gpus_on(const ReplicaGangDecision& d, std::size_t k) {
  std::vector<int> out;
  std::size_t group = 0;
  for (std::size_t i = 0; i < d.placements.size(); ++i) {
    if (i > 0 && d.placements[i].node != d.placements[i - 1].node) ++group;
    if (group == k) out.insert(out.end(), d.placements[i].gpus.begin(), d.placements[i].gpus.end());
  }
  return out;
}

MATCHER_P2(On, node, gpus, "") { return arg.node == node && arg.gpus == std::size_t(gpus); }

// Nodes of four GPUs; `used[n]` of node n's GPUs (the lowest ones) are taken.
class ReplicaGangTest : public ::testing::Test {
 protected:
  void build(const std::vector<int>& used, std::vector<cluster::NodeSpec> nodes = {}) {
    if (nodes.empty()) {
      for (std::size_t n = 0; n < used.size(); ++n) {
        nodes.push_back(test::gpu_node(fmt::format("n{}", n), 64000, 4, "V100"));
      }
    }
    c = std::make_unique<cluster::Cluster>(std::move(nodes));
    for (std::size_t n = 0; n < used.size(); ++n) {
      std::vector<int> gpus;
      for (int g = 0; g < used[n]; ++g) gpus.push_back(g);
      if (!gpus.empty())
        c->apply(test::placement(static_cast<cluster::NodeIndex>(n), 0, 1000, gpus));
    }
    resolver = std::make_unique<RequestResolver>(*c);
  }
  ReplicaGangDecision place(std::string_view policy_name, ReplicaGang gang) {
    // What efd knows of the workload: pods of the gang's own shape.
    const std::vector<workload::PodSpec> past(4, gang.replica);
    history = workload::typical_pods(past, 1.0);
    policy = make_policy(policy_name, PolicyContext{c.get(), nullptr, nullptr, &history});
    scheduler = std::make_unique<Scheduler>(*c, *policy);
    return place_replica_gang(*c, *scheduler, *resolver, gang);
  }
  static ReplicaGang gpus(int count) {
    ReplicaGang g;
    g.replica = test::pod("r", 0, 1, 1000);
    g.count = count;
    return g;
  }

  std::unique_ptr<cluster::Cluster> c;
  std::unique_ptr<RequestResolver> resolver;
  workload::TargetWorkload history;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Scheduler> scheduler;
};

// The rules as the time-based simulator had them before they went through the core (the side
// path sched/gang_replicas, now retired), written out plainly: the core's policies must give the
// same nodes, in the same order, with the same GPUs, so every reproduced figure stands.
std::vector<NodeGpus> reference_spread(const cluster::Cluster& c, int need, bool packing) {
  std::vector<NodeGpus> out;
  std::vector<bool> used(c.node_count(), false);
  std::vector<int> free(c.node_count());
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) free[n] = c.fully_free_gpus(n);
  while (need > 0) {
    long long pick = -1;
    for (cluster::NodeIndex n = 0; packing && n < c.node_count(); ++n) {
      if (!used[n] && free[n] >= need && (pick < 0 || free[n] < free[pick])) pick = n;
    }
    for (cluster::NodeIndex n = 0; pick < 0 && n < c.node_count(); ++n) {
      if (!used[n] && free[n] > 0) {
        cluster::NodeIndex best = n;
        for (cluster::NodeIndex m = n + 1; m < c.node_count(); ++m) {
          if (!used[m] && free[m] > free[best]) best = m;
        }
        pick = best;
      }
    }
    if (pick < 0) return {};
    const auto node = static_cast<cluster::NodeIndex>(pick);
    used[node] = true;
    const int take = std::min(need, free[node]);
    out.push_back({node, static_cast<std::size_t>(take)});
    need -= take;
  }
  return out;
}

TEST_F(ReplicaGangTest, TheCorePoliciesGiveTheSimulatorsFormerPlacementsExactly) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<cluster::NodeSpec> nodes;
    std::vector<int> used;
    const int n_nodes = 1 + static_cast<int>(rng() % 12);
    for (int n = 0; n < n_nodes; ++n) {
      const int gpus = rng() % 3 == 0 ? 8 : 4;
      nodes.push_back(test::gpu_node(fmt::format("n{}", n), 64000, gpus, "V100"));
      used.push_back(static_cast<int>(rng() % static_cast<unsigned>(gpus + 1)));
    }
    for (const bool packing : {false, true}) {
      build(used, nodes);
      const int need = 1 + static_cast<int>(rng() % 20);
      const auto expected = reference_spread(*c, need, packing);
      const auto d = place(packing ? "tightest-fit" : "most-free", gpus(need));
      ASSERT_EQ(d.placed, !expected.empty()) << round;
      const auto got = spread_of(d);
      ASSERT_EQ(got.size(), expected.size()) << round;
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].node, expected[i].node) << round << " step " << i;
        EXPECT_EQ(got[i].gpus, expected[i].gpus) << round << " step " << i;
        // The lowest free GPUs of the node, as the former path's picker gave them.
        const auto g = gpus_on(d, i);
        EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
        EXPECT_EQ(g.front(), used[got[i].node]) << round;
      }
    }
  }
}

TEST_F(ReplicaGangTest, MostFreeFirstTakesTheMostFreeNodeAsFarAsItGoes) {
  build({2, 0, 1, 0});  // free: 2, 4, 3, 4
  const auto d = place("most-free", gpus(9));
  ASSERT_TRUE(d.placed);
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(1U, 4), On(3U, 4), On(2U, 1)));
  // Even a gang that fits a tighter node goes to the most free one (lowest index on ties).
  build({2, 0, 1, 0});
  EXPECT_THAT(spread_of(place("most-free", gpus(2))), ::testing::ElementsAre(On(1U, 2)));
  EXPECT_EQ(spread_policy(ReplicaSpread::kMostFreeFirst), "most-free");
}

TEST_F(ReplicaGangTest, PackingPutsAGangOneNodeHoldsOnTheTightestSuchNode) {
  build({2, 0, 1, 0});  // free: 2, 4, 3, 4
  EXPECT_THAT(spread_of(place("tightest-fit", gpus(3))), ::testing::ElementsAre(On(2U, 3)));
  EXPECT_THAT(spread_of(place("tightest-fit", gpus(2))), ::testing::ElementsAre(On(0U, 2)));
  // The lowest free GPUs of the node (no link matrix), as one placement.
  build({2, 0, 1, 0});
  const auto d = place("tightest-fit", gpus(3));
  EXPECT_EQ(gpus_on(d, 0), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d.placements.size(), 3U) << "one placement per replica";
  // A driver that counts GPUs per node (the time-based simulator) may take one per node.
  build({2, 0, 1, 0});
  ReplicaGang per_node = gpus(3);
  per_node.placement_per_replica = false;
  const auto one = place("tightest-fit", per_node);
  ASSERT_EQ(one.placements.size(), 1U);
  EXPECT_EQ(one.placements[0].gpus, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c->pod_count(2), 2);
}

TEST_F(ReplicaGangTest, PackingTakesWholeFreeNodesThenTheRemainderBestFit) {
  build({2, 0, 1, 0});  // free: 2, 4, 3, 4
  const auto d = place("tightest-fit", gpus(10));
  ASSERT_TRUE(d.placed);
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(1U, 4), On(3U, 4), On(0U, 2)));
  EXPECT_EQ(spread_policy(ReplicaSpread::kFewestNodes), "tightest-fit");
}

TEST_F(ReplicaGangTest, GrowthGoesNextToTheRunningReplicasWithoutMovingThem) {
  // Racks r1 = {n0, n1}, r2 = {n2, n3}; the gang runs on n0's GPUs 0 and 1.
  std::vector<cluster::NodeSpec> nodes;
  for (int n = 0; n < 4; ++n) {
    auto s = test::gpu_node(fmt::format("n{}", n), 64000, 4, "V100");
    s.labels = {{"rack", n < 2 ? "r1" : "r2"}, {"hostname", s.name}};
    nodes.push_back(std::move(s));
  }
  build({0, 1, 0, 0}, nodes);
  const std::vector<cluster::Placement> running{test::placement(0, 0, 1000, {0, 1})};
  c->apply(running[0]);
  ReplicaGang grow = gpus(4);
  grow.running = running;
  grow.topology_levels = {"rack", "hostname"};
  const auto d = place("most-free", grow);
  ASSERT_TRUE(d.placed);
  // Its own node first, then its rack, although n2 and n3 have more free GPUs.
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(0U, 2), On(1U, 2)));
  EXPECT_EQ(gpus_on(d, 0), (std::vector<int>{2, 3}));
  EXPECT_EQ(c->fully_free_gpus(0), 0);
  EXPECT_EQ(c->fully_free_gpus(2), 4);
  // A new gang of the same size, for contrast, goes to the most free nodes.
  EXPECT_THAT(spread_of(place("most-free", gpus(4))), ::testing::ElementsAre(On(2U, 4)));
}

TEST_F(ReplicaGangTest, ANewGangGoesUnderTheLowestTopologyLevelThatHoldsIt) {
  std::vector<cluster::NodeSpec> nodes;
  for (int n = 0; n < 4; ++n) {
    auto s = test::gpu_node(fmt::format("n{}", n), 64000, 4, "V100");
    s.labels = {{"rack", n < 2 ? "r1" : "r2"}};
    nodes.push_back(std::move(s));
  }
  build({1, 0, 2, 2}, nodes);  // r1 has 7 free GPUs, r2 has 4: most-free alone would mix racks
  ReplicaGang g = gpus(6);
  g.topology_levels = {"rack"};
  const auto d = place("most-free", g);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.domain, "rack=r1");
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(1U, 4), On(0U, 2)));
}

TEST_F(ReplicaGangTest, AllOrNothingAndWhyItWaits) {
  // Each replica needs 30 cores: n0 holds two, n1 (54 cores taken) none, though GPUs are free.
  build({0, 0});
  c->apply(test::placement(1, 54000, 0, {}));
  const auto used = c->gpu_milli_used();
  const auto cpu0 = c->cpu_free(0);
  ReplicaGang g = gpus(3);
  g.replica.cpu_milli = 30000;
  const auto d = place("most-free", g);
  EXPECT_FALSE(d.placed);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.placeable, 2);
  EXPECT_EQ(d.failure.main_reason(), filter_id("cpu"));
  EXPECT_EQ(d.failure.outcome, Outcome::kWaiting);
  EXPECT_EQ(c->gpu_milli_used(), used) << "a gang that cannot run holds nothing";
  EXPECT_EQ(c->cpu_free(0), cpu0);
  // More GPUs than are free: the gang as one request explains it; more than the cluster has:
  // infeasible.
  const auto short_of_gpus = place("tightest-fit", gpus(9));
  EXPECT_FALSE(short_of_gpus.placed);
  EXPECT_EQ(short_of_gpus.failure.main_reason(), filter_id("gpu-count"));
  EXPECT_EQ(short_of_gpus.failure.outcome, Outcome::kInfeasible);
  EXPECT_EQ(c->gpu_milli_used(), used);
}

TEST_F(ReplicaGangTest, EveryReplicaIsAPodForThePodsPerNodeLimit) {
  auto small = test::gpu_node("n0", 64000, 4, "V100");
  small.max_pods = 2;
  build({0, 0}, {small, test::gpu_node("n1", 64000, 4, "V100")});
  const auto d = place("most-free", gpus(4));
  ASSERT_TRUE(d.placed);
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(0U, 2), On(1U, 2)));
  EXPECT_EQ(c->pod_count(0), 2);
  EXPECT_EQ(c->pod_count(1), 2);
}

TEST_F(ReplicaGangTest, GpuModelConstraintOnAHeterogeneousCluster) {
  build({0, 0, 2}, {test::gpu_node("a0", 64000, 4, "A100"), test::gpu_node("v0", 64000, 4, "V100"),
                    test::gpu_node("a1", 64000, 4, "A100")});
  ReplicaGang g = gpus(5);
  g.replica.allowed_models = {"A100"};
  const auto d = place("most-free", g);
  ASSERT_TRUE(d.placed);
  EXPECT_THAT(spread_of(d), ::testing::ElementsAre(On(0U, 4), On(2U, 1)));
  // One A100 is left and the V100s are free: two more A100 replicas wait, and the V100 node is
  // counted as the wrong model.
  g.count = 2;
  const auto wait = place("most-free", g);
  EXPECT_FALSE(wait.placed);
  EXPECT_EQ(wait.placeable, 1);
  EXPECT_EQ(wait.failure.diagnosis.nodes_by_filter[filter_index(filter_id("gpu-model"))], 1U);
  EXPECT_EQ(c->fully_free_gpus(2), 1);
}

TEST_F(ReplicaGangTest, SharedGpuReplicasUnderTheDefaultPolicy) {
  build({0, 0});
  ReplicaGang g;
  g.replica = test::pod("r", 4000, 1, 500);
  g.count = 3;
  const auto d = place("efd", g);
  ASSERT_TRUE(d.placed);
  ASSERT_EQ(d.placements.size(), 3U) << "a share of a GPU is one placement per replica";
  for (const auto& p : d.placements) {
    EXPECT_EQ(p.gpu_milli, 500);
    EXPECT_EQ(p.gpus.size(), 1U);
  }
  EXPECT_EQ(c->gpu_milli_used(), 1500);
  release_placements(*c, d.placements);
  EXPECT_EQ(c->gpu_milli_used(), 0);
}

}  // namespace
}  // namespace gpuorch::sched
