// MIG geometry: the reference's placement table (§3.1), its valid and invalid examples, the
// instance limits, and the choice of the layout that leaves the most room.
#include "gpuorch/mig/layout.hpp"

#include <gtest/gtest.h>

namespace gpuorch::mig {
namespace {

const GpuModel& h100() { return *model("H100-80GB"); }

TEST(MigProfiles, EveryModelHasTheSevenShapes) {
  ASSERT_EQ(models().size(), 5u);
  for (const auto& m : models()) {
    ASSERT_EQ(m.profiles.size(), 7u) << m.name;
    EXPECT_EQ(m.profiles.front().starts, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  }
  EXPECT_NE(model("A100-40GB")->profile("1g.5gb+me"), nullptr);
  EXPECT_NE(model("A100-80GB")->profile("1g.20gb"), nullptr);
  EXPECT_NE(model("H100-94GB")->profile("3g.47gb"), nullptr);
  EXPECT_NE(model("H200-141GB")->profile("7g.141gb"), nullptr);
  EXPECT_NE(model("H200-141GB")->profile("1g.35gb"), nullptr);
  const Profile& g3 = *h100().profile("3g.40gb");
  EXPECT_EQ(g3.id, 9);
  EXPECT_EQ(g3.memory_slices, 4);
  EXPECT_EQ(g3.compute_slices, 3);
  EXPECT_EQ(g3.starts, (std::vector<int>{0, 4}));
  EXPECT_EQ(h100().profile("1g.20gb")->starts, (std::vector<int>{0, 2, 4, 6}));
}

TEST(MigProfiles, ModelFromMarketingName) {
  EXPECT_EQ(model_for_gpu("NVIDIA H100 80GB HBM3", 81559)->name, "H100-80GB");
  EXPECT_EQ(model_for_gpu("NVIDIA H100 NVL", 95830)->name, "H100-94GB");
  EXPECT_EQ(model_for_gpu("NVIDIA H200", 143771)->name, "H200-141GB");
  EXPECT_EQ(model_for_gpu("NVIDIA A100-SXM4-40GB", 40960)->name, "A100-40GB");
  EXPECT_EQ(model_for_gpu("NVIDIA A100-SXM4-80GB", 81920)->name, "A100-80GB");
  EXPECT_EQ(model_for_gpu("Tesla T4", 15360), nullptr);
  EXPECT_EQ(model_for_gpu("AMD Instinct MI250", 65536), nullptr);
}

TEST(MigProfiles, MixedResourceNames) {
  EXPECT_EQ(mixed_resource_name("1g.10gb"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(mixed_resource_name("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
}

TEST(MigLayout, ValidExamplesFromTheGuide) {
  EXPECT_EQ(check(h100(), {{"3g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}}), std::nullopt);
  EXPECT_EQ(check(h100(), {{"4g.40gb", 0}, {"3g.40gb", 4}}), std::nullopt);
  Layout seven;
  for (int s = 0; s < 7; ++s) seven.push_back({"1g.10gb", s});
  EXPECT_EQ(check(h100(), seven), std::nullopt);
  EXPECT_EQ(free_memory_slices(h100(), seven), 1);  // slice 7 stays unused
  EXPECT_EQ(room(h100(), seven), 0);
  EXPECT_EQ(check(h100(), {{"7g.80gb", 0}}), std::nullopt);
}

TEST(MigLayout, InvalidLayoutsAreRejectedWithAReason) {
  EXPECT_EQ(check(h100(), {{"2g.20gb", 6}}),
            "2g.20gb cannot start at memory slice 6 (allowed: 0, 2, 4)");
  EXPECT_EQ(check(h100(), {{"1g.10gb", 7}}),
            "1g.10gb cannot start at memory slice 7 (allowed: 0, 1, 2, 3, 4, 5, 6)");
  EXPECT_EQ(check(h100(), {{"3g.40gb", 0}, {"2g.20gb", 4}, {"2g.20gb", 6}}),
            "2g.20gb cannot start at memory slice 6 (allowed: 0, 2, 4)");
  EXPECT_EQ(check(h100(), {{"3g.40gb", 0}, {"2g.20gb", 2}}),
            "2g.20gb@2 overlaps 3g.40gb@0 (memory slices 2-3 and 0-3)");
  EXPECT_EQ(check(h100(), {{"1g.10gb+me", 0}, {"1g.10gb+me", 1}}),
            "more than 1 instance of 1g.10gb+me");
  EXPECT_EQ(check(h100(), {{"5g.50gb", 0}}), "H100-80GB has no MIG profile 5g.50gb");
  EXPECT_EQ(check(h100(), {{"7g.80gb", 0}, {"1g.10gb", 0}}),
            "1g.10gb@0 overlaps 7g.80gb@0 (memory slices 0-0 and 0-7)");
}

TEST(MigLayout, FitsInSomeOrder) {
  EXPECT_TRUE(fits({"1g.10gb", "2g.20gb", "3g.40gb"}, h100()));
  EXPECT_TRUE(fits({"3g.40gb", "4g.40gb"}, h100()));
  EXPECT_TRUE(fits({"1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb"}, h100()));
  EXPECT_FALSE(fits({"4g.40gb", "4g.40gb"}, h100()));
  EXPECT_FALSE(fits({"3g.40gb", "3g.40gb", "1g.10gb"}, h100()));
  EXPECT_FALSE(fits({"2g.20gb", "2g.20gb", "2g.20gb", "2g.20gb"}, h100()));
  const auto r = best_layout(h100(), {"7g.80gb", "1g.10gb"});
  EXPECT_FALSE(r.layout);
  EXPECT_EQ(r.reason, "7g.80gb + 1g.10gb does not fit on H100-80GB");
}

TEST(MigLayout, BestLayoutLeavesTheMostRoom) {
  // No single 1g start leaves more placements than the one chosen.
  const auto one = best_layout(h100(), {"1g.10gb"});
  ASSERT_TRUE(one.layout);
  for (int s = 0; s < 7; ++s) {
    EXPECT_LE(room(h100(), {{"1g.10gb", s}}), room(h100(), *one.layout)) << "1g.10gb@" << s;
  }
  EXPECT_EQ(to_string(*one.layout), "1g.10gb@6");
  // 3g.40gb next to an existing 2g@0 must go to 4 (0 is taken).
  const auto next = best_layout(h100(), {"3g.40gb"}, {{"2g.20gb", 0}});
  ASSERT_TRUE(next.layout);
  EXPECT_EQ(to_string(*next.layout), "2g.20gb@0 3g.40gb@4");
  // A 2g beside a 3g@0 can only go to 4; 1g.10gb, 1g.10gb+me and 1g.20gb can still start at 6.
  const auto two = best_layout(h100(), {"2g.20gb"}, {{"3g.40gb", 0}});
  ASSERT_TRUE(two.layout);
  EXPECT_EQ(to_string(*two.layout), "3g.40gb@0 2g.20gb@4");
  EXPECT_EQ(room(h100(), *two.layout), 3);
  const auto bad = best_layout(h100(), {"1g.10gb"}, {{"2g.20gb", 6}});
  EXPECT_EQ(bad.reason, "2g.20gb cannot start at memory slice 6 (allowed: 0, 2, 4)");
}

}  // namespace
}  // namespace gpuorch::mig
