// The fitted speedup model (timeline-protocol.md §8): the fit recovers the parameters that
// generated its samples, follows the artifact's pinning rules, is deterministic, and a model
// with nothing observed gives the linear prior.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gpuorch/sched/jobs/fitted_speedup.hpp"
#include "gpuorch/sched/jobs/measured_steps.hpp"
#include "gpuorch/sched/jobs/throughput_fit.hpp"

namespace gpuorch::sched::jobs {
namespace {

// Step and sync time exactly as the throughput model predicts them.
ThroughputSample modelled(const ThroughputParams& p, int nodes, int replicas, int local) {
  const double step = sync_step_time(p, nodes, replicas, local);
  return {nodes, replicas, local, step, step - compute_time(p, local)};
}

std::vector<ThroughputSample> grid(const ThroughputParams& p) {
  std::vector<ThroughputSample> out;
  for (const auto& [nodes, replicas] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}, {2, 4}, {2, 8}, {4, 16}, {8, 32}}) {
    for (const int local : {16, 32, 64, 128}) out.push_back(modelled(p, nodes, replicas, local));
  }
  return out;
}

const ThroughputParams kTruth{0.02, 0.003, 0.15, 0.004, 0.03, 0.002, 2.5};

TEST(TimelineSpeedupFit, RecoversTheParametersThatMadeItsSamples) {
  const auto samples = grid(kTruth);
  const ThroughputParams fit = fit_throughput(samples);
  EXPECT_LT(fit_loss(fit, samples), fit_loss(ThroughputParams{}, samples));
  EXPECT_NEAR(fit.alpha_c, kTruth.alpha_c, 0.02 * kTruth.alpha_c);
  EXPECT_NEAR(fit.beta_c, kTruth.beta_c, 0.02 * kTruth.beta_c);
  EXPECT_NEAR(fit.gamma, kTruth.gamma, 0.1);
  // The network parameters are fitted through the overlap, so check what they predict.
  for (const auto& s : samples) {
    EXPECT_NEAR(sync_step_time(fit, s.nodes, s.replicas, s.local_batch), s.step_time,
                0.02 * s.step_time)
        << s.nodes << " nodes, " << s.replicas << " GPUs, batch " << s.local_batch;
  }
  // And where it has not been: more nodes than any sample.
  const double truth = sync_step_time(kTruth, 16, 64, 64);
  EXPECT_NEAR(sync_step_time(fit, 16, 64, 64), truth, 0.05 * truth);
}

TEST(TimelineSpeedupFit, SameSamplesSameParameters) {
  const auto samples = grid(kTruth);
  const ThroughputParams a = fit_throughput(samples), b = fit_throughput(samples);
  EXPECT_EQ(a.alpha_c, b.alpha_c);
  EXPECT_EQ(a.beta_c, b.beta_c);
  EXPECT_EQ(a.alpha_n, b.alpha_n);
  EXPECT_EQ(a.beta_n, b.beta_n);
  EXPECT_EQ(a.alpha_r, b.alpha_r);
  EXPECT_EQ(a.beta_r, b.beta_r);
  EXPECT_EQ(a.gamma, b.gamma);
}

TEST(TimelineSpeedupFit, PinsWhatTheSamplesCannotTell) {
  // One GPU at one batch: the fixed compute cost is half the observed compute time, and with
  // no exchange observed the network costs stay at their floor (cross-node 1.1 x in-node).
  const std::vector<ThroughputSample> one = {{1, 1, 32, 0.2, 0.0}};
  const ThroughputParams p = fit_throughput(one);
  EXPECT_DOUBLE_EQ(p.alpha_c, 0.1);
  EXPECT_DOUBLE_EQ(p.alpha_r, 1e-8);
  EXPECT_DOUBLE_EQ(p.beta_r, 1e-8);
  EXPECT_DOUBLE_EQ(p.alpha_n, 1.1e-8);
  // Two GPUs in one node: no sample above 2 GPUs, so the per-GPU exchange terms stay pinned.
  std::vector<ThroughputSample> two = {modelled(kTruth, 1, 1, 32), modelled(kTruth, 1, 2, 32),
                                       modelled(kTruth, 1, 2, 64)};
  const ThroughputParams q = fit_throughput(two);
  EXPECT_DOUBLE_EQ(q.beta_r, 1e-8);
  EXPECT_GE(q.alpha_n, 1.1 * q.alpha_r);
  EXPECT_NEAR(sync_step_time(q, 1, 2, 64), two[2].step_time, 0.02 * two[2].step_time);
}

TEST(TimelineSpeedupFitted, LinearPriorBeforeAnySample) {
  FittedSpeedup m(BatchRange{128, 4096, 32, 1024, 0});
  EXPECT_FALSE(m.known());
  EXPECT_EQ(m.goodput(4, 1), 0.0);
  EXPECT_DOUBLE_EQ(speedup(m, 8, 2, 1, 1), 8.0);
  EXPECT_DOUBLE_EQ(speedup(m, 8, 2, 4, 1), 2.0);
  EXPECT_EQ(speedup(m, 0, 0, 1, 1), 0.0);
  // A throughput sample without gradient statistics is not enough for goodput.
  m.observe(modelled(kTruth, 1, 1, 128));
  EXPECT_FALSE(m.known());
  m.observe(GradientStats{1.0, 4.0});
  EXPECT_TRUE(m.known());
  EXPECT_GT(m.goodput(1, 1), 0.0);
}

TEST(TimelineSpeedupFitted, GoodputFollowsTheFitAndTheReportedNoise) {
  FittedSpeedup m(BatchRange{128, 4096, 32, 1024, 0});
  for (const auto& s : grid(kTruth)) m.observe(s);
  // Without gradient noise a step is worth one step at the initial batch whatever its size, so
  // GPUs help only by splitting the batch; noisy gradients make larger batches worth more.
  m.observe(GradientStats{1.0, 0.0});
  const double quiet = speedup(m, 8, 2, 1, 1);
  m.observe(GradientStats{1.0, 1000.0});
  EXPECT_GT(speedup(m, 8, 2, 1, 1), quiet);
  EXPECT_GT(speedup(m, 8, 2, 1, 1), 4.0);
  EXPECT_GT(speedup(m, 4, 1, 1, 1), speedup(m, 4, 4, 1, 1));  // crossing nodes costs
  // Repeating a configuration neither refits nor adds a sample.
  const std::size_t n = m.samples();
  m.observe(modelled(kTruth, 1, 1, 16));
  EXPECT_EQ(m.samples(), n);
}

TEST(TimelineSpeedupFitted, MeasuredCorrectionIsPerBatchWhereTheJobRan) {
  // Two batches measured at 4 GPUs on one node, one 20 % slower and one 40 % slower than the
  // model that generated them: the correction holds each at its own batch, interpolates in log
  // batch between them, keeps the nearest outside them, and is 1 where nothing ran.
  ThroughputFit fit(true);
  fit.observe(modelled(kTruth, 1, 1, 64));
  ThroughputSample slow = modelled(kTruth, 1, 4, 32);
  ThroughputSample slower = modelled(kTruth, 1, 4, 128);
  slow.step_time *= 1.2;
  slower.step_time *= 1.4;
  fit.observe(slow);
  fit.observe(slower);
  const auto ratio = [&](const ThroughputSample& s) {
    return s.step_time / sync_step_time(fit.params(), s.nodes, s.replicas, s.local_batch);
  };
  EXPECT_DOUBLE_EQ(fit.correction(4, 1, 32), ratio(slow));
  EXPECT_DOUBLE_EQ(fit.correction(4, 1, 128), ratio(slower));
  EXPECT_NEAR(fit.correction(4, 1, 64), (ratio(slow) + ratio(slower)) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(fit.correction(4, 1, 8), ratio(slow));
  EXPECT_DOUBLE_EQ(fit.correction(4, 1, 1024), ratio(slower));
  EXPECT_DOUBLE_EQ(fit.correction(8, 2, 64), 1.0);
  EXPECT_GT(ratio(slower), ratio(slow));
  // Without `measured` there is no correction at all.
  ThroughputFit plain(false);
  plain.observe(slower);
  EXPECT_DOUBLE_EQ(plain.correction(4, 1, 128), 1.0);
}

TEST(TimelineSpeedupFitted, CarriedCorrectionReachesCountsNotRunOnAsManyNodes) {
  // `carry`: 1, 4 and 8 GPUs ran on one node, 4 of them 30 % slower than the model that made the
  // others (a bump the smooth model cannot follow); a count not run on one node takes the
  // correction of the nearest count run there (3, 5 and 6, a tie: 4's; 2: 1's; 7: 8's), and a
  // node count never run keeps 1. Without `carry`, only the counts run have one.
  for (const bool carry : {false, true}) {
    ThroughputFit fit(true, carry);
    fit.observe(modelled(kTruth, 1, 1, 64));
    ThroughputSample slow = modelled(kTruth, 1, 4, 64);
    slow.step_time *= 1.3;
    fit.observe(slow);
    fit.observe(modelled(kTruth, 1, 8, 64));
    const double at1 = fit.correction(1, 1, 64);
    const double at4 = fit.correction(4, 1, 64);
    const double at8 = fit.correction(8, 1, 64);
    EXPECT_GT(at4, at8);
    EXPECT_GT(at4, at1);
    for (const int g : {3, 5, 6}) EXPECT_DOUBLE_EQ(fit.correction(g, 1, 64), carry ? at4 : 1.0);
    EXPECT_DOUBLE_EQ(fit.correction(2, 1, 64), carry ? at1 : 1.0);
    EXPECT_DOUBLE_EQ(fit.correction(7, 1, 64), carry ? at8 : 1.0);
    EXPECT_DOUBLE_EQ(fit.correction(8, 2, 64), 1.0);
  }
}

TEST(TimelineSpeedupFitted, ASharedFitCarriesOneJobsMeasurementsToTheNext) {
  const BatchRange range{128, 4096, 32, 1024, 0};
  auto shared = std::make_shared<ThroughputFit>(true);
  FittedSpeedup first(range, shared);
  FittedSpeedup second(range, shared);
  for (const auto& s : grid(kTruth)) first.observe(s);
  first.observe(GradientStats{1.0, 100.0});
  // The second job has reported its gradient statistics but run nothing new: it predicts from
  // what the first measured, exactly as the first does.
  second.observe(GradientStats{1.0, 100.0});
  ASSERT_TRUE(second.known());
  EXPECT_EQ(second.samples(), grid(kTruth).size());
  EXPECT_DOUBLE_EQ(second.goodput(8, 2), first.goodput(8, 2));
  // A new measurement by the second refits the shared model and invalidates both memos.
  const double before = first.goodput(16, 4);
  ThroughputSample odd = modelled(kTruth, 4, 16, 96);
  odd.step_time *= 3;
  second.observe(odd);
  EXPECT_NE(first.goodput(16, 4), before);
  EXPECT_DOUBLE_EQ(first.goodput(16, 4), second.goodput(16, 4));
  // A model of its own shares nothing.
  FittedSpeedup alone(range, true);
  alone.observe(GradientStats{1.0, 100.0});
  EXPECT_FALSE(alone.known());
}

TEST(TimelineSpeedupFitted, SharedStepsFillInCountsAJobHasNotRun) {
  // Job A ran 8 GPUs on 2 nodes, 40 % slower than the smooth model; job B, of the same
  // application, ran only inside one node. With the steps shared, B's step time at 8 on 2 is what
  // A measured there (the ratio against B's own fit), B's own measurements win where both ran,
  // and what A measures later reaches B's memo. Without sharing, B extrapolates (no correction).
  auto steps = std::make_shared<MeasuredSteps>();
  const BatchRange range{128, 4096, 32, 1024, 0};
  auto b_fit = std::make_shared<ThroughputFit>(true);
  b_fit->share_steps(steps);
  FittedSpeedup b(range, b_fit);
  auto a_fit_shared = std::make_shared<ThroughputFit>(true);
  a_fit_shared->share_steps(steps);
  FittedSpeedup a_shared(range, a_fit_shared);
  ThroughputFit alone(true);
  auto slow = [](ThroughputSample s, double by) {
    s.step_time *= by;
    return s;
  };
  for (const int local : {32, 128}) {
    a_shared.observe(modelled(kTruth, 1, 4, local));
    a_shared.observe(slow(modelled(kTruth, 2, 8, local), 1.4));
    for (const int g : {1, 2, 4}) {
      const auto own = slow(modelled(kTruth, 1, g, local), g == 4 ? 1.1 : 1.0);
      b.observe(own);
      alone.observe(own);
    }
  }
  b.observe(GradientStats{1.0, 100.0});
  a_shared.observe(GradientStats{1.0, 100.0});
  const ThroughputFit& fb = b.fit();
  EXPECT_TRUE(fb.measured_at(8, 2));
  EXPECT_FALSE(fb.measured_at(16, 4));
  EXPECT_FALSE(alone.measured_at(8, 2));
  EXPECT_DOUBLE_EQ(alone.correction(8, 2, 64), 1.0);
  EXPECT_DOUBLE_EQ(fb.correction(8, 2, 32),
                   1.4 * sync_step_time(kTruth, 2, 8, 32) / sync_step_time(fb.params(), 2, 8, 32));
  EXPECT_DOUBLE_EQ(fb.correction(8, 2, 128), 1.4 * sync_step_time(kTruth, 2, 8, 128) /
                                                 sync_step_time(fb.params(), 2, 8, 128));
  // At 4 GPUs in one node B's own 10 % wins over A's model-exact measurement.
  EXPECT_DOUBLE_EQ(fb.correction(4, 1, 32),
                   1.1 * sync_step_time(kTruth, 1, 4, 32) / sync_step_time(fb.params(), 1, 4, 32));
  // A's later measurement at 16 GPUs on 4 nodes changes B's goodput there.
  const double before = b.goodput(16, 4);
  a_shared.observe(slow(modelled(kTruth, 4, 16, 64), 2.0));
  EXPECT_TRUE(fb.measured_at(16, 4));
  EXPECT_LT(b.goodput(16, 4), 0.75 * before);
}

TEST(TimelineSpeedupFitted, SharedNetworkFillsTheExchangeTermsAJobHasNotSeen) {
  // Job A ran the whole grid, job B one GPU at two batches, both sharing the fit to every job of
  // their model. B keeps its own compute terms (fitted to its own, 20 % slower, samples) and
  // takes the exchange terms and the overlap from the shared fit, instead of the artifact's
  // floor (which the same B without sharing keeps).
  auto pool = std::make_shared<ThroughputFit>();
  ThroughputFit a, b, alone;
  a.share_network(pool);
  b.share_network(pool);
  for (const auto& s : grid(kTruth)) a.observe(s);
  for (const int local : {32, 128}) {
    ThroughputSample s = modelled(kTruth, 1, 1, local);
    s.step_time *= 1.2;
    b.observe(s);
    alone.observe(s);
  }
  const ThroughputParams& shared = pool->params();
  EXPECT_TRUE(pool->across_nodes());
  EXPECT_FALSE(b.across_nodes());
  EXPECT_EQ(b.params().alpha_n, shared.alpha_n);
  EXPECT_EQ(b.params().beta_n, shared.beta_n);
  EXPECT_EQ(b.params().alpha_r, shared.alpha_r);
  EXPECT_EQ(b.params().beta_r, shared.beta_r);
  EXPECT_EQ(b.params().gamma, shared.gamma);
  EXPECT_GT(shared.alpha_n, 1e-3);
  EXPECT_DOUBLE_EQ(alone.params().alpha_n, 1.1e-8);
  // Compute: B's own, fitted to its slower samples.
  EXPECT_EQ(b.params().alpha_c, alone.params().alpha_c);
  EXPECT_EQ(b.params().beta_c, alone.params().beta_c);
  EXPECT_NE(b.params().beta_c, shared.beta_c);
  // A ran every exchange itself, so it keeps its own fit.
  EXPECT_EQ(a.params().alpha_n, fit_throughput(grid(kTruth)).alpha_n);
}

}  // namespace
}  // namespace gpuorch::sched::jobs
