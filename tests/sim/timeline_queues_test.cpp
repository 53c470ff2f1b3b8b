// Per-queue results of the time-based simulation: each job's outcome names its queue, each tick
// records the GPUs every queue holds, and the per-queue summary is what a tenant reads off a run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

#include "gpuorch/sim/timeline_engine.hpp"
#include "gpuorch/sim/timeline_metrics.hpp"

namespace gpuorch::sim {
namespace {

// Rigid 90-s jobs on one 4-GPU node under FIFO: job i in queue queues[i] asks for gpus[i] GPUs
// at 0.
TimelineResult run_rigid(const std::vector<int>& gpus, const std::vector<std::string>& queues) {
  std::vector<JobSpec> jobs(gpus.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].id = i;
    jobs[i].name = fmt::format("j{}", i);
    jobs[i].queue = queues[i];
    jobs[i].replicas = jobs[i].min_replicas = jobs[i].max_replicas = gpus[i];
    jobs[i].duration = 90;
  }
  auto p = make_timeline_policy("fifo", PolicyOptions{});
  return run_timeline(jobs, {}, uniform_nodes(1, 4), *p, "fifo", TimelineOptions{});
}

TEST(TimelineQueues, OutcomesAndSamplesCarryTheQueue) {
  // j0 (team-b, 1 GPU) and j1 (team-a, 2 GPUs) run together; j2 (team-b, 4 GPUs) waits.
  const auto r = run_rigid({1, 2, 4}, {"team-b", "team-a", "team-b"});
  EXPECT_EQ(r.queues, (std::vector<std::string>{"team-a", "team-b"}));
  ASSERT_EQ(r.jobs.size(), 3U);
  EXPECT_EQ(r.jobs[0].queue, "team-b");
  EXPECT_EQ(r.jobs[1].queue, "team-a");
  ASSERT_FALSE(r.samples.empty());
  EXPECT_EQ(r.samples[0].gpus_by_queue, (std::vector<int>{2, 1}));
  bool saw_j2 = false;
  for (const auto& s : r.samples) {
    ASSERT_EQ(s.gpus_by_queue.size(), 2U);
    EXPECT_EQ(std::accumulate(s.gpus_by_queue.begin(), s.gpus_by_queue.end(), 0), s.allocated_gpus);
    saw_j2 = saw_j2 || s.gpus_by_queue == std::vector<int>{0, 4};
  }
  EXPECT_TRUE(saw_j2);
  EXPECT_EQ(r.samples.back().gpus_by_queue, (std::vector<int>{0, 0}));  // turned idle
}

TEST(TimelineQueues, OneQueueWhenTheWorkloadNamesNone) {
  const auto r = run_rigid({1, 1}, {workload::kDefaultQueue, workload::kDefaultQueue});
  EXPECT_EQ(r.queues, std::vector<std::string>{"default"});
  const auto q = summarize_queues(r);
  ASSERT_EQ(q.size(), 1U);
  EXPECT_EQ(q[0].jobs, 2U);
  EXPECT_DOUBLE_EQ(q[0].gpu_share, 1.0);
  EXPECT_DOUBLE_EQ(q[0].avg_jct_s, summarize(r).avg_jct_s);
}

JobOutcome outcome(const std::string& queue, Seconds submit, Seconds start, Seconds completion,
                   double gpu_seconds) {
  return {.name = "",
          .queue = queue,
          .submit = submit,
          .start = start,
          .completion = completion,
          .gpu_seconds = gpu_seconds,
          .useful_gpu_seconds = 0,
          .restarts = 0};
}

// Utilisation within windows, from the samples (each holds until the next): from the first
// submission to the last, and over the time some job waits.
TEST(TimelineQueues, UtilisationUntilTheLastArrivalAndWhileJobsWait) {
  TimelineResult r;
  r.total_gpus = 4;
  r.jobs = {outcome("a", 0, 0, 200, 0), outcome("a", 100, 120, 200, 0)};
  r.samples = {{0, 4, 1, 1, 0, {}},     // [0, 60): 4 GPUs, a job waits
               {60, 2, 1, 0, 0, {}},    // [60, 120): 2, nobody waits
               {120, 1, 1, 2, 0, {}},   // [120, 200): 1, two wait
               {200, 0, 0, 0, 0, {}}};  // the end
  const auto s = summarize(r);
  // [0, 100]: 4 x 60 + 2 x 40 of 4 x 100.
  EXPECT_DOUBLE_EQ(s.utilisation_arrivals, 320.0 / 400);
  // Waiting during [0, 60) and [120, 200): 4 x 60 + 1 x 80 of 4 x 140.
  EXPECT_DOUBLE_EQ(s.utilisation_waiting, 320.0 / 560);
  EXPECT_DOUBLE_EQ(summarize(TimelineResult{}).utilisation_arrivals, 0);
}

TEST(TimelineQueues, SummaryPerQueueAveragesJctWaitingAndSharesGpuTime) {
  TimelineResult r;
  r.queues = {"idle", "vc1", "vc2"};                   // idle: a queue without jobs
  r.jobs = {outcome("vc2", 0, 600, 4200, 3 * 3600.0),  // JCT 4200, waited 600
            outcome("vc1", 100, 100, 1900, 3600.0),    // JCT 1800, waited 0
            outcome("vc2", 200, 2000, 3800, 3600.0),   // JCT 3600, waited 1800
            outcome("vc2", 300, 5000, -1, 3600.0),     // started, never finished
            outcome("vc1", 400, -1, -1, 0),            // never started
            outcome("stray", 0, 0, 60, 0)};            // a queue the result does not list
  const auto q = summarize_queues(r);
  ASSERT_EQ(q.size(), 4U);
  EXPECT_EQ(q[0].queue, "idle");
  EXPECT_EQ(q[0].jobs, 0U);
  EXPECT_DOUBLE_EQ(q[0].avg_jct_s, 0);
  EXPECT_EQ(q[1].queue, "stray");
  EXPECT_EQ(q[2].queue, "vc1");
  EXPECT_EQ(q[2].jobs, 2U);
  EXPECT_EQ(q[2].finished, 1U);
  EXPECT_DOUBLE_EQ(q[2].avg_jct_s, 1800);
  EXPECT_DOUBLE_EQ(q[2].avg_wait_s, 0);  // over the job that started
  EXPECT_DOUBLE_EQ(q[2].gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(q[2].gpu_share, 1.0 / 6);
  EXPECT_EQ(q[3].queue, "vc2");
  EXPECT_EQ(q[3].jobs, 3U);
  EXPECT_EQ(q[3].finished, 2U);
  EXPECT_DOUBLE_EQ(q[3].avg_jct_s, (4200 + 3600) / 2.0);
  EXPECT_DOUBLE_EQ(q[3].avg_wait_s, (600 + 1800 + 4700) / 3.0);
  EXPECT_DOUBLE_EQ(q[3].gpu_hours, 5.0);
  EXPECT_DOUBLE_EQ(q[3].gpu_share, 5.0 / 6);
}

}  // namespace
}  // namespace gpuorch::sim
