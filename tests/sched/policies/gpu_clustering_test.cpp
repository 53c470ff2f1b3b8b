// GpuClustering (protocol §7): base 75 (only the pod's kind on the node), 50 (its kind among
// others), 25 (no GPU pods), 0 (only other kinds), plus floor(25 * (8000 - sum R) / 8000).
// Kinds: a shared GPU, 1, 2, 4, 8 whole GPUs; CPU-only pods neither count nor score.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using test::Scores;
using ::testing::ElementsAre;

class GpuClusteringTest : public ::testing::Test {
 protected:
  GpuClusteringTest() {
    b.apply(1, 0, 500, {0});  // node 1: one shared-GPU pod (500 used)
    b.apply(2, 0, 500, {0});  // node 2: a shared-GPU pod and a 1-GPU pod (1500 used)
    b.apply(2, 0, 1000, {1});
    b.apply(3, 0, 1000, {0, 1});  // node 3: one 2-GPU pod (2000 used)
  }
  PolicyBench b{"gpu-clustering",
                {gpu_node("empty", 64000, 8), gpu_node("share", 64000, 8),
                 gpu_node("mixed", 64000, 8), gpu_node("two", 64000, 8)}};
};

TEST_F(GpuClusteringTest, SharedPodGoesToTheNodeOfSharedPods) {
  // 25+0, 75+floor(1.5625), 50+floor(4.6875), 0+floor(6.25)
  EXPECT_EQ(b.scores(b.req(1000, 1, 300)), (Scores{25, 76, 54, 6}));
  const Decision d = b.scheduler.decide(b.req(1000, 1, 300));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));  // best fit: the GPU with 500 left
}

TEST_F(GpuClusteringTest, WholeGpuKindsIncludeTheCount) {
  EXPECT_EQ(b.scores(b.req(1000, 2, 1000)), (Scores{25, 1, 4, 81}));
  EXPECT_EQ(b.scores(b.req(1000, 1, 1000)), (Scores{25, 1, 54, 6}));
  EXPECT_EQ(b.scores(b.req(1000, 4, 1000)), (Scores{25, 1, 4, 6}));
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 2, 1000)).placement.node, 3U);
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 2, 1000)).placement.gpus, ElementsAre(2, 3));
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 1, 1000)).placement.node, 2U);
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 4, 1000)).placement.node, 0U);
}

TEST_F(GpuClusteringTest, CpuOnlyPodsScoreZeroAndDoNotCount) {
  EXPECT_EQ(b.scores(b.req(1000, 0, 0)), (Scores{0, 0, 0, 0}));
  b.scheduler.set_tie_break_rank({3, 2, 1, 0});
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 0, 0)).placement.node, 3U);
  b.apply(0, 8000, 0, {});  // a CPU-only pod on the empty node: still "no GPU pods"
  EXPECT_EQ(b.scores(b.req(1000, 1, 300))[0], 25);
}

TEST_F(GpuClusteringTest, ReleasingTheLastPodOfAKindForgetsIt) {
  b.cluster.release(test::placement(2, 0, 1000, {1}));  // node 2 keeps only its shared pod
  EXPECT_EQ(b.scores(b.req(1000, 1, 300))[2], 75 + 1);
  EXPECT_EQ(b.scores(b.req(1000, 1, 1000))[2], 0 + 1);
}

}  // namespace
}  // namespace gpuorch::sched
