// job_layer_round: one scheduling round of the job layer (sched/jobs/) at scale: 10,000 nodes of
// 8 GPUs, 15 queues with quotas, 20,000 running jobs and 5,000 waiting ones, every replica placed
// through the scheduler core (efd-online). The round starts what fits, reclaims for queues below their
// fair share and explains every job left waiting. Each iteration starts from the same state (the
// round's changes are undone outside the timing); the scheduler's score index stays warm, as in a
// long-running scheduler.
//
//   build/release/bench/job_layer_round [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <deque>
#include <memory>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/jobs/core_placer.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/policy.hpp"

namespace {

using namespace gpuorch;

constexpr int kNodes = 10'000;
constexpr int kRunning = 20'000;
constexpr int kWaiting = 5'000;
constexpr int kQueues = 15;

std::vector<cluster::NodeSpec> nodes() {
  std::vector<cluster::NodeSpec> out;
  for (int i = 0; i < kNodes; ++i) {
    cluster::NodeSpec n;
    n.name = fmt::format("node-{}", i);
    n.gpu_count = 8;
    n.gpu_model = "H100";
    n.cpu_milli = 192'000;
    n.memory_mib = 2'000'000;
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<workload::QueueSpec> queues() {
  std::vector<workload::QueueSpec> out;
  workload::QueueSpec root;
  root.name = "org";
  out.push_back(root);
  for (int q = 0; q < kQueues; ++q) {
    workload::QueueSpec s;
    s.name = fmt::format("team-{}", q);
    s.parent = "org";
    // Unequal quotas summing to the cluster: 8..22 parts of 225.
    s.gpu.quota = std::int64_t{kNodes} * 8 * 1000 * (8 + q) / 225;
    s.gpu.over_quota_weight = 1;
    out.push_back(s);
  }
  return out;
}

// Philly-like sizes: most jobs one GPU, a tail of whole nodes and more.
double uniform(base::Rng& rng) { return double(rng.below(1'000'000)) / 1e6; }

int job_size(base::Rng& rng) {
  const double u = uniform(rng);
  if (u < 0.40) return 1;
  if (u < 0.55) return 2;
  if (u < 0.75) return 4;
  if (u < 0.95) return 8;
  return 16;
}

struct World {
  cluster::Cluster cluster{nodes()};
  sched::jobs::QueueTree tree{queues()};
  std::unique_ptr<sched::Policy> policy = sched::make_policy("efd-online", {&cluster});
  sched::Scheduler scheduler{cluster, *policy};
  sched::RequestResolver resolver{cluster};
  sched::jobs::JobLayer layer{cluster, tree,
                              sched::jobs::core_placer(cluster, scheduler, resolver)};
  std::deque<workload::JobSpec> specs;
  std::vector<sched::jobs::JobState> jobs;

  void add(base::Rng& rng, int n, std::int64_t submit) {
    for (int i = 0; i < n; ++i) {
      workload::JobSpec s;
      s.name = fmt::format("job-{}", specs.size());
      // Skewed demand: the first queues submit most, so they run over their quota.
      const int q = std::min(kQueues - 1, int(uniform(rng) * uniform(rng) * kQueues));
      s.queue = fmt::format("team-{}", q);
      s.min_replicas = s.max_replicas = job_size(rng);
      s.submit = submit;
      specs.push_back(std::move(s));
      sched::jobs::JobState st;
      st.spec = &specs.back();
      st.queue = *tree.find(specs.back().queue);
      st.rank = double(jobs.size());
      jobs.push_back(std::move(st));
    }
  }
};

void BM_JobLayerRound(benchmark::State& state) {
  World w;
  base::Rng rng(42);
  // Fill the cluster with running jobs (rounds of arrivals until 20,000 run).
  sched::jobs::RoundOptions o;
  for (std::int64_t t = 0; std::ssize(w.jobs) < kRunning; t += 60) {
    w.add(rng, std::min<int>(2'000, kRunning - int(w.jobs.size())), t);
    o.now = t;
    w.layer.round(w.jobs, o);
    std::erase_if(w.jobs, [](const auto& j) { return j.replicas() == 0; });
  }
  w.add(rng, kWaiting, 3600);
  o.now = 3660;
  std::vector<std::vector<cluster::Placement>> before;
  for (const auto& j : w.jobs) before.push_back(j.placements);
  int running = 0;
  for (const auto& j : w.jobs) running += j.replicas() > 0;
  sched::jobs::RoundStats stats;
  for (auto _ : state) {
    stats = w.layer.round(w.jobs, o);
    state.PauseTiming();
    for (auto& j : w.jobs) {
      for (auto it = j.placements.rbegin(); it != j.placements.rend(); ++it) w.cluster.release(*it);
    }
    for (std::size_t i = 0; i < w.jobs.size(); ++i) {
      w.jobs[i].placements = before[i];
      for (const auto& p : before[i]) w.cluster.apply(p);
    }
    state.ResumeTiming();
  }
  state.counters["running_before"] = running;
  state.counters["waiting_before"] = double(w.jobs.size()) - running;
  state.counters["started"] = stats.started;
  state.counters["preempted"] = stats.preempted;
  state.counters["still_waiting"] = stats.waiting;
  state.counters["placement_attempts"] = stats.placement_attempts;
  state.counters["free_gpus"] = double(w.cluster.fully_free_gpus_total());
}
BENCHMARK(BM_JobLayerRound)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
