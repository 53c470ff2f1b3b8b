// Gangs in the scheduler core: all or nothing (a gang that cannot run holds nothing), and the
// lowest topology level that can hold the whole gang, on the fewest nodes.
#include "gpuorch/sched/gang.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpuorch/sched/policy.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

// Two racks of four 8-GPU nodes in one block.
std::vector<cluster::NodeSpec> racks() {
  std::vector<cluster::NodeSpec> nodes;
  for (int i = 0; i < 8; ++i) {
    auto n = test::gpu_node(fmt::format("n{}", i), 96000, 8, "A100");
    n.labels = {{"block", "b1"}, {"rack", i < 4 ? "r1" : "r2"}, {"hostname", n.name}};
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::vector<workload::PodSpec> gang(int pods, int gpus) {
  std::vector<workload::PodSpec> g;
  for (int i = 0; i < pods; ++i) g.push_back(test::pod(fmt::format("w{}", i), 8000, gpus, 1000));
  return g;
}

class GangTest : public ::testing::Test {
 protected:
  cluster::Cluster c{racks()};
  std::unique_ptr<Policy> policy = make_policy("best-fit", PolicyContext{&c});
  Scheduler s{c, *policy};
  RequestResolver resolver{c};
  const std::vector<std::string> levels{"block", "rack", "hostname"};
  void occupy(cluster::NodeIndex n) {
    c.apply(test::placement(n, 1000, 1000, {0, 1, 2, 3, 4, 5, 6, 7}));
  }
};

TEST_F(GangTest, AllOrNothing) {
  for (cluster::NodeIndex n = 3; n < 8; ++n) occupy(n);  // only n0..n2 have room
  const auto used = c.gpu_milli_used();
  const GangDecision d = place_gang(c, s, resolver, gang(4, 8), levels);
  EXPECT_FALSE(d.placed);
  EXPECT_EQ(d.failed_member, 3U);
  EXPECT_EQ(d.failure.outcome, Outcome::kWaiting);
  EXPECT_EQ(c.gpu_milli_used(), used) << "a gang that cannot run holds nothing";
  for (cluster::NodeIndex n = 0; n < 3; ++n) EXPECT_EQ(c.fully_free_gpus(n), 8);
  // A 4th node frees up: all four go, under one rack.
  c.release(test::placement(3, 1000, 1000, {0, 1, 2, 3, 4, 5, 6, 7}));
  const GangDecision ok = place_gang(c, s, resolver, gang(4, 8), levels);
  ASSERT_TRUE(ok.placed);
  EXPECT_EQ(ok.domain, "rack=r1");
  for (cluster::NodeIndex n = 0; n < 4; ++n) EXPECT_EQ(c.fully_free_gpus(n), 0);
}

TEST_F(GangTest, LowestLevelThatHoldsItWhole) {
  // Rack r1 has 3 free nodes, r2 has 4: a 4 x 8-GPU gang goes to r2 whole, not across racks,
  // although the policy alone would take r1's nodes first.
  occupy(0);
  const GangDecision d = place_gang(c, s, resolver, gang(4, 8), levels);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.domain, "rack=r2");
  for (const auto& p : d.placements) EXPECT_GE(p.node, 4U);
  // Small members share one host when one can hold them all (the hostname level).
  const GangDecision small = place_gang(c, s, resolver, gang(2, 2), levels);
  ASSERT_TRUE(small.placed);
  EXPECT_EQ(small.domain.rfind("hostname=", 0), 0U) << small.domain;
  EXPECT_EQ(small.placements[0].node, small.placements[1].node);
}

TEST_F(GangTest, NoLevelsMeansAnywhere) {
  for (cluster::NodeIndex n = 1; n < 8; n += 2) occupy(n);  // every other node
  const GangDecision d = place_gang(c, s, resolver, gang(4, 8), {});
  ASSERT_TRUE(d.placed);
  EXPECT_TRUE(d.domain.empty());
  // With levels, neither rack holds four free nodes and the block does.
  for (const auto& p : d.placements) c.release(p);
  const GangDecision b = place_gang(c, s, resolver, gang(4, 8), levels);
  ASSERT_TRUE(b.placed);
  EXPECT_EQ(b.domain, "block=b1");
}

}  // namespace
}  // namespace gpuorch::sched
