#include "gpuorch/workload/target_workload.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "support/test_support.hpp"

namespace gpuorch::workload {
namespace {

using test::pod;
using ::testing::ElementsAre;

std::vector<PodSpec> repeat(const PodSpec& p, int n) {
  std::vector<PodSpec> out;
  for (int i = 0; i < n; ++i) {
    PodSpec c = p;
    c.name = fmt::format("{}-{}", p.name, i);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<PodSpec> concat(std::initializer_list<std::vector<PodSpec>> parts) {
  std::vector<PodSpec> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TypicalPods, MostPopularFirstKeptUntilThresholdCrossed) {
  // 100 pods: 50 + 30 + 15 + 4 + 1. 95 % is reached by the third key (50+30+15 = 95).
  const auto history =
      concat({repeat(pod("a", 1000, 1, 500), 50), repeat(pod("b", 2000, 1, 1000), 30),
              repeat(pod("c", 3000, 0, 0), 15), repeat(pod("d", 4000, 2, 1000), 4),
              repeat(pod("e", 5000, 1, 200), 1)});
  const TargetWorkload t = typical_pods(history);
  ASSERT_EQ(t.classes.size(), 3U);
  EXPECT_EQ(t.classes[0].cpu_milli, 1000);
  EXPECT_EQ(t.classes[0].gpu_milli, 500);
  EXPECT_EQ(t.classes[0].gpu_count, 1);
  EXPECT_EQ(t.classes[0].count, 50);
  EXPECT_DOUBLE_EQ(t.classes[0].weight, 50.0 / 95.0);
  EXPECT_EQ(t.classes[1].count, 30);
  EXPECT_DOUBLE_EQ(t.classes[1].weight, 30.0 / 95.0);
  // The CPU-only class is part of the target workload.
  EXPECT_EQ(t.classes[2].cpu_milli, 3000);
  EXPECT_EQ(t.classes[2].gpu_count, 0);
  EXPECT_EQ(t.classes[2].gpu_milli, 0);
  EXPECT_DOUBLE_EQ(t.classes[2].weight, 15.0 / 95.0);
}

TEST(TypicalPods, TheKeyThatCrossesTheThresholdIsKept) {
  // 50 + 44 = 94 % < 95 %: the next key (5 pods) crosses it and is kept; the last one is not.
  const auto history =
      concat({repeat(pod("a", 1000, 1, 500), 50), repeat(pod("b", 2000, 1, 1000), 44),
              repeat(pod("c", 3000, 1, 300), 5), repeat(pod("d", 4000, 1, 100), 1)});
  const TargetWorkload t = typical_pods(history);
  ASSERT_EQ(t.classes.size(), 3U);
  EXPECT_EQ(t.classes[2].cpu_milli, 3000);
  double sum = 0;
  for (const auto& c : t.classes) sum += c.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(t.classes[2].weight, 5.0 / 99.0);
}

TEST(TypicalPods, TiesGoToTheLargerKey) {
  // Equal counts: ordered by (cpu, milli, count, spec) descending.
  const auto history =
      concat({repeat(pod("a", 1000, 1, 500), 3), repeat(pod("b", 2000, 1, 300), 3),
              repeat(pod("c", 2000, 1, 700), 3), repeat(pod("d", 2000, 2, 1000), 3),
              repeat(pod("e", 2000, 1, 700, 0, {"T4"}), 3)});
  const TargetWorkload t = typical_pods(history, 1.0);
  ASSERT_EQ(t.classes.size(), 5U);
  std::vector<std::tuple<std::int64_t, std::int64_t, int, std::string>> keys;
  for (const auto& c : t.classes) {
    keys.emplace_back(c.cpu_milli, c.gpu_milli, c.gpu_count, join_models(c.allowed_models));
  }
  using K = std::tuple<std::int64_t, std::int64_t, int, std::string>;
  EXPECT_THAT(keys, ElementsAre(K{2000, 1000, 2, ""}, K{2000, 700, 1, "T4"}, K{2000, 700, 1, ""},
                                K{2000, 300, 1, ""}, K{1000, 500, 1, ""}));
}

TEST(TypicalPods, KeyIgnoresMemoryAndDistinguishesModelConstraints) {
  const auto history =
      concat({repeat(pod("a", 1000, 1, 500, 100), 2), repeat(pod("b", 1000, 1, 500, 999), 2),
              repeat(pod("c", 1000, 1, 500, 1, {"V100M16", "V100M32"}), 1)});
  const TargetWorkload t = typical_pods(history, 1.0);
  ASSERT_EQ(t.classes.size(), 2U);
  EXPECT_EQ(t.classes[0].count, 4);
  EXPECT_TRUE(t.classes[0].allowed_models.empty());
  EXPECT_THAT(t.classes[1].allowed_models, ElementsAre("V100M16", "V100M32"));
}

TEST(TypicalPods, EmptyHistoryGivesNoClasses) { EXPECT_TRUE(typical_pods({}).classes.empty()); }

TEST(JoinModels, UsesTheTraceSeparator) {
  EXPECT_EQ(join_models({}), "");
  EXPECT_EQ(join_models({"T4"}), "T4");
  EXPECT_EQ(join_models({"V100M16", "V100M32"}), "V100M16|V100M32");
}

TEST(PodSpec, KindsAndTotalDemand) {
  EXPECT_TRUE(pod("c", 1000, 0, 0).cpu_only());
  EXPECT_FALSE(pod("c", 1000, 0, 0).gpu_share());
  EXPECT_TRUE(pod("s", 1000, 1, 999).gpu_share());
  EXPECT_FALSE(pod("w", 1000, 1, 1000).gpu_share());
  EXPECT_EQ(pod("w", 1000, 4, 1000).total_gpu_milli(), 4000);
  EXPECT_EQ(pod("s", 1000, 1, 250).total_gpu_milli(), 250);
}

}  // namespace
}  // namespace gpuorch::workload
