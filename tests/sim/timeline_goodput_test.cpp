// The speedup models a policy sees per job (JobSpeedups): with `inherit`, a job that has not run
// starts from what the last job of its application to report knew, so it is known before it
// runs; without it the job has only the linear prior.
#include "gpuorch/sim/timeline_goodput.hpp"

#include <gtest/gtest.h>

#include "gpuorch/sim/timeline_job.hpp"
#include "sim/timeline_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

JobSpec cifar10_job(const char* name) {
  JobSpec s;
  s.name = name;
  s.application = "cifar10";
  s.replicas = 2;
  s.batch = 2048;
  return s;
}

TEST(TimelineJobSpeedups, ANewJobStartsFromWhatTheLastJobOfItsModelKnew) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const AppProfile cifar = AppProfile::load((dir / "apps").string(), "cifar10");
  Job first(cifar10_job("cifar10-0"), &cifar, BatchRule::kGoodput);
  cluster::Placement p;
  p.node = 0;
  p.gpus = {0, 1};
  first.reallocate(60, {p});
  const Job next(cifar10_job("cifar10-1"), &cifar, BatchRule::kGoodput);

  FitOptions inherit;
  inherit.measured = true;
  inherit.inherit = true;
  JobSpeedups with(SpeedupSource::kFitted, 4, inherit);
  SpeedupModel& reported = with.of(first, true);
  ASSERT_TRUE(reported.known());
  SpeedupModel& started = with.of(next, true);
  ASSERT_TRUE(started.known());
  EXPECT_TRUE(started.measured(2, 1));
  EXPECT_FALSE(started.measured(4, 1));
  for (const int g : {1, 2, 4, 8}) {
    EXPECT_DOUBLE_EQ(started.goodput(g, packed_nodes(g, 4)),
                     reported.goodput(g, packed_nodes(g, 4)))
        << g << " GPUs";
  }

  inherit.inherit = false;
  JobSpeedups without(SpeedupSource::kFitted, 4, inherit);
  ASSERT_TRUE(without.of(first, true).known());
  EXPECT_FALSE(without.of(next, true).known());
}

}  // namespace
}  // namespace gpuorch::sim
