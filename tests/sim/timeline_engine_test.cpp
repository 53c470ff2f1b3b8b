// The whole simulation on the artifact's workloads: Tiresias reproduces the shipped per-job
// completion times exactly (the artifact's own code does too, timeline-protocol.md "Verified
// here"), and a run is a function of its inputs and seed.
#include "gpuorch/sim/timeline_engine.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gpuorch/sim/timeline_metrics.hpp"
#include "gpuorch/sim/timeline_workload.hpp"
#include "sim/timeline_support.hpp"

namespace gpuorch::sim {
namespace {

TimelineResult run(const std::filesystem::path& workload, const std::filesystem::path& apps_dir,
                   const std::string& policy) {
  AppTable apps;
  const auto jobs = read_pollux_workload(workload.string(), apps_dir.string(), apps);
  PolicyOptions o;
  auto p = make_timeline_policy(policy, o);
  return run_timeline(jobs, apps, uniform_nodes(16, 4), *p, policy, TimelineOptions{});
}

TEST(TimelineEngine, TiresiasReproducesTheShippedJctsExactly) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const auto r = run(dir / "workloads-0.5" / "workload-6.csv", dir / "apps", "tiresias");
  std::ifstream in(dir / "results-jobload-0.5" / "tiresias-summary.json");
  const auto shipped = nlohmann::json::parse(in)["jcts"]["workload-6"];
  ASSERT_EQ(r.jobs.size(), shipped.size());
  for (const auto& j : r.jobs) {
    ASSERT_TRUE(shipped.contains(j.name)) << j.name;
    EXPECT_EQ(j.completion - j.submit, shipped[j.name].get<Seconds>()) << j.name;
  }
  EXPECT_NEAR(summarize(r).avg_jct_s, 1826.575, 1e-9);
}

TEST(TimelineEngine, SameInputsSameResult) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const auto w = dir / "workloads-0.5" / "workload-3.csv";
  const auto a = run(w, dir / "apps", "default");
  const auto b = run(w, dir / "apps", "default");
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].completion, b.jobs[i].completion) << a.jobs[i].name;
    EXPECT_EQ(a.jobs[i].restarts, b.jobs[i].restarts) << a.jobs[i].name;
  }
  EXPECT_GT(summarize(a).finished, 0U);
  EXPECT_EQ(summarize(a).finished, a.jobs.size());
}

// Rigid jobs of 90 s on one 4-GPU node under FIFO; job i asks for gpus[i] GPUs at submit[i].
TimelineResult run_rigid(const std::vector<int>& gpus, const std::vector<Seconds>& submit) {
  std::vector<JobSpec> jobs(gpus.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].id = i;
    jobs[i].name = fmt::format("j{}", i);
    jobs[i].replicas = gpus[i];
    jobs[i].duration = 90;
    jobs[i].submit = submit[i];
  }
  auto p = make_timeline_policy("fifo", PolicyOptions{});
  return run_timeline(jobs, {}, uniform_nodes(1, 4), *p, "fifo", TimelineOptions{});
}

TEST(TimelineEngine, IdleTimeIsSkippedNotStepped) {
  // Two rigid jobs a day apart: the scheduler ticks while one is active, not through the gap.
  const auto r = run_rigid({1, 1}, {0, 86400});
  EXPECT_EQ(r.jobs[0].completion, 60 + 30 + 90);
  EXPECT_EQ(r.jobs[1].completion, 86400 + 30 + 90);
  EXPECT_LT(r.ticks, 10U);
}

TEST(TimelineEngine, SamplesRecordAllocationGoodputAndQueuePerTick) {
  // A 1-GPU and a 4-GPU job, both at 0: the second waits for the first.
  const auto r = run_rigid({1, 4}, {0, 0});
  ASSERT_EQ(r.samples.size(), 5U);
  // 60 s: j0 runs, j1 waits; the first 30 s are j0's restart delay, so half a GPU of goodput.
  EXPECT_EQ(r.samples[0].time, 60);
  EXPECT_EQ(r.samples[0].allocated_gpus, 1);
  EXPECT_EQ(r.samples[0].queued, 1);
  EXPECT_DOUBLE_EQ(r.samples[0].goodput_gpus, 0.5);
  EXPECT_DOUBLE_EQ(r.samples[1].goodput_gpus, 1.0);  // 120 s: training all along
  // 180 s: j0 finished, j1 starts: 4 GPUs, 30 s of delay then 30 s of training.
  EXPECT_EQ(r.samples[2].time, 180);
  EXPECT_EQ(r.samples[2].allocated_gpus, 4);
  EXPECT_EQ(r.samples[2].queued, 0);
  EXPECT_DOUBLE_EQ(r.samples[2].goodput_gpus, 2.0);
  EXPECT_DOUBLE_EQ(r.samples[3].goodput_gpus, 4.0);
  // 300 s: j1 finished and handed its GPUs back: the cluster turns idle, one sample of zeros.
  EXPECT_EQ(r.samples[4].time, 300);
  EXPECT_EQ(r.samples[4].allocated_gpus, 0);
  EXPECT_EQ(r.samples[4].running, 0);
  EXPECT_DOUBLE_EQ(r.samples[4].goodput_gpus, 0.0);
}

TEST(TimelineMetrics, PercentileInterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10}, 99), 10);
  EXPECT_DOUBLE_EQ(percentile({0, 100}, 99), 99);
}

}  // namespace
}  // namespace gpuorch::sim
