// How far an elastic gang grows on the cluster: before any measurement Pollux's prior (linear,
// at most twice the size run); then the throughput model fitted to what its pods measured, with
// one sizing rule (the job layer's greedy sizing over the value of each count, a resize paying
// for its restart over one resize interval). A gang whose measurements scale grows; one whose
// measurements say the next pods add nothing does not, and says so; and gives such pods back
// when another job waits.
#include "gpuorch/sched/jobs/measured_growth.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuorch::sched::jobs {
namespace {

workload::ThroughputReport measured(int pods, double samples_per_second, int local = 32,
                                    const std::string& time = "2026-12-04T16:00:00Z") {
  workload::ThroughputReport r;
  r.world_size = pods;
  r.nodes = pods;
  r.local_batch = local;
  r.samples_per_second = samples_per_second;
  r.step_time = pods * local / samples_per_second;
  r.time = time;
  return r;
}

GangGrowth gang(int running, int most, const std::vector<workload::ThroughputReport>& m) {
  GangGrowth g;
  g.gang = "default/g";
  g.running = running;
  g.min = 1;
  g.most = most;
  g.measured = m;
  return g;
}

TEST(MeasuredGrowth, BeforeAnyMeasurementThePriorAtMostDoubles) {
  const auto a = advise_growth(gang(2, 8, {}));
  EXPECT_TRUE(a.prior);
  EXPECT_EQ(a.target, 4);
  EXPECT_NE(a.why.find("no throughput measured yet"), std::string::npos) << a.why;
  EXPECT_EQ(advise_growth(gang(3, 5, {})).target, 5);  // no more pods than exist
  EXPECT_EQ(advise_growth(gang(0, 8, {})).target, 2);  // a start counts from minMember
}

TEST(MeasuredGrowth, AGangThatScalesGrowsAndOneThatDoesNotStays) {
  const std::vector<workload::ThroughputReport> scales = {measured(1, 100), measured(2, 198)};
  const auto up = advise_growth(gang(2, 8, scales));
  EXPECT_FALSE(up.prior);
  EXPECT_EQ(up.target, 4);  // twice the largest size measured
  EXPECT_GT(up.speedup, 1.8);
  EXPECT_NE(up.why.find("grown to 4"), std::string::npos) << up.why;

  const std::vector<workload::ThroughputReport> flat = {measured(1, 100), measured(2, 110),
                                                        measured(3, 112)};
  const auto stay = advise_growth(gang(3, 8, flat));
  EXPECT_EQ(stay.target, 3);
  EXPECT_EQ(stay.judged, 4);
  EXPECT_LT(stay.speedup, 1.05);
  EXPECT_NE(stay.why.find("gang default/g: measured 112 samples/s at 3 pods, fitted speedup at 4 "
                          "pods"),
            std::string::npos)
      << stay.why;
  EXPECT_NE(stay.why.find("not grown"), std::string::npos) << stay.why;
}

TEST(MeasuredGrowth, AResizeMustPayForItsRestart) {
  // 2 -> 3 pods at 1.05x: worth it when a restart is free, not when it idles a tenth of the
  // interval.
  const std::vector<workload::ThroughputReport> m = {measured(1, 100), measured(2, 190),
                                                     measured(3, 200)};
  GangGrowth g = gang(3, 4, m);
  g.restart_s = 0;
  const auto free = advise_growth(g);
  g.restart_s = 30;
  const auto costly = advise_growth(g);
  EXPECT_GE(free.target, costly.target);
  EXPECT_EQ(costly.target, 3) << costly.why;
}

TEST(MeasuredGrowth, PodsThatAddLessThanAResizeCostsAreGivenBackNeverBelowMin) {
  const std::vector<workload::ThroughputReport> flat = {measured(1, 100), measured(2, 110),
                                                        measured(3, 112)};
  const auto down = advise_shrink(gang(3, 3, flat));
  EXPECT_EQ(down.target, 2);  // 3 pods are 1.02x of 2; 2 are 1.10x of 1, which pays
  EXPECT_NE(down.why.find("shrunk to 2"), std::string::npos) << down.why;
  GangGrowth at_min = gang(3, 3, flat);
  at_min.min = 3;
  EXPECT_EQ(advise_shrink(at_min).target, 3);
  const std::vector<workload::ThroughputReport> scales = {measured(1, 100), measured(2, 198)};
  EXPECT_EQ(advise_shrink(gang(2, 2, scales)).target, 2);
  EXPECT_EQ(advise_shrink(gang(4, 4, {})).target, 4);  // the prior values every pod
}

TEST(MeasuredGrowth, OneSamplePerSizeTheNewestAndSyncFromTheFastestStep) {
  const std::vector<workload::ThroughputReport> m = {measured(2, 150, 32, "2026-12-04T16:00:00Z"),
                                                     measured(2, 190, 32, "2026-12-04T16:05:00Z"),
                                                     measured(1, 100, 32), measured(2, 120, 64)};
  const auto s = throughput_samples(m);
  ASSERT_EQ(s.size(), 3U);
  for (const auto& x : s) {
    if (x.replicas == 2 && x.local_batch == 32) {
      EXPECT_DOUBLE_EQ(x.step_time, 2 * 32 / 190.0);
      EXPECT_NEAR(x.sync_time, 2 * 32 / 190.0 - 0.32, 1e-12);
    }
    if (x.replicas == 1) {
      EXPECT_DOUBLE_EQ(x.sync_time, 0);
    }
  }
}

}  // namespace
}  // namespace gpuorch::sched::jobs
