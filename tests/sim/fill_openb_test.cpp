// sim fill on the real openb default trace against the study's published means (protocol §8).
// One seed is not the mean over ten (seed spread at x = 130 is about +-0.3..1 point), so the
// tolerance is one point. Heavy: skipped when ../shared/openb is absent; fewer runs under
// sanitizers.
#include <gtest/gtest.h>

#include "gpuorch/io/openb.hpp"
#include "gpuorch/sim/fill.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

FillInput openb_trace(const std::filesystem::path& dir, const std::string& name) {
  auto nodes = io::load_openb_nodes((dir / "openb_node_list_gpu_node.csv").string());
  auto trace = io::load_openb_pods((dir / ("openb_pod_list_" + name + ".csv")).string());
  return make_fill_input("openb_pod_list_" + name, std::move(nodes), std::move(trace.pods));
}

FillInput default_trace(const std::filesystem::path& dir) { return openb_trace(dir, "default"); }

void expect_near_published(const FillRun& r, double at100, double at130) {
  ASSERT_TRUE(r.curves.alloc[100].has_value());
  ASSERT_TRUE(r.curves.alloc[130].has_value());
  EXPECT_NEAR(*r.curves.alloc[100], at100, 1.0);
  EXPECT_NEAR(*r.curves.alloc[130], at130, 1.0);
  EXPECT_EQ(r.gpu_milli_capacity, 6212000);
  // Tuned to 130 %: about 10.8k arrivals for the default trace.
  EXPECT_GT(r.arrived_pods, 10000U);
  EXPECT_LT(r.arrived_pods, 11600U);
  EXPECT_NEAR(static_cast<double>(r.arrived_gpu_milli) / 6212000.0, 1.3, 0.002);
}

TEST(FillOpenb, FgdOnTheDefaultTraceMatchesThePublishedMean) {
  GPUORCH_REQUIRE_OPENB(dir);
  const FillInput in = default_trace(dir);
  ASSERT_EQ(in.nodes.size(), 1213U);
  ASSERT_EQ(in.target.classes.size(), 35U);
  expect_near_published(run_fill(in, "fgd", 42, FillOptions{}), 95.23, 95.39);
}

TEST(FillOpenb, BestFitOnTheDefaultTraceMatchesThePublishedMean) {
  if (test::kSanitized) GTEST_SKIP() << "one openb fill run is enough under sanitizers";
  GPUORCH_REQUIRE_OPENB(dir);
  expect_near_published(run_fill(default_trace(dir), "best-fit", 42, FillOptions{}), 92.86, 93.08);
}

}  // namespace
}  // namespace gpuorch::sim

namespace gpuorch::sim {
namespace {

// gpuspec20: pods that need a scarce GPU model arrive after any-model pods took it; moving those
// pods to another model is what consolidation is for (docs/policies.md, "Consolidation"). The
// policy is efd with the target and scarce-model price it had before issue 16 (75 % of pods, the
// old price) and the whole-fill feeding limit at score_scale 1350 (before its ninth session): the
// current price keeps the scarce models for their pods, so fewer need moving. (With today's
// defaults for the rest, seed 42 rescues 50 pods and gains at x = 100, 96.03 -> 96.04, but ends
// 500 milli lower: one seed's end state is not what this test is about, so the policy is pinned.)
TEST(FillOpenb, ConsolidationPlacesScarceModelPodsByMovingOthers) {
  if (test::kSanitized) GTEST_SKIP() << "one openb fill run is enough under sanitizers";
  GPUORCH_REQUIRE_OPENB(dir);
  const FillInput in = openb_trace(dir, "gpuspec20");
  FillOptions moves;
  moves.consolidation.max_moves = 2;
  const char* policy =
      "efd:popularity=0.75:scarcity_weight=0.5:scarcity_history=0:scarcity_cap=0:feed_tail=0:"
      "score_scale=1350";
  const FillRun without = run_fill(in, policy, 42, FillOptions{});
  const FillRun with = run_fill(in, policy, 42, moves);
  EXPECT_EQ(without.rescued_pods, 0U);
  EXPECT_GT(with.rescued_pods, 20U);
  EXPECT_GE(with.moved_pods, with.rescued_pods);
  EXPECT_LE(with.moved_pods, 2 * with.rescued_pods);
  // Seed 42: 95.93 -> 96.01 at x = 100, 5,968,190 -> 5,970,430 milli at the end (2 moves: 55
  // pods rescued, 55 moved).
  EXPECT_GT(*with.curves.alloc[100], *without.curves.alloc[100]);
  EXPECT_GT(with.used_gpu_milli, without.used_gpu_milli);
}

}  // namespace
}  // namespace gpuorch::sim
