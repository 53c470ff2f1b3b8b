// fifo:per-job:elastic: the cluster scheduler's elastic gangs in the simulator (minMember
// ceil(R/2) of R pods), grown and shrunk by the scheduler's own advice (measured_growth) from the
// reports each job's launcher would publish (timeline_throughput.hpp).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/sim/timeline_engine.hpp"
#include "gpuorch/sim/timeline_job_layer.hpp"
#include "gpuorch/sim/timeline_policy.hpp"
#include "gpuorch/sim/timeline_throughput.hpp"
#include "gpuorch/sim/timeline_workload.hpp"
#include "sched/jobs/gpu_queue.hpp"
#include "sim/timeline_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

// The first `n` jobs of workload-3 on 4 nodes of 4 GPUs, one queue.
TimelineResult run_first(const std::filesystem::path& dir, std::size_t n,
                         std::optional<ElasticGangs> elastic, std::vector<JobSpec>& jobs) {
  const test::TempDir tmp;
  std::ifstream in(dir / "workload-3.csv");
  std::ofstream out(tmp.file("w.csv"));
  std::string line;
  for (std::size_t i = 0; i <= n && std::getline(in, line); ++i) out << line << "\n";
  out.close();
  AppTable apps;
  jobs = read_pollux_workload(tmp.file("w.csv"), (dir / "apps").string(), apps);
  auto p = make_fifo_per_job({}, elastic);
  TimelineOptions o;
  o.record_events = true;
  return run_timeline(jobs, apps, uniform_nodes(4, 4), *p, "fifo:per-job:elastic", o);
}

TEST(TimelinePerJobElastic, GangsStayWithinMinMemberAndPodsAndGrowOncePerInterval) {
  GPUORCH_REQUIRE_POLLUX(dir);
  std::vector<JobSpec> jobs;
  const auto r = run_first(dir, 20, ElasticGangs{}, jobs);
  ASSERT_EQ(r.jobs.size(), 20u);
  for (const auto& j : r.jobs) EXPECT_GT(j.completion, j.submit) << j.name;
  std::map<std::size_t, int> running;
  std::map<std::size_t, Seconds> resized;  // a gang's last start or growth
  int grown = 0, shrunk = 0;
  for (const auto& e : r.events) {
    const int asked = jobs[e.job].replicas;
    const char* kind = event_key(e.kind);
    if (std::string(kind) == "start" || std::string(kind) == "resize") {
      EXPECT_GE(e.replicas, (asked + 1) / 2) << jobs[e.job].name << " at " << e.time;
      EXPECT_LE(e.replicas, asked) << jobs[e.job].name << " at " << e.time;
    }
    if (std::string(kind) == "resize" && e.replicas > running[e.job]) {
      ++grown;
      EXPECT_GE(e.time - resized[e.job], 300) << jobs[e.job].name << " grew early at " << e.time;
      resized[e.job] = e.time;
    } else if (std::string(kind) == "resize") {
      ++shrunk;
    }
    if (std::string(kind) == "start") resized[e.job] = e.time;
    running[e.job] = e.replicas;
  }
  EXPECT_GT(grown, 0);
  EXPECT_GT(shrunk, 0);
}

TEST(TimelinePerJobElastic, NoGrowthWithinAResizeIntervalLongerThanTheRun) {
  GPUORCH_REQUIRE_POLLUX(dir);
  std::vector<JobSpec> jobs;
  const auto r = run_first(dir, 20, ElasticGangs{1e9, 1e8}, jobs);
  std::map<std::size_t, int> running;
  for (const auto& e : r.events) {
    if (std::string(event_key(e.kind)) == "resize") {
      EXPECT_LT(e.replicas, running[e.job]) << jobs[e.job].name << " grew at " << e.time;
    }
    running[e.job] = e.replicas;
  }
}

// A job's round places that job only (JobLayerRun::round_on's `only_job`), as the cluster's
// admission of one job binds its pods only: a running gang that gives a replica above minMember
// to it does not grow back in that round onto what the other victims free (the layer's growth
// would), it grows in its own turn, by its resize interval (docs/sim-timeline.md, "Same answer
// over time", workload-3 at t = 9720).
TEST(TimelinePerJobElastic, AGangThatGivesAReplicaDoesNotGrowBackInAnotherJobsRound) {
  auto round = [](std::string_view only_job) {
    cluster::Cluster cluster(uniform_nodes(1, 4));
    // a may hold 3 GPUs, b 1; b holds the node: gang g (minMember 1) on GPUs 0 and 1, z on 2-3.
    JobLayerRun run({test::gpu_queue("a", 3), test::gpu_queue("b", 1)}, "tightest-fit");
    auto spec = [](const char* name, const char* queue, int gpus, int min, int max) {
      workload::JobSpec s;
      s.name = name;
      s.queue = queue;
      s.replica.gpu_count = gpus;
      s.replica.gpu_milli = 1000;
      s.min_replicas = min;
      s.max_replicas = max;
      return s;
    };
    const workload::JobSpec g = spec("g", "b", 1, 1, 2), z = spec("z", "b", 2, 1, 1),
                            p = spec("p", "a", 1, 2, 3);
    std::vector<sched::jobs::JobState> states(3);
    const std::vector<const workload::JobSpec*> specs = {&g, &z, &p};
    for (std::size_t i = 0; i < 3; ++i) {
      states[i].spec = specs[i];
      states[i].queue = *run.tree().find(specs[i]->queue);
      states[i].running_since = i == 1 ? 4900 : 1000;  // z started last: the cheapest victim
    }
    for (const auto& [job, gpus] :
         std::vector<std::pair<std::size_t, std::vector<int>>>{{0, {0}}, {0, {1}}, {1, {2, 3}}}) {
      cluster::Placement pl{0, 0, 0, 1000, gpus};
      cluster.apply(pl);
      states[job].placements.push_back(pl);
    }
    std::vector<sched::jobs::JobState*> refs = {&states[0], &states[1], &states[2]};
    sched::jobs::RoundOptions o;
    o.now = 5000;
    o.explain = false;
    run.round_on(cluster, refs, o, only_job);
    return std::make_pair(states[0].replicas(), states[2].replicas());
  };
  // p takes g's replica above minMember and z, and then the GPU z left: g stays at 1.
  EXPECT_EQ(round("p"), std::make_pair(1, 3));
  // Any job may be placed (the other policies' rounds): g grows back onto it in p's round.
  EXPECT_EQ(round(""), std::make_pair(2, 2));
}

// workload-3's first 40 jobs on the replay's two queues (team-a, team-b in turn), as
// scripts/k8s-timeline-replay runs them. At t = 9720 cifar10-24 reclaims cifar10-13's pods and
// one of deepspeech2-29's; then one of cifar10-24's just-bound pods above minMember may go back
// to team-b. The scheduler waits to see them bound and decides every pending pod again, and
// yolov3-23, first in the queue, takes it: so does the simulator, by repeating the tick's
// decisions (one pass gave it to deepspeech2-29, after cifar10-24 in the order).
TEST(TimelinePerJobElastic, WhatAJustBoundGangGivesBackGoesToTheFirstInTheQueue) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const test::TempDir tmp;
  std::ifstream in(dir / "workload-3.csv");
  std::ofstream out(tmp.file("w.csv"));
  std::string line;
  for (int i = 0; i <= 40 && std::getline(in, line); ++i) {
    out << line << (i == 0 ? ",queue" : i % 2 == 1 ? ",team-a" : ",team-b") << "\n";
  }
  out.close();
  AppTable apps;
  const auto jobs = read_pollux_workload(tmp.file("w.csv"), (dir / "apps").string(), apps);
  PolicyOptions po;
  po.queues = io::load_queues(test::fixture("timeline/replay_queues.yaml"));
  auto p = make_fifo_per_job(po, ElasticGangs{});
  TimelineOptions o;
  o.record_events = true;
  const auto r = run_timeline(jobs, apps, uniform_nodes(4, 4), *p, "fifo:per-job:elastic", o);
  std::map<std::string, int> after;  // replicas at the end of t = 9720
  for (const auto& e : r.events) {
    if (e.time <= 9720 && e.kind != TimelineEvent::Kind::kReport)
      after[jobs[e.job].name] = e.replicas;
  }
  EXPECT_EQ(after["yolov3-23"], 3);
  EXPECT_EQ(after["deepspeech2-29"], 5);
  EXPECT_EQ(after["cifar10-24"], 8);
  EXPECT_EQ(after["cifar10-13"], 0);
}

TEST(TimelinePerJobElastic, RigidPerJobIsUnchangedWithoutElastic) {
  GPUORCH_REQUIRE_POLLUX(dir);
  std::vector<JobSpec> jobs;
  const auto r = run_first(dir, 20, std::nullopt, jobs);
  for (const auto& e : r.events) {
    EXPECT_STRNE(event_key(e.kind), "resize");
    if (std::string(event_key(e.kind)) == "start") {
      EXPECT_EQ(e.replicas, jobs[e.job].replicas);
    }
  }
}

TEST(TimelinePerJobElastic, EachRunningGangPublishesItsThroughputBeforeTheTicksDecisions) {
  GPUORCH_REQUIRE_POLLUX(dir);
  std::vector<JobSpec> jobs;
  const auto r = run_first(dir, 20, ElasticGangs{}, jobs);
  std::map<std::size_t, int> running;
  int reports = 0;
  for (const auto& e : r.events) {
    if (e.kind != TimelineEvent::Kind::kReport) {
      running[e.job] = e.replicas;
      continue;
    }
    ++reports;
    // At the size it ran on since the last tick, one pod per replica, as launch reports it.
    EXPECT_EQ(e.report.world_size, running[e.job]) << jobs[e.job].name << " at " << e.time;
    EXPECT_EQ(e.report.nodes, e.report.world_size);
    EXPECT_GT(e.report.samples_per_second, 0);
    EXPECT_EQ(e.report.time, simulated_rfc3339(e.time));
    std::string why;
    const auto back =
        workload::parse_throughput_annotation(workload::to_annotation(e.report), &why);
    ASSERT_TRUE(back.has_value()) << why;
    EXPECT_EQ(back->local_batch, e.report.local_batch);
  }
  EXPECT_GT(reports, 20);
  std::vector<JobSpec> rigid_jobs;
  for (const auto& e : run_first(dir, 20, std::nullopt, rigid_jobs).events) {
    EXPECT_NE(e.kind, TimelineEvent::Kind::kReport);
  }
}

TEST(TimelineThroughput, SimulatedTimesAreRfc3339FromTheEpoch) {
  EXPECT_EQ(simulated_rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(simulated_rfc3339(86400 + 3661), "1970-01-02T01:01:01Z");
  EXPECT_EQ(simulated_rfc3339(951782400), "2000-02-29T00:00:00Z");
}

}  // namespace
}  // namespace gpuorch::sim
