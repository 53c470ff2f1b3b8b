// Random (protocol §7): one feasible node drawn uniformly scores 100, the others 0; a shared-GPU
// pod gets a GPU drawn uniformly among those it fits on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using ::testing::ElementsAre;

std::vector<cluster::NodeSpec> nodes() {
  return {gpu_node("a", 64000, 4), gpu_node("cpu", 64000, 0), gpu_node("b", 64000, 4),
          gpu_node("c", 64000, 2), gpu_node("t4", 64000, 2, "T4")};
}

TEST(RandomPolicy, OneFeasibleNodeGetsAHundred) {
  PolicyBench b("random", nodes());
  for (int i = 0; i < 20; ++i) {
    const auto s = b.scores(b.req(1000, 1, 500, {"G2"}));
    EXPECT_FALSE(s[1].has_value());
    EXPECT_FALSE(s[4].has_value());
    int hundreds = 0;
    int zeroes = 0;
    for (const auto& v : s) {
      if (!v) continue;
      hundreds += *v == 100 ? 1 : 0;
      zeroes += *v == 0 ? 1 : 0;
    }
    EXPECT_EQ(hundreds, 1);
    EXPECT_EQ(zeroes, 2);
  }
}

TEST(RandomPolicy, ChoosesEveryFeasibleNodeUniformly) {
  PolicyBench b("random", nodes(), {}, 7);
  std::map<cluster::NodeIndex, int> hits;
  for (int i = 0; i < 3000; ++i) ++hits[b.scheduler.decide(b.req(1000, 2, 1000)).placement.node];
  EXPECT_EQ(hits.count(1), 0U);  // no GPU
  for (const cluster::NodeIndex n : {0U, 2U, 3U, 4U}) {
    EXPECT_GT(hits[n], 600) << "node " << n;  // 750 expected
    EXPECT_LT(hits[n], 900) << "node " << n;
  }
}

TEST(RandomPolicy, SharedPodGetsAUniformFittingGpu) {
  PolicyBench b("random", {gpu_node("n", 64000, 4)}, {}, 3);
  b.apply(0, 0, 800, {1});  // [1000, 200, 600, 1000]
  b.apply(0, 0, 400, {2});
  std::map<int, int> hits;
  for (int i = 0; i < 3000; ++i) {
    const auto gpus = b.scheduler.decide(b.req(0, 1, 500)).placement.gpus;
    ASSERT_EQ(gpus.size(), 1U);
    ++hits[gpus[0]];
  }
  EXPECT_EQ(hits.count(1), 0U);  // 200 left: does not fit
  for (const int g : {0, 2, 3}) {
    EXPECT_GT(hits[g], 850) << "GPU " << g;  // 1000 expected
    EXPECT_LT(hits[g], 1150) << "GPU " << g;
  }
}

TEST(RandomPolicy, WholeGpuPodsTakeTheLowestFreeGpus) {
  PolicyBench b("random", {gpu_node("n", 64000, 4)});
  b.apply(0, 0, 300, {0});
  EXPECT_THAT(b.scheduler.decide(b.req(0, 2, 1000)).placement.gpus, ElementsAre(1, 2));
}

TEST(RandomPolicy, SameSeedSameChoices) {
  PolicyBench a("random", nodes(), {}, 42);
  PolicyBench b("random", nodes(), {}, 42);
  PolicyBench c("random", nodes(), {}, 43);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    const auto x = a.scheduler.schedule(a.req(1000, 1, 100)).placement;
    const auto y = b.scheduler.schedule(b.req(1000, 1, 100)).placement;
    const auto z = c.scheduler.schedule(c.req(1000, 1, 100)).placement;
    EXPECT_EQ(x.node, y.node);
    EXPECT_EQ(x.gpus, y.gpus);
    differs = differs || x.node != z.node || x.gpus != z.gpus;
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace gpuorch::sched
