// GpuPacking (protocol §7), three cases: an empty node scores max(33 - free GPUs, free GPUs); a
// used node where the pod needs a fully free GPU max(50 - free GPUs used, 33); a pod that fits
// on partly used GPUs max(100 - floor(sum floor(R * 100 / 1000) / 10), 50). Picks GPUs
// smallest-left first. CPU-only pods score 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using test::Scores;
using ::testing::ElementsAre;

class GpuPackingTest : public ::testing::Test {
 protected:
  GpuPackingTest() {
    b.apply(1, 0, 500, {0});   // [500, 1000, 1000, 1000]
    b.apply(2, 0, 1000, {0});  // [0, 1000, 1000, 1000]
    b.apply(3, 0, 200, {0});   // [800, 1000]
  }
  PolicyBench b{
      "gpu-packing",
      {gpu_node("empty8", 64000, 8), gpu_node("half", 64000, 4), gpu_node("whole", 64000, 4),
       gpu_node("two", 64000, 2), gpu_node("one", 64000, 1), gpu_node("empty2", 64000, 2)}};
};

TEST_F(GpuPackingTest, SharedPodPrefersAPartlyUsedGpu) {
  // empty8 33-8; half 100-50/10; whole 50-1; two 100-80/10; one 33-1; empty2 33-2
  EXPECT_EQ(b.scores(b.req(1000, 1, 300)), (Scores{25, 95, 49, 92, 32, 31}));
  const Decision d = b.scheduler.decide(b.req(1000, 1, 300));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));
}

TEST_F(GpuPackingTest, WholeGpuPodPrefersAFreeGpuOnAUsedNode) {
  EXPECT_EQ(b.scores(b.req(1000, 1, 1000)), (Scores{25, 49, 49, 49, 32, 31}));
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 1, 1000)).placement.node, 1U);  // tie: node order
  b.scheduler.set_tie_break_rank({0, 5, 4, 1, 2, 3});
  const Decision d = b.scheduler.decide(b.req(1000, 1, 1000));
  EXPECT_EQ(d.placement.node, 3U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(1));
  EXPECT_EQ(b.scores(b.req(1000, 2, 1000)), (Scores{25, 48, 48, std::nullopt, std::nullopt, 31}));
}

TEST_F(GpuPackingTest, PartlyUsedGpusAreTakenSmallestFirst) {
  PolicyBench p("gpu-packing", {gpu_node("n", 64000, 4), gpu_node("m", 64000, 2)});
  p.apply(0, 0, 100, {0});  // [900, 400, 1000, 1000]
  p.apply(0, 0, 600, {1});
  p.apply(1, 0, 445, {0});  // [555, 1000]
  // n: the 400 GPU is the smallest that fits: 100 - 40/10. m: floor(55.5) = 55 -> 100 - 5.
  EXPECT_EQ(p.scores(p.req(0, 1, 300)), (Scores{96, 95}));
  const Decision d = p.scheduler.decide(p.req(0, 1, 300));
  EXPECT_EQ(d.placement.node, 0U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(1));
}

TEST_F(GpuPackingTest, EmptyNodeScoreIsAtLeastItsFreeGpus) {
  PolicyBench p("gpu-packing", {gpu_node("g20", 64000, 20), gpu_node("g16", 64000, 16)});
  EXPECT_EQ(p.scores(p.req(0, 1, 500)), (Scores{20, 17}));
}

TEST_F(GpuPackingTest, CpuOnlyPodsScoreZero) {
  EXPECT_EQ(b.scores(b.req(1000, 0, 0)), (Scores{0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace gpuorch::sched
