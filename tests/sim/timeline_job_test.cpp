// The job model: the artifact's micro-batching rules, the progress-rate (goodput) formula on a
// hand-computed case, and how a job advances through its restart delay and epoch boundaries.
#include "gpuorch/sim/timeline_job.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "gpuorch/sim/timeline_goodput.hpp"
#include "sim/timeline_support.hpp"

namespace gpuorch::sim {
namespace {

TEST(TimelineJob, FixedBatchMicroBatchingFollowsTheArtifact) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const AppProfile ncf = AppProfile::load((dir / "apps").string(), "ncf");
  // ncf at 32768 on one GPU: 16384 per micro-batch, one extra accumulation step (§6.1).
  const BatchConfig b = fixed_batch_config(ncf, 1, 32768, false);
  EXPECT_EQ(b.local, 16384);
  EXPECT_EQ(b.accum, 1);
  const AppProfile cifar = AppProfile::load((dir / "apps").string(), "cifar10");
  // 2048 over 6 GPUs: ceil(341.33) = 342 per GPU, no accumulation (max local 1024).
  const BatchConfig c = fixed_batch_config(cifar, 6, 2048, false);
  EXPECT_EQ(c.local, 342);
  EXPECT_EQ(c.accum, 0);
  // At the initial batch one GPU does not accumulate, except in Optimus's prediction.
  EXPECT_EQ(fixed_batch_config(cifar, 1, 128, false).accum, 0);
  EXPECT_EQ(fixed_batch_config(cifar, 1, 128, true).accum, 1);
  EXPECT_EQ(fixed_batch_config(cifar, 1, 128, true).local, 64);
}

TEST(TimelineJob, ProgressRateIsGainOverStepTime) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const AppProfile cifar = AppProfile::load((dir / "apps").string(), "cifar10");
  const std::vector<int> placement{4, 2};
  const BatchConfig b{171, 1};  // 6 x 171 x 2 = 2052 samples per step
  const StepTime st = cifar.throughput(placement, 171);
  const double step = st.step + 1 * (st.step - st.sync);
  const double scale = 2052.0 / 128.0;
  const GradStats g = cifar.grad_stats(2052, 3);
  const double gain = (g.var + g.sqr) / (g.var / scale + g.sqr);
  const Rate r = progress_rate(cifar, placement, b, 3);
  EXPECT_NEAR(r.progress_per_s, gain / step, 1e-12);
  EXPECT_NEAR(r.efficiency, gain / scale, 1e-12);
  EXPECT_GT(gain, 1.0);
  EXPECT_LT(gain, scale);
}

TEST(TimelineJob, RigidJobPaysTheRestartDelayThenRunsItsDuration) {
  JobSpec s;
  s.name = "rigid";
  s.replicas = 2;
  s.duration = 100;
  Job j(s, nullptr, BatchRule::kFixed);
  cluster::Placement p;
  p.node = 3;
  p.gpus = {0, 1};
  j.reallocate(60, {p});
  EXPECT_EQ(j.allocation(), (std::vector<cluster::NodeIndex>{3, 3}));
  j.advance(60, 60);  // 30 s restart, 30 s of work
  EXPECT_FALSE(j.complete());
  EXPECT_DOUBLE_EQ(j.progress(), 30.0);
  j.advance(120, 60);  // 60 s more: 90
  j.advance(180, 60);  // finishes 10 s into this tick
  ASSERT_TRUE(j.complete());
  EXPECT_EQ(j.completion(), 190);
  EXPECT_DOUBLE_EQ(j.attained_service(), 2.0 * 130);  // GPU-seconds held until it finished
  EXPECT_EQ(j.first_start(), 60);
}

}  // namespace
}  // namespace gpuorch::sim
