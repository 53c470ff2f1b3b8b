// Application profiles against the check values computed with the Pollux artifact's own code
// (../shared/reference/timeline-protocol.md §13): 1-D interpolation in the per-GPU batch on
// rotation-normalised placements, the 3-D Qhull interpolation beyond 4 nodes, gradient
// statistics interpolated in the batch, iterations and epoch thresholds.
#include <gtest/gtest.h>

#include "gpuorch/base/error.hpp"
#include "gpuorch/sim/timeline_profile.hpp"
#include "sim/timeline_support.hpp"

namespace gpuorch::sim {
namespace {

TEST(TimelineProfile, PlacementIdIsTheSmallestRotationNotTheSortedOne) {
  const std::vector<int> a{4, 1, 2}, b{4, 2, 1}, c{0, 2, 0, 4};
  EXPECT_EQ(placement_id(a), 124);
  EXPECT_EQ(placement_id(b), 142);
  EXPECT_EQ(placement_id(c), 24);
  EXPECT_EQ(placement_id(std::vector<int>{}), 0);
}

TEST(TimelineProfile, CifarMatchesTheArtifactsCheckValues) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const AppProfile app = AppProfile::load((dir / "apps").string(), "cifar10");
  EXPECT_EQ(app.init_batch(), 128);
  EXPECT_EQ(app.max_batch(), 4096);
  EXPECT_EQ(app.min_local(), 32);
  EXPECT_EQ(app.max_local(), 1024);
  EXPECT_EQ(app.max_epochs(), 100);

  struct Case {
    std::vector<int> placement;
    int local;
    double step, sync;
  };
  const std::vector<Case> cases = {
      {{4, 2}, 171, 0.220071912, 0.087444947},
      {{2, 4}, 171, 0.220071912, 0.087444947},
      {{1, 2, 1}, 64, 0.125973797, 0.067739292},
      {{4, 4, 4, 4, 4}, 171, 0.197021141, 0.057856566},          // 3-D branch
      {{4, 4, 4, 4, 4, 4}, 342, 0.300548212, 0.047718393},
      {{2, 2, 2, 2, 2, 2}, 342, 0.283909403, 0.009421243},
      {std::vector<int>(12, 4), 86, 0.286210304, 0.212795660},
  };
  for (const auto& c : cases) {
    const StepTime t = app.throughput(c.placement, c.local);
    EXPECT_NEAR(t.step, c.step, 1e-8) << placement_id(c.placement) << " @" << c.local;
    EXPECT_NEAR(t.sync, c.sync, 1e-8) << placement_id(c.placement) << " @" << c.local;
  }
  const GradStats g0 = app.grad_stats(2048, 0);
  EXPECT_NEAR(g0.sqr, 10.73321269, 1e-7);
  EXPECT_NEAR(g0.var, 5.48595380, 1e-7);
  const GradStats g5 = app.grad_stats(3000, 5);
  EXPECT_NEAR(g5.sqr, 0.30133050, 1e-7);
  EXPECT_NEAR(g5.var, 3.25764810, 1e-7);
  EXPECT_DOUBLE_EQ(app.iteration(2048, 99), 3178);
  EXPECT_NEAR(app.progress_threshold(1), 390.714386, 1e-6);
  EXPECT_NEAR(app.progress_threshold(2), 781.598945, 1e-6);
  EXPECT_NEAR(app.progress_threshold(100), 39062.908167, 1e-6);
}

TEST(TimelineProfile, OverridesAndThresholdsOfEveryApplication) {
  GPUORCH_REQUIRE_POLLUX(dir);
  struct Expect {
    const char* app;
    int init, max, min_local, max_local, epochs;
    double finish;
  };
  const std::vector<Expect> table = {
      {"bert", 12, 384, 4, 12, 2, 14774.0},
      {"deepspeech2", 20, 640, 10, 80, 80, 28536.0},
      {"imagenet", 200, 12800, 20, 200, 90, 576525.59},
      {"ncf", 256, 32768, 32, 32768, 10, 194174.0},
      {"yolov3", 8, 512, 4, 8, 50, 103443.97},
  };
  for (const auto& e : table) {
    const AppProfile a = AppProfile::load((dir / "apps").string(), e.app);
    EXPECT_EQ(a.init_batch(), e.init) << e.app;
    EXPECT_EQ(a.max_batch(), e.max) << e.app;
    EXPECT_EQ(a.min_local(), e.min_local) << e.app;
    EXPECT_EQ(a.max_local(), e.max_local) << e.app;
    EXPECT_EQ(a.max_epochs(), e.epochs) << e.app;
    EXPECT_NEAR(a.progress_threshold(e.epochs), e.finish, 0.01) << e.app;
  }
}

TEST(TimelineProfile, UnknownApplicationIsOneLineInputError) {
  GPUORCH_REQUIRE_POLLUX(dir);
  try {
    (void)AppProfile::load((dir / "apps").string(), "resnet9000");
    FAIL() << "expected an input error";
  } catch (const base::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown application 'resnet9000'"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuorch::sim
