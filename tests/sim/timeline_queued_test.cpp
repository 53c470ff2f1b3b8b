// The rigid orders on the job layer: with one queue, tiresias on the job layer (placing through
// the scheduler core with the artifact's most-free-first rule) gives every shipped per-job JCT of
// the Pollux artifact, as the simulator's own tiresias does; and on queues the job layer keeps
// each queue's share while no GPU idles that a waiting job could use.
#include "gpuorch/sim/timeline_queued.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/sim/timeline_engine.hpp"
#include "gpuorch/sim/timeline_metrics.hpp"
#include "gpuorch/sim/timeline_workload.hpp"
#include "sim/timeline_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

TEST(TimelineQueued, TiresiasOnTheJobLayerReproducesTheShippedJcts) {
  GPUORCH_REQUIRE_POLLUX(dir);
  for (const char* load : {"0.5", "1.0"}) {
    const auto folder = std::string(load) == "0.5" ? dir / "workloads-0.5" : dir;
    AppTable apps;
    const auto jobs =
        read_pollux_workload((folder / "workload-6.csv").string(), (dir / "apps").string(), apps);
    QueuedOptions o;
    o.order = "tiresias";
    o.placement = "most-free";
    auto p = make_queued(o);
    const auto r = run_timeline(jobs, apps, uniform_nodes(16, 4), *p, "tiresias", {});
    std::ifstream in(dir / (std::string("results-jobload-") + load) / "tiresias-summary.json");
    const auto shipped = nlohmann::json::parse(in)["jcts"]["workload-6"];
    ASSERT_EQ(r.jobs.size(), shipped.size());
    for (const auto& j : r.jobs) {
      EXPECT_EQ(j.completion - j.submit, shipped[j.name].get<Seconds>()) << load << " " << j.name;
    }
  }
}

TEST(TimelineQueued, QueuesShareTheClusterAndEveryJobFinishes) {
  const auto jobs = read_philly_trace(test::fixture("timeline/philly_tenants.csv"));
  const auto queues = io::load_queues(test::fixture("timeline/tenant_queues.yaml"));
  check_job_queues(jobs, sched::jobs::QueueTree(queues));
  for (const char* order : {"fifo", "sjf", "tiresias"}) {
    QueuedOptions o;
    o.order = order;
    o.queues = queues;
    auto p = make_queued(o);
    const auto r = run_timeline(jobs, {}, uniform_nodes(2, 4), *p, order, {});
    for (const auto& j : r.jobs) EXPECT_GE(j.completion, j.submit) << order << " " << j.name;
    // Work conservation: whenever a job waited, the GPUs it needed were held.
    for (const auto& s : r.samples) {
      if (s.queued > 0) {
        EXPECT_GT(s.allocated_gpus, 0) << order << " at " << s.time;
      }
    }
  }
}

// Hides the engine's events from a policy, so it decides with a full round over every active job.
class WithoutEvents final : public TimelinePolicy {
 public:
  explicit WithoutEvents(std::unique_ptr<TimelinePolicy> inner) : inner_(std::move(inner)) {}

 protected:
  Reallocations schedule(Seconds now, std::span<Job* const> active,
                         cluster::Cluster& cluster) override {
    ReplicaPlacer placer(cluster);
    return inner_->allocate(now, active, placer);
  }

 private:
  std::unique_ptr<TimelinePolicy> inner_;
};

void expect_same_jcts(const std::vector<JobSpec>& jobs, const std::vector<workload::QueueSpec>& qs,
                      const std::vector<cluster::NodeSpec>& nodes, const char* order = "fifo") {
  QueuedOptions o;
  o.order = order;
  o.queues = qs;
  auto on_events = make_queued(o);
  WithoutEvents full(make_queued(o));
  const auto a = run_timeline(jobs, {}, nodes, *on_events, order, {});
  const auto b = run_timeline(jobs, {}, nodes, full, order, {});
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].completion, b.jobs[i].completion) << a.jobs[i].name;
    EXPECT_EQ(a.jobs[i].restarts, b.jobs[i].restarts) << a.jobs[i].name;
  }
}

// The tenants fixture on its queues and on one queue; then (with the Pollux artifact's traces) a
// long backlog on Philly's tenants of unequal quota and weight, with reclaim: its first `first`
// jobs on 24 GPUs, on those queues and on one.
void expect_same_jcts_on_tenants(const char* order, std::size_t first) {
  const auto tenants = read_philly_trace(test::fixture("timeline/philly_tenants.csv"));
  expect_same_jcts(tenants, io::load_queues(test::fixture("timeline/tenant_queues.yaml")),
                   uniform_nodes(2, 4), order);
  expect_same_jcts(tenants, {}, uniform_nodes(2, 4), order);
  GPUORCH_REQUIRE_POLLUX(dir);
  auto jobs = read_philly_trace((dir / "philly.csv").string(), first);
  std::vector<workload::QueueSpec> qs;
  std::map<std::string, int> seen;
  for (const auto& j : jobs) seen.emplace(j.queue, int(seen.size()));
  for (const auto& [name, index] : seen) {
    workload::QueueSpec q;
    q.name = name;
    q.gpu.quota = index % 3 == 0 ? 4000 : 1000;
    q.gpu.over_quota_weight = 1 + index % 2;
    qs.push_back(q);
  }
  expect_same_jcts(jobs, qs, uniform_nodes(6, 4), order);
  expect_same_jcts(jobs, {}, uniform_nodes(6, 4), order);
}

// fifo on the engine's events lists only the jobs that can start (the running ones and each
// queue's waiting jobs up to what is free): the same decisions as the round over every job.
TEST(TimelineQueued, StrictFifoOnEventsDecidesAsTheRoundOverEveryJob) {
  expect_same_jcts_on_tenants("fifo", 3000);
}

// tiresias on the engine's events rounds over the jobs being served and adds back only the
// waiting jobs that could be selected or start (sched::jobs::WaitingIndex): the same decisions
// as the round over every job.
TEST(TimelineQueued, TiresiasOnEventsDecidesAsTheRoundOverEveryJob) {
  expect_same_jcts_on_tenants("tiresias", 1500);
}

// sjf on the engine's events rounds over the running jobs and adds back only the waiting jobs
// that could start on what is free or, one at a time in the round's order, by reclaim
// (sched::jobs::WaitingIndex::next_candidate): the same decisions as the round over every job.
TEST(TimelineQueued, SjfOnEventsDecidesAsTheRoundOverEveryJob) {
  expect_same_jcts_on_tenants("sjf", 1500);
}

}  // namespace
}  // namespace gpuorch::sim
