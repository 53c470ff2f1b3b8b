// Sizing elastic jobs by value: the best gain per GPU first, each queue within its fair share
// before any queue takes what others leave, limits held, higher priorities first, Optimus's
// minimum-first rule, each GPU model's share by its own weight; and, on one unlimited queue, the
// plain greedy checked by brute force.
#include "gpuorch/sched/jobs/elastic_sizing.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sched/jobs/gpu_queue.hpp"

namespace gpuorch::sched::jobs {
namespace {

using gpuorch::test::gpu_queue;

ElasticDemand demand(std::vector<double> value, std::size_t q = 0, int priority = 0) {
  ElasticDemand d;
  d.queue = q;
  d.value = std::move(value);
  d.priority = priority;
  return d;
}

// Concave-enough values: the gain of each GPU, summed.
std::vector<double> curve(std::initializer_list<double> gains) {
  std::vector<double> v{0};
  for (const double g : gains) v.push_back(v.back() + g);
  return v;
}

TEST(ElasticSizing, TakesTheBestGainPerGpu) {
  const QueueTree one;
  // Job 0 gains 10 for its first GPU and little after; job 1 gains 4 per GPU for two GPUs.
  const std::vector<ElasticDemand> d = {demand({0, 10, 11, 11.5}), demand({0, 4, 8, 8})};
  EXPECT_EQ(size_by_value(one, 3, d), (std::vector<int>{1, 2}));
  EXPECT_EQ(size_by_value(one, 1, d), (std::vector<int>{1, 0}));
  EXPECT_EQ(size_by_value(one, 10, d), (std::vector<int>{3, 2}));
}

TEST(ElasticSizing, JumpsToTheCountWithTheBestAverageGain) {
  // One GPU is worth little, four (a whole node's all-reduce) a lot: a jump, unless single steps.
  const QueueTree one;
  const std::vector<ElasticDemand> d = {demand({0, 1, 2, 3, 20}), demand(curve({2, 2, 2, 2}))};
  EXPECT_EQ(size_by_value(one, 4, d), (std::vector<int>{4, 0}));
  SizingOptions steps;
  steps.single_steps = true;
  EXPECT_EQ(size_by_value(one, 4, d, steps), (std::vector<int>{0, 4}));
}

TEST(ElasticSizing, EachQueueSpendsItsShareBeforeOthersTakeWhatIsLeft) {
  // a is guaranteed 6 of 8 GPUs, b 2; b's jobs are worth far more per GPU, a's want 6.
  const QueueTree t({gpu_queue("a", 6), gpu_queue("b", 2)});
  const std::vector<ElasticDemand> d = {demand(curve({1, 1, 1, 1, 1, 1}), 0),
                                        demand(curve({9, 9, 9, 9, 9, 9, 9, 9}), 1)};
  EXPECT_EQ(size_by_value(t, 8, d), (std::vector<int>{6, 2}));
  // When a wants only 3, b takes the rest, quota or not.
  const std::vector<ElasticDemand> small = {demand(curve({1, 1, 1}), 0), d[1]};
  EXPECT_EQ(size_by_value(t, 8, small), (std::vector<int>{3, 5}));
}

TEST(ElasticSizing, NoQueuePassesItsLimit) {
  const QueueTree t({gpu_queue("a", 2, 3), gpu_queue("b", 2)});
  const std::vector<ElasticDemand> d = {demand(curve({9, 9, 9, 9, 9, 9}), 0),
                                        demand(curve({1}), 1)};
  EXPECT_EQ(size_by_value(t, 8, d), (std::vector<int>{3, 1}));
}

TEST(ElasticSizing, HigherPrioritiesAreSizedFirstWithinTheirQueue) {
  const QueueTree one;
  // The low-priority job is worth more per GPU, but the high-priority one goes first.
  const std::vector<ElasticDemand> d = {demand(curve({9, 9, 9}), 0, 0),
                                        demand(curve({1, 1}), 0, 5)};
  EXPECT_EQ(size_by_value(one, 3, d), (std::vector<int>{1, 2}));
}

TEST(ElasticSizing, OptimusGivesEveryJobItsMinimumFirstAndGrowsOnlyThose) {
  const QueueTree one;
  SizingOptions o;
  o.min_first = true;
  o.single_steps = true;
  const std::vector<ElasticDemand> d = {demand(curve({0, 5, 5})), demand(curve({0, 1})),
                                        demand(curve({0, 9}))};
  // 2 GPUs: the first two jobs in order get one each; the third, worth more, gets none.
  EXPECT_EQ(size_by_value(one, 2, d, o), (std::vector<int>{1, 1, 0}));
  // 4 GPUs: after the minimums, the one left goes to the best single step (job 2's 9).
  EXPECT_EQ(size_by_value(one, 4, d, o), (std::vector<int>{1, 1, 2}));
}

TEST(ElasticSizing, GangsOfMinAndWiderReplicasCountTheirGpus) {
  const QueueTree one;
  ElasticDemand gang = demand(curve({1, 1, 1, 1}));
  gang.min = 2;
  gang.gpus_per_replica = 2;  // each replica holds 2 GPUs
  const std::vector<ElasticDemand> d = {gang};
  // 5 GPUs hold 2 replicas of 2; one replica alone is below the gang's minimum.
  EXPECT_EQ(size_by_value(one, 5, d), (std::vector<int>{2}));
  EXPECT_EQ(size_by_value(one, 3, d), (std::vector<int>{0}));
}

TEST(ElasticSizing, AJobThatMayNotBePreemptedKeepsWhatItRuns) {
  const QueueTree one;
  ElasticDemand kept = demand({0, 0.1, 0.2, 0.3});
  kept.keep = 2;  // worth little, but it keeps its 2 replicas
  const std::vector<ElasticDemand> d = {kept, demand(curve({9, 9, 9}))};
  EXPECT_EQ(size_by_value(one, 3, d), (std::vector<int>{2, 1}));
}

// With one unlimited queue and concave values, the greedy's total value is the best any split
// of the GPUs achieves (checked against every split of small cases).
TEST(ElasticSizing, GreedyIsOptimalForConcaveValuesByBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> gain(0.1, 10);
  const QueueTree one;
  for (int trial = 0; trial < 200; ++trial) {
    const int jobs = 1 + int(rng() % 3);
    const int gpus = 1 + int(rng() % 7);
    std::vector<ElasticDemand> d;
    for (int j = 0; j < jobs; ++j) {
      std::vector<double> g(1 + rng() % 4);
      for (auto& x : g) x = gain(rng);
      std::sort(g.rbegin(), g.rend());  // diminishing returns
      std::vector<double> v{0};
      for (const double x : g) v.push_back(v.back() + x);
      d.push_back(demand(v));
    }
    const auto counts = size_by_value(one, gpus, d);
    double got = 0;
    int used = 0;
    for (int j = 0; j < jobs; ++j) {
      got += d[std::size_t(j)].value[std::size_t(counts[std::size_t(j)])];
      used += counts[std::size_t(j)];
    }
    ASSERT_LE(used, gpus);
    double best = 0;
    std::vector<int> c(std::size_t(jobs), 0);
    for (;;) {
      int sum = std::accumulate(c.begin(), c.end(), 0);
      if (sum <= gpus) {
        double v = 0;
        for (int j = 0; j < jobs; ++j) v += d[std::size_t(j)].value[std::size_t(c[std::size_t(j)])];
        best = std::max(best, v);
      }
      std::size_t k = 0;
      while (k < c.size() && ++c[k] >= int(d[k].value.size())) c[k++] = 0;
      if (k == c.size()) break;
    }
    EXPECT_NEAR(got, best, 1e-9) << "trial " << trial;
  }
}

TEST(ElasticSizing, CpuAndMemoryCountWhereTheCapacityHasThem) {
  // 8 GPUs and 64 CPUs. Job 0's replicas need 1 GPU and 16 CPUs and are worth 1 each; job 1's
  // need 1 GPU and 1 CPU and are worth 0.9 each (at most 4). Counting GPUs alone, job 0 takes
  // all 8 GPUs and 128 CPUs the cluster does not have. Counting CPUs, a replica of job 0 costs
  // its dominant share (16 of 64 CPUs: 2 of 8 GPUs), so job 1's 4 come first and job 0 gets the
  // 3 replicas the 60 CPUs left hold.
  const QueueTree one;
  std::vector<ElasticDemand> d = {demand(curve({1, 1, 1, 1, 1, 1, 1, 1})),
                                  demand(curve({0.9, 0.9, 0.9, 0.9}))};
  d[0].cpu_milli_per_replica = 16000;
  d[1].cpu_milli_per_replica = 1000;
  EXPECT_EQ(size_by_value(one, 8, d), (std::vector<int>{8, 0}));
  const std::vector<int> counts = size_by_value(one, Amounts{8000, 64000, 0}, d);
  EXPECT_EQ(counts, (std::vector<int>{3, 4}));
  EXPECT_LE(counts[0] * 16000 + counts[1] * 1000, 64000);
  // A kind without a capacity (a simulator's nodes without CPU figures) is not counted.
  EXPECT_EQ(size_by_value(one, Amounts{8000, 0, 0}, d), (std::vector<int>{8, 0}));
  // Memory the same way: 4 replicas of 32 GiB fill 128 GiB.
  d[0].cpu_milli_per_replica = 0;
  d[0].memory_mib_per_replica = 32 * 1024;
  d[1].cpu_milli_per_replica = 0;
  EXPECT_EQ(size_by_value(one, Amounts{8000, 0, 128 * 1024}, d), (std::vector<int>{4, 4}));
}

TEST(ElasticSizing, AQueuesCpuQuotaAndLimitHoldLikeItsGpus) {
  // Queue a may hold at most 8 CPUs: its CPU-hungry job stops at 2 replicas although GPUs are
  // free and nobody else wants them; queue b's job is not held back by a's limit.
  workload::QueueSpec a = gpu_queue("a", 4);
  a.cpu.quota = 8000;
  a.cpu.limit = 8000;
  const QueueTree t({a, gpu_queue("b", 4)});
  std::vector<ElasticDemand> d = {demand(curve({5, 5, 5, 5, 5, 5, 5, 5}), 0),
                                  demand(curve({1, 1}), 1)};
  d[0].cpu_milli_per_replica = 4000;
  d[1].cpu_milli_per_replica = 4000;
  EXPECT_EQ(size_by_value(t, Amounts{8000, 64000, 0}, d), (std::vector<int>{2, 2}));
  EXPECT_EQ(size_by_value(t, 8, d), (std::vector<int>{6, 2}));
}

TEST(ElasticSizing, WhatNobodyWithinQuotaWantsOfAModelIsSharedByItsOwnWeight) {
  // 8 GPUs of model B and 8 of a model no queue names; neither queue has quota of B, a's
  // overQuotaWeight for B is 3, b's 1 (their `gpu` weights are equal). Jobs restricted to B:
  // 6 and 2, not the 4 and 4 the `gpu` weights would give; nobody passes the 8 B GPUs.
  workload::QueueSpec a = gpu_queue("a", 8);
  workload::QueueSpec b = gpu_queue("b", 8);
  workload::QueueResource r;
  r.over_quota_weight = 3;
  a.gpu_models.push_back({"B", r});
  r.over_quota_weight = 1;
  b.gpu_models.push_back({"B", r});
  const QueueTree t({a, b});
  const std::size_t slot = *t.model_slot("B");
  Amounts capacity{16000};
  capacity[slot] = 8000;
  std::vector<ElasticDemand> d = {demand(curve({1, 1, 1, 1, 1, 1, 1, 1}), 0),
                                  demand(curve({1, 1, 1, 1, 1, 1, 1, 1}), 1)};
  for (auto& x : d) x.models = {slot};
  const Sized s = size_by_value_per_model(t, capacity, d);
  EXPECT_EQ(s.counts, (std::vector<int>{6, 2}));
  EXPECT_EQ(s.models, (std::vector<std::size_t>{slot, slot}));
  // Without the model's slot in the capacity the model bounds nothing: 8 each.
  EXPECT_EQ(size_by_value(t, 16, d), (std::vector<int>{8, 8}));
}

}  // namespace
}  // namespace gpuorch::sched::jobs
