// BestFit (protocol §7): raw = floor(100 * (1 - [0.5 (C_left - c)/128000 + 0.5 (sum R - k
// d)/8000])), then min-max normalised over the feasible nodes in integers: (raw - min) * 100 / (max
// - min), all 0 when every raw score is equal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/policy_bench.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::PolicyBench;
using test::Scores;
using ::testing::ElementsAre;

TEST(BestFitPolicy, IntegerMinMaxNormalisation) {
  PolicyBench b("best-fit", {gpu_node("a", 128000, 8), gpu_node("b", 64000, 4),
                             gpu_node("c", 32000, 2), gpu_node("d", 96000, 8)});
  // raw: a 9 (9.375), b 59 (59.375), c 84 (84.375), d 21 (21.875); min 9, range 75.
  // b: 50*100/75 = 66.67 -> 66; d: 12*100/75 = 16.
  EXPECT_EQ(b.scores(b.req(16000, 1, 500)), (Scores{0, 66, 100, 16}));
  const Decision d = b.scheduler.decide(b.req(16000, 1, 500));
  EXPECT_EQ(d.placement.node, 2U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));
}

TEST(BestFitPolicy, WholeGpuDemandCountsEveryGpu) {
  PolicyBench b("best-fit", {gpu_node("a", 64000, 8), gpu_node("b", 64000, 4)});
  // a: 0.5*32000/128000 + 0.5*4000/8000 = 0.375 -> 62; b: 0.125 + 0 -> 87.
  EXPECT_EQ(b.scores(b.req(32000, 4, 1000)), (Scores{0, 100}));
  // Only a has 8 GPUs: a single feasible node scores 0.
  EXPECT_EQ(b.scores(b.req(32000, 8, 1000)), (Scores{0, std::nullopt}));
}

TEST(BestFitPolicy, AllEqualScoresAreZeroAndTheRankDecides) {
  PolicyBench b("best-fit",
                {gpu_node("a", 64000, 4), gpu_node("b", 64000, 4), gpu_node("c", 64000, 4)});
  EXPECT_EQ(b.scores(b.req(1000, 1, 500)), (Scores{0, 0, 0}));
  b.scheduler.set_tie_break_rank({2, 0, 1});
  EXPECT_EQ(b.scheduler.decide(b.req(1000, 1, 500)).placement.node, 1U);
}

TEST(BestFitPolicy, FullerNodeWinsAfterPlacements) {
  PolicyBench b("best-fit", {gpu_node("a", 64000, 4), gpu_node("b", 64000, 4)});
  b.apply(1, 8000, 700, {2});
  const Decision d = b.scheduler.schedule(b.req(1000, 1, 300));
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(2));  // exactly fills the 300 left
  EXPECT_EQ(b.cluster.gpu_milli_left(1)[2], 0);
}

}  // namespace
}  // namespace gpuorch::sched
