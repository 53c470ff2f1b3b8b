// Each policy's rule on a tiny case small enough to check by hand.
#include "gpuorch/sim/timeline_policy.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>

#include "gpuorch/sim/timeline_engine.hpp"
#include "sim/timeline_support.hpp"

namespace gpuorch::sim {
namespace {

JobSpec rigid(std::size_t id, int gpus, Seconds duration) {
  JobSpec s;
  s.id = id;
  s.name = fmt::format("job-{}", id);
  s.replicas = gpus;
  s.duration = duration;
  return s;
}

JobSpec profiled(std::size_t id, const std::string& app, int gpus, int batch) {
  JobSpec s;
  s.id = id;
  s.name = fmt::format("{}-{}", app, id);
  s.application = app;
  s.replicas = gpus;
  s.batch = batch;
  s.max_replicas = 64;  // elastic, as read_pollux_workload makes a profiled job
  return s;
}

// Applies a policy's decision the way the engine does.
std::vector<int> decide(TimelinePolicy& p, Seconds now, std::vector<Job>& jobs,
                        cluster::Cluster& c) {
  std::vector<Job*> active;
  for (auto& j : jobs) active.push_back(&j);
  ReplicaPlacer placer(c);
  for (auto& change : p.allocate(now, active, placer)) {
    change.job->reallocate(now, std::move(change.placements));
  }
  std::vector<int> gpus;
  for (const Job& j : jobs) gpus.push_back(j.gpus());
  return gpus;
}

PolicyOptions options(int total) {
  PolicyOptions o;
  o.total_gpus = total;
  o.gpus_per_node = 4;
  return o;
}

TEST(TimelinePolicy, FifoBlocksBehindTheHeadAndSjfBackfills) {
  const std::vector<JobSpec> specs = {rigid(0, 3, 1000), rigid(1, 2, 1000), rigid(2, 1, 10)};
  for (const std::string name : {"fifo", "sjf"}) {
    cluster::Cluster c(uniform_nodes(1, 4));
    std::vector<Job> jobs;
    for (const auto& s : specs) jobs.emplace_back(s, nullptr, BatchRule::kFixed);
    auto p = make_timeline_policy(name, options(4));
    const auto g = decide(*p, 60, jobs, c);
    if (name == "fifo") {
      EXPECT_EQ(g, (std::vector<int>{3, 0, 0}));  // job 2 fits but waits behind job 1
    } else {
      // Shortest first: job 2 (10 s), then job 0 and job 1 (1000 s each, submission order).
      EXPECT_EQ(g, (std::vector<int>{3, 0, 1}));
    }
  }
}

TEST(TimelinePolicy, LasgoVariantPartsJoinWithPlus) {
  // Each part alone and joined with '+'; an unknown part, a bad number or a trailing '+' names
  // no policy.
  for (const char* ok : {"lasgo",
                         "lasgo:carry=on",
                         "lasgo:carry=off",
                         "lasgo:shape=any",
                         "lasgo:shape=uniform+idle=0.1",
                         "lasgo:trust=4",
                         "lasgo:carry=on+trust=4",
                         "lasgo:explore=always+seen=0+rw=2",
                         "lasgo:scale=8+las=off",
                         "lasgo:steps=app+cap=measured+shape=measured",
                         "lasgo:steps=own+cap=run+explore=request+net=app",
                         "lasgo:prior=linear",
                         "lasgo:prior=app+explore=double",
                         "lasgo:cap=app",
                         "lasgo:start=free",
                         "lasgo:shape=nodes",
                         "lasgo:shape=fill",
                         "lasgo:las=app+restart=app",
                         "lasgo:restart=app-all",
                         "lasgo:start=aged+order=none",
                         "lasgo:order=app",
                         "lasgo:order=all",
                         "lasgo:probe=idle"}) {
    EXPECT_NE(make_timeline_policy(ok, options(4)), nullptr) << ok;
  }
  for (const char* bad :
       {"lasgo:carry=maybe", "lasgo:shape=odd", "lasgo:idle=1", "lasgo:trust=x", "lasgo:carry=on+",
        "lasgo:+trust=4", "lasgo:carry=on+nope", "lasgo:rw=-1", "lasgo:steps=job", "lasgo:cap=open",
        "lasgo:prior=job", "lasgo:start=paid", "lasgo:shape=node", "lasgo:las=job",
        "lasgo:restart=job", "lasgo:order=job", "lasgo:order="}) {
    EXPECT_EQ(make_timeline_policy(bad, options(4)), nullptr) << bad;
  }
}

TEST(TimelinePolicy, TiresiasDemotesAfterSixteenGpuHoursAndPreempts) {
  cluster::Cluster c(uniform_nodes(1, 4));
  const std::vector<JobSpec> specs = {rigid(0, 4, 100000), rigid(1, 1, 100000)};
  std::vector<Job> jobs;
  for (const auto& s : specs) jobs.emplace_back(s, nullptr, BatchRule::kFixed);
  auto p = make_timeline_policy("tiresias", options(4));
  EXPECT_EQ(decide(*p, 60, jobs, c), (std::vector<int>{4, 0}));
  // 4 GPUs x 4 h = 16 GPU-hours: job 0 moves to the second queue, job 1 runs, job 0 is preempted.
  EXPECT_EQ(decide(*p, 60 + 3 * 3600, jobs, c), (std::vector<int>{4, 0}));
  EXPECT_EQ(decide(*p, 60 + 4 * 3600, jobs, c), (std::vector<int>{0, 1}));
  EXPECT_EQ(c.fully_free_gpus_total(), 3);
}

TEST(TimelinePolicy, TiresiasPlacesOnTheNodeWithTheMostFreeGpusFirst) {
  cluster::Cluster c(uniform_nodes(3, 4));
  const std::vector<JobSpec> specs = {rigid(0, 3, 1000), rigid(1, 6, 1000)};
  std::vector<Job> jobs;
  for (const auto& s : specs) jobs.emplace_back(s, nullptr, BatchRule::kFixed);
  auto p = make_timeline_policy("tiresias", options(12));
  EXPECT_EQ(decide(*p, 60, jobs, c), (std::vector<int>{3, 6}));
  // Job 0 on node 0 (3 GPUs); job 1 takes node 1 (4, lowest id among the most free), then
  // node 2 (2 of its 4).
  EXPECT_EQ(jobs[0].allocation(), (std::vector<cluster::NodeIndex>{0, 0, 0}));
  EXPECT_EQ(jobs[1].allocation(), (std::vector<cluster::NodeIndex>{1, 1, 1, 1, 2, 2}));
}

TEST(TimelinePolicy, OptimusGivesEveryJobOneGpuThenTheLargestGain) {
  GPUORCH_REQUIRE_POLLUX(dir);
  AppTable apps;
  apps.emplace("ncf", AppProfile::load((dir / "apps").string(), "ncf"));
  apps.emplace("cifar10", AppProfile::load((dir / "apps").string(), "cifar10"));
  cluster::Cluster c(uniform_nodes(1, 4));
  const std::vector<JobSpec> specs = {profiled(0, "ncf", 1, 32768),
                                      profiled(1, "cifar10", 1, 2048)};
  std::vector<Job> jobs;
  jobs.emplace_back(specs[0], &apps.at("ncf"), BatchRule::kFixed);
  jobs.emplace_back(specs[1], &apps.at("cifar10"), BatchRule::kFixed);
  auto p = make_timeline_policy("optimus", options(4));
  // ncf may use only one GPU; cifar10 at batch 2048 gains from each further GPU.
  EXPECT_EQ(decide(*p, 60, jobs, c), (std::vector<int>{1, 3}));
}

TEST(TimelinePolicy, PolluxCapsANewJobAtOneGpuThenDoubles) {
  GPUORCH_REQUIRE_POLLUX(dir);
  AppTable apps;
  apps.emplace("cifar10", AppProfile::load((dir / "apps").string(), "cifar10"));
  cluster::Cluster c(uniform_nodes(2, 4));
  const std::vector<JobSpec> specs = {profiled(0, "cifar10", 8, 2048)};
  std::vector<Job> jobs;
  jobs.emplace_back(specs[0], &apps.at("cifar10"), BatchRule::kGoodput);
  auto p = make_timeline_policy("pollux", options(8));
  EXPECT_EQ(decide(*p, 60, jobs, c), (std::vector<int>{1}));
  jobs[0].advance(60, 3600);
  EXPECT_EQ(decide(*p, 3660, jobs, c), (std::vector<int>{2}));
}

TEST(TimelinePolicy, LasgoServesTheLeastServedJobFirst) {
  GPUORCH_REQUIRE_POLLUX(dir);
  AppTable apps;
  apps.emplace("cifar10", AppProfile::load((dir / "apps").string(), "cifar10"));
  cluster::Cluster c(uniform_nodes(1, 1));
  const std::vector<JobSpec> specs = {profiled(0, "cifar10", 1, 2048),
                                      profiled(1, "cifar10", 1, 2048)};
  std::vector<Job> jobs;
  for (const auto& s : specs) jobs.emplace_back(s, &apps.at("cifar10"), BatchRule::kGoodput);
  auto p = make_timeline_policy("default", options(1));
  EXPECT_EQ(decide(*p, 60, jobs, c), (std::vector<int>{1, 0}));
  jobs[0].advance(60, 7200);  // two GPU-hours of service for job 0
  EXPECT_EQ(decide(*p, 7260, jobs, c), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace gpuorch::sim
