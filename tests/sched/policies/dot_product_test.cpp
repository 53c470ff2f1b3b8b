// DotProd (protocol §7): score = floor(100 * (1 - dot / 2)), dot = (C_left/128000)(c/128000) +
// (sum R/8000)(k d/8000); the smallest dot product wins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using test::Scores;
using ::testing::ElementsAre;

PolicyBench bench() {
  return PolicyBench("dot-product", {gpu_node("big", 64000, 4), gpu_node("small", 32000, 2)});
}

TEST(DotProductPolicy, HandComputedScores) {
  PolicyBench b = bench();
  // big: 0.5*0.0625 + 0.5*0.125 = 0.09375 -> 95.3125; small: 0.046875 -> 97.65625.
  EXPECT_EQ(b.scores(b.req(8000, 1, 1000)), (Scores{95, 97}));
  // CPU-only: 0.5*0.125 -> 96.875; 0.25*0.125 -> 98.4375.
  EXPECT_EQ(b.scores(b.req(16000, 0, 0)), (Scores{96, 98}));
  // Shared GPU, no CPU: 0.5*0.0625 -> 98.4375; 0.25*0.0625 -> 99.21875.
  EXPECT_EQ(b.scores(b.req(0, 1, 500)), (Scores{98, 99}));
}

TEST(DotProductPolicy, PicksTheLeastAlignedNode) {
  PolicyBench b = bench();
  const Decision d = b.scheduler.decide(b.req(8000, 1, 1000));
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));
}

TEST(DotProductPolicy, FullerNodeScoresHigher) {
  PolicyBench b = bench();
  b.apply(0, 48000, 1000, {0, 1, 2});  // big now has 16000 CPU and 1000 GPU milli left
  // big: 0.125*0.0625 + 0.125*0.125 = 0.0234375 -> 98.828125.
  EXPECT_EQ(b.scores(b.req(8000, 1, 1000)), (Scores{98, 97}));
  EXPECT_EQ(b.scheduler.decide(b.req(8000, 1, 1000)).placement.node, 0U);
}

}  // namespace
}  // namespace gpuorch::sched
