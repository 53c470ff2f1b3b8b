// FGD (protocol §5): score = floor(100 * sigmoid((F - F') / 1000)) with F the node's
// fragmentation before and F' after the placement; a shared-GPU pod tries every fitting GPU and
// keeps the first one with the best score; whole-GPU pods take the lowest-index free GPUs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using test::Scores;
using ::testing::ElementsAre;

workload::TargetWorkload one_class(std::int64_t cpu, std::int64_t milli, int gpus) {
  workload::TargetWorkload t;
  workload::TaskClass c;
  c.cpu_milli = cpu;
  c.gpu_milli = milli;
  c.gpu_count = gpus;
  c.weight = 1.0;
  t.classes.push_back(c);
  return t;
}

// Target: one class of (1000 CPU, 500 milli on one GPU).
PolicyBench two_nodes() {
  PolicyBench b("fgd", {gpu_node("empty", 64000, 4), gpu_node("used", 64000, 4)},
                one_class(1000, 500, 1));
  b.apply(1, 0, 700, {1});  // [1000, 300, 1000, 1000]: F = 300
  return b;
}

TEST(FgdPolicy, PicksTheNodeAndGpuThatReduceFragmentation) {
  PolicyBench b = two_nodes();
  // empty: F = F' = 0 -> 50. used: on GPU 1, F' = 0, (300 - 0)/1000 -> floor(57.44) = 57.
  EXPECT_EQ(b.scores(b.req(1000, 1, 300)), (Scores{50, 57}));
  const Decision d = b.scheduler.decide(b.req(1000, 1, 300));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(1));
}

TEST(FgdPolicy, OwnGpuChoiceDiffersFromBestFit) {
  const auto target = one_class(1000, 500, 1);
  PolicyBench fgd("fgd", {gpu_node("n", 64000, 4)}, target);
  PolicyBench best("best-fit", {gpu_node("n", 64000, 4)}, target);
  fgd.apply(0, 0, 400, {2});  // [1000, 1000, 600, 1000]
  best.apply(0, 0, 400, {2});
  // GPU 0 -> [600, 1000, 600, 1000]: F' = 0 -> 50; GPU 2 -> 200 left, F' = 200 -> 45.
  const Decision d = fgd.scheduler.decide(fgd.req(1000, 1, 400));
  EXPECT_EQ(fgd.scores(fgd.req(1000, 1, 400)), (Scores{50}));
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));
  EXPECT_THAT(best.scheduler.decide(best.req(1000, 1, 400)).placement.gpus, ElementsAre(2));
}

TEST(FgdPolicy, QuantisedScores) {
  // dF = -100 -> 52.
  PolicyBench b("fgd", {gpu_node("n", 64000, 4)}, one_class(0, 500, 1));
  b.apply(0, 0, 900, {1});  // [1000, 100, 1000, 1000]: F = 100
  const Decision d = b.scheduler.decide(b.req(0, 1, 100));
  EXPECT_EQ(b.scores(b.req(0, 1, 100)), (Scores{52}));
  EXPECT_THAT(d.placement.gpus, ElementsAre(1));
  // dF = +1000 -> 26: a 1-GPU pod on a 2-GPU node strands the other GPU for a 2-GPU class.
  PolicyBench two("fgd", {gpu_node("n", 64000, 2)}, one_class(0, 1000, 2));
  EXPECT_EQ(two.scores(two.req(0, 1, 1000)), (Scores{26}));
  // dF = +3000 -> 4.
  PolicyBench four("fgd", {gpu_node("n", 64000, 4)}, one_class(0, 1000, 4));
  EXPECT_EQ(four.scores(four.req(0, 1, 1000)), (Scores{4}));
}

TEST(FgdPolicy, WholeGpuPodsTakeTheLowestFreeGpusAndTiesGoByRank) {
  PolicyBench b = two_nodes();
  // empty: F' = 0 = F -> 50; used: [0, 300, 1000, 1000], F' = 300 = F -> 50.
  EXPECT_EQ(b.scores(b.req(1000, 1, 1000)), (Scores{50, 50}));
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 1, 1000)).placement.node, 0U);
  b.scheduler.set_tie_break_rank({1, 0});
  const Decision d = b.scheduler.decide(b.req(1000, 2, 1000));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0, 2));
}

TEST(FgdPolicy, CpuOnlyPodAvoidsStrandingGpus) {
  PolicyBench b("fgd", {gpu_node("tight", 1500, 4), gpu_node("roomy", 64000, 4)},
                one_class(1000, 500, 1));
  // tight: 500 CPU left after the pod, the class no longer fits: F' = 4000 -> floor(1.8) = 1.
  EXPECT_EQ(b.scores(b.req(1000, 0, 0)), (Scores{1, 50}));
  const Decision d = b.scheduler.decide(b.req(1000, 0, 0));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_TRUE(d.placement.gpus.empty());
}

TEST(FgdPolicy, ScoresFollowTheNodeState) {
  PolicyBench b = two_nodes();
  EXPECT_EQ(b.scores(b.req(1000, 1, 300))[1], 57);
  b.apply(1, 0, 300, {1});  // [1000, 0, 1000, 1000]: F = 0
  EXPECT_EQ(b.scores(b.req(1000, 1, 300))[1], 50);
  b.cluster.release(test::placement(1, 0, 300, {1}));
  EXPECT_EQ(b.scores(b.req(1000, 1, 300))[1], 57);
}

TEST(FgdPolicy, NeedsATargetWorkload) {
  cluster::Cluster c({gpu_node("n", 1000, 1)});
  base::Rng rng(1);
  PolicyContext ctx;
  ctx.cluster = &c;
  ctx.rng = &rng;
  EXPECT_EQ(test::input_error([&] { make_policy("fgd", ctx); }),
            "policy 'fgd' needs a target workload");
}

}  // namespace
}  // namespace gpuorch::sched
