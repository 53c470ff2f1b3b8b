// fifo:per-job, the cluster scheduler's rule in the simulator: each waiting job in its own round
// (a later job that fits starts while an earlier one waits, which strict fifo forbids), and the
// engine's event record (`sim timeline --events`) that scripts/k8s-timeline-replay compares with.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/sim/timeline_engine.hpp"
#include "gpuorch/sim/timeline_policy.hpp"
#include "gpuorch/sim/timeline_workload.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

// One node of 4 GPUs: j0 holds 3 for 600 s; j1 (2 GPUs) cannot start until it ends; j2 (1 GPU)
// fits beside j0.
constexpr const char* kTrace =
    "timestamp,duration,num_gpus,gpu_time,cluster\n"
    "2017-10-09 06:00:00,600.0,3,1800.0,vc\n"
    "2017-10-09 06:01:00,600.0,2,1200.0,vc\n"
    "2017-10-09 06:02:00,600.0,1,600.0,vc\n";

TimelineResult run(const std::string& policy) {
  const test::TempDir dir;
  test::write_text(dir.file("t.csv"), kTrace);
  const auto jobs = read_philly_trace(dir.file("t.csv"));
  auto p = make_timeline_policy(policy, {});
  EXPECT_NE(p, nullptr);
  TimelineOptions o;
  o.record_events = true;
  return run_timeline(jobs, {}, uniform_nodes(1, 4), *p, policy, o);
}

TEST(TimelinePerJob, ALaterJobThatFitsStartsWhileAnEarlierOneWaits) {
  const auto per_job = run("fifo:per-job");
  const auto strict = run("fifo");
  ASSERT_EQ(per_job.jobs.size(), 3u);
  EXPECT_LT(per_job.jobs[2].start, per_job.jobs[1].start);  // backfilled
  EXPECT_GE(strict.jobs[2].start, strict.jobs[1].start);    // strict FIFO holds it
}

TEST(TimelinePerJob, EventsSayWhenEachJobArrivedStartedAndFinished) {
  const auto r = run("fifo:per-job");
  std::map<std::size_t, std::vector<TimelineEvent>> by_job;
  Seconds last = 0;
  for (const auto& e : r.events) {
    EXPECT_GE(e.time, last);
    last = e.time;
    by_job[e.job].push_back(e);
  }
  ASSERT_EQ(by_job.size(), 3u);
  for (const auto& [job, evs] : by_job) {
    ASSERT_EQ(evs.size(), 3u) << job;
    EXPECT_STREQ(event_key(evs[0].kind), "arrive");
    EXPECT_STREQ(event_key(evs[1].kind), "start");
    EXPECT_STREQ(event_key(evs[2].kind), "finish");
    EXPECT_EQ(evs[1].time, r.jobs[job].start);
    EXPECT_EQ(evs[2].time, (r.jobs[job].completion + 59) / 60 * 60);  // GPUs back at the tick
    EXPECT_EQ(evs[2].replicas, 0);
  }
  EXPECT_EQ(by_job[0][1].gpus, 3);
  EXPECT_EQ(by_job[1][1].gpus, 2);
  EXPECT_EQ(run("fifo").events.size(), 9u);
}

// Philly rows (queue in the cluster column) on one node of 4 GPUs under fifo:per-job, with two
// queues a and b of 2 GPUs' quota each; `prioritise` may change the jobs first.
TimelineResult run_two_queues(const std::string& rows,
                              const std::function<void(std::vector<JobSpec>&)>& prioritise = {}) {
  const test::TempDir dir;
  test::write_text(dir.file("t.csv"), "timestamp,duration,num_gpus,gpu_time,cluster\n" + rows);
  test::write_text(dir.file("q.yaml"),
                   "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: a}\n"
                   "spec:\n  resources:\n    gpu: {quota: 2, limit: -1, overQuotaWeight: 1}\n"
                   "---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: b}\n"
                   "spec:\n  resources:\n    gpu: {quota: 2, limit: -1, overQuotaWeight: 1}\n");
  auto jobs = read_philly_trace(dir.file("t.csv"));
  if (prioritise) prioritise(jobs);
  PolicyOptions po;
  po.queues = io::load_queues(dir.file("q.yaml"));
  auto p = make_timeline_policy("fifo:per-job", po);
  TimelineOptions o;
  o.record_events = true;
  return run_timeline(jobs, {}, uniform_nodes(1, 4), *p, "fifo:per-job", o);
}

// Two queues of 2 GPUs' quota on 4: a job of b within its quota reclaims what a borrowed, and
// a's preempted job goes to the back of its queue (its pods are created anew on a cluster).
TEST(TimelinePerJob, AReclaimedJobIsPreemptedAndGoesToTheBack) {
  const auto r = run_two_queues(
      "2017-10-09 06:00:00,3000.0,2,6000.0,a\n"
      "2017-10-09 06:00:00,3000.0,2,6000.0,a\n"
      "2017-10-09 06:05:00,600.0,2,1200.0,b\n");
  int preempted = 0;
  for (const auto& e : r.events) {
    if (e.kind == TimelineEvent::Kind::kPreempt) {
      ++preempted;
      EXPECT_EQ(r.jobs[e.job].queue, "a");
      EXPECT_EQ(e.time, r.jobs[2].start);  // when b's job starts
    }
  }
  EXPECT_EQ(preempted, 1);
  for (const auto& j : r.jobs) EXPECT_GE(j.completion, j.submit) << j.name;
}

// The cluster decides every pending pod again after a change: a job earlier in the queue that
// found no room at its turn gets the GPU a later job's preemption left over, in the same tick.
// On 4 GPUs, a's x (1 GPU) waits over a's share while a's a1 and b's low-priority l (2 GPUs
// each) run; b's p (1 GPU, after x in the order) preempts l, which frees one GPU more than p
// needs and lowers b's demand: x, now within a's share, takes that GPU at once, not at the
// next arrival or finish.
TEST(TimelinePerJob, AnEarlierJobGetsWhatALaterOneFreedInTheSameTick) {
  enum : std::size_t { l, a1, x, p };
  const auto r = run_two_queues(
      "2017-10-09 06:00:00,6000.0,2,12000.0,b\n"
      "2017-10-09 06:00:00,6000.0,2,12000.0,a\n"
      "2017-10-09 06:02:00,6000.0,1,6000.0,a\n"
      "2017-10-09 06:05:00,600.0,1,600.0,b\n",
      [](std::vector<JobSpec>& jobs) {
        jobs.at(a1).priority = jobs.at(x).priority = jobs.at(p).priority = 1;  // l alone may go
      });
  ASSERT_EQ(r.jobs.size(), 4u);
  EXPECT_LT(r.jobs[x].submit, r.jobs[p].submit);
  EXPECT_EQ(r.jobs[x].start, r.jobs[p].start);
  int preempted = 0;
  for (const auto& e : r.events) {
    // Later, p gone, l reclaims b's share back from x: not this tick's business.
    if (e.kind != TimelineEvent::Kind::kPreempt || e.time != r.jobs[p].start) continue;
    ++preempted;
    EXPECT_EQ(e.job, std::size_t{l});
  }
  EXPECT_EQ(preempted, 1);
}

}  // namespace
}  // namespace gpuorch::sim
