// The policy registry and the GPU choice every study policy but Random and FGD shares.
#include "gpuorch/sched/policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "support/policy_bench.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::param_name;

using test::gpu_node;
using test::PolicyBench;
using ::testing::ElementsAre;

const std::vector<std::string> kStudyPolicies{"random",      "dot-product", "gpu-clustering",
                                              "gpu-packing", "best-fit",    "fgd"};

TEST(PolicyRegistry, StudyPoliciesInTheStudyOrder) {
  const auto names = policy_names();
  ASSERT_GE(names.size(), kStudyPolicies.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6), kStudyPolicies);
  EXPECT_EQ(study_label("random"), "01-Random");
  EXPECT_EQ(study_label("dot-product"), "02-DotProd");
  EXPECT_EQ(study_label("gpu-clustering"), "03-GpuClustering");
  EXPECT_EQ(study_label("gpu-packing"), "04-GpuPacking");
  EXPECT_EQ(study_label("best-fit"), "05-BestFit");
  EXPECT_EQ(study_label("fgd"), "06-FGD");
  EXPECT_EQ(study_label("nope"), "");
}

TEST(PolicyRegistry, EveryNameMakesThePolicyOfThatName) {
  for (const auto& name : kStudyPolicies) {
    PolicyBench b(name, {gpu_node("n", 64000, 4)});
    EXPECT_EQ(b.policy->name(), name);
  }
}

TEST(PolicyRegistry, UnknownNameIsAnInputError) {
  cluster::Cluster c({gpu_node("n", 1000, 1)});
  PolicyContext ctx;
  ctx.cluster = &c;
  const std::string message = test::input_error([&] { make_policy("tetris", ctx); });
  EXPECT_THAT(message,
              ::testing::StartsWith("unknown policy 'tetris' (known: random, dot-product"));
}

TEST(GpuHelpers, BestFitGpuIsTheSmallestThatFitsLowestIndexOnTies) {
  const std::vector<std::int32_t> left{1000, 300, 500, 500, 0};
  EXPECT_EQ(best_fit_gpu(left, 400), 2);
  EXPECT_EQ(best_fit_gpu(left, 300), 1);
  EXPECT_EQ(best_fit_gpu(left, 501), 0);
  EXPECT_EQ(best_fit_gpu(left, 1000), 0);
  EXPECT_EQ(best_fit_gpu(std::vector<std::int32_t>{200, 100}, 300), -1);
}

TEST(GpuHelpers, LowestFreeGpusAreWhollyFree) {
  const std::vector<std::int32_t> left{999, 1000, 0, 1000, 1000};
  EXPECT_THAT(lowest_free_gpus(left, 2), ElementsAre(1, 3));
  EXPECT_THAT(lowest_free_gpus(left, 3), ElementsAre(1, 3, 4));
  EXPECT_THAT(lowest_free_gpus(left, 4), ElementsAre(1, 3, 4));  // only as many as there are
  EXPECT_TRUE(lowest_free_gpus(left, 0).empty());
}

// The study's "best" GPU selection, shared by DotProd, GpuClustering, GpuPacking and BestFit.
class BestGpuSelection : public ::testing::TestWithParam<std::string> {};

TEST_P(BestGpuSelection, SharedPodsBestFitWholePodsLowestFree) {
  PolicyBench b(GetParam(), {gpu_node("n", 64000, 6)});
  b.apply(0, 0, 700, {1});  // [1000, 300, 500, 500, 1000, 1000]
  b.apply(0, 0, 500, {2});
  b.apply(0, 0, 500, {3});
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 1, 400)).placement.gpus, ElementsAre(2));
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 1, 250)).placement.gpus, ElementsAre(1));
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 1, 700)).placement.gpus, ElementsAre(0));
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 2, 1000)).placement.gpus, ElementsAre(0, 4));
  EXPECT_THAT(b.scheduler.decide(b.req(1000, 0, 0)).placement.gpus, ElementsAre());
}

INSTANTIATE_TEST_SUITE_P(StudyPolicies, BestGpuSelection,
                         ::testing::Values("dot-product", "gpu-clustering", "gpu-packing",
                                           "best-fit"),
                         param_name);

}  // namespace
}  // namespace gpuorch::sched
