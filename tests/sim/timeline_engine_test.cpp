// The whole simulation on the artifact's workloads: Tiresias reproduces the shipped per-job
// completion times exactly (the artifact's own code does too, timeline-protocol.md "Verified
// here"), and a run is a function of its inputs and seed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gpuorch/sim/timeline_engine.hpp"
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

TEST(TimelineEngine, IdleTimeIsSkippedNotStepped) {
  // Two rigid jobs a day apart: the scheduler ticks while one is active, not through the gap.
  std::vector<JobSpec> jobs(2);
  for (std::size_t i = 0; i < 2; ++i) {
    jobs[i].id = i;
    jobs[i].name = fmt::format("j{}", i);
    jobs[i].replicas = 1;
    jobs[i].duration = 90;
    jobs[i].submit = static_cast<Seconds>(i) * 86400;
  }
  auto p = make_timeline_policy("fifo", PolicyOptions{});
  const auto r = run_timeline(jobs, {}, uniform_nodes(1, 4), *p, "fifo", TimelineOptions{});
  EXPECT_EQ(r.jobs[0].completion, 60 + 30 + 90);
  EXPECT_EQ(r.jobs[1].completion, 86400 + 30 + 90);
  EXPECT_LT(r.ticks, 10U);
}

TEST(TimelineMetrics, PercentileInterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10}, 99), 10);
  EXPECT_DOUBLE_EQ(percentile({0, 100}, 99), 99);
}

}  // namespace
}  // namespace gpuorch::sim
