// Fair shares of the queue tree: quotas first, the rest by overQuotaWeight up to what each queue
// wants and its limit, higher-priority queues first, and the same again inside each parent.
#include "gpuorch/sched/jobs/queue_tree.hpp"

#include <gtest/gtest.h>

namespace gpuorch::sched::jobs {
namespace {

workload::QueueSpec queue(std::string name, double gpu_quota, double weight = 1,
                          std::string parent = "", std::int64_t gpu_limit = workload::kUnlimited,
                          int priority = 0) {
  workload::QueueSpec q;
  q.name = std::move(name);
  q.parent = std::move(parent);
  q.priority = priority;
  q.gpu.quota = static_cast<std::int64_t>(gpu_quota * 1000);
  q.gpu.limit = gpu_limit == workload::kUnlimited ? gpu_limit : gpu_limit * 1000;
  q.gpu.over_quota_weight = weight;
  return q;
}

Amounts gpus(double n) { return Amounts{n * 1000, 0, 0}; }

std::vector<Amounts> demand(const QueueTree& t, std::map<std::string, double> want) {
  std::vector<Amounts> d(t.size(), Amounts{});
  for (const auto& [name, g] : want) d[*t.find(name)] = gpus(g);
  return d;
}

double share(const QueueTree& t, const std::vector<Amounts>& s, const std::string& name) {
  return s[*t.find(name)][0] / 1000;
}

TEST(QueueTree, NoQueuesIsOneDefaultQueueThatMayHoldEverything) {
  const QueueTree t;
  ASSERT_EQ(t.size(), 1U);
  EXPECT_EQ(t.spec(0).name, "default");
  EXPECT_DOUBLE_EQ(share(t, t.fair_shares(demand(t, {{"default", 100}}), gpus(64)), "default"), 64);
  EXPECT_DOUBLE_EQ(share(t, t.fair_shares(demand(t, {{"default", 10}}), gpus(64)), "default"), 10);
}

TEST(QueueTree, QuotaFirstThenTheRestByWeightUpToDemand) {
  const QueueTree t({queue("a", 8, 1), queue("b", 8, 3), queue("c", 0, 1)});
  // 32 GPUs: a and b get their 8; the 16 left go 1:3:1, but c wants only 2, so a and b share the
  // remaining 14 as 1:3 (water-filling).
  const auto s = t.fair_shares(demand(t, {{"a", 100}, {"b", 100}, {"c", 2}}), gpus(32));
  EXPECT_DOUBLE_EQ(share(t, s, "c"), 2);
  EXPECT_DOUBLE_EQ(share(t, s, "a"), 8 + 14.0 / 4);
  EXPECT_DOUBLE_EQ(share(t, s, "b"), 8 + 14.0 * 3 / 4);
  // A queue that wants less than its quota keeps only what it wants; the rest goes to others.
  const auto idle = t.fair_shares(demand(t, {{"a", 1}, {"b", 100}}), gpus(32));
  EXPECT_DOUBLE_EQ(share(t, idle, "a"), 1);
  EXPECT_DOUBLE_EQ(share(t, idle, "b"), 31);
}

TEST(QueueTree, LimitCapsAndPriorityComesBeforeWeight) {
  const QueueTree t({queue("capped", 0, 10, "", 4), queue("low", 0, 1),
                     queue("high", 0, 1, "", workload::kUnlimited, 5)});
  const auto s = t.fair_shares(demand(t, {{"capped", 100}, {"low", 100}, {"high", 10}}), gpus(16));
  EXPECT_DOUBLE_EQ(share(t, s, "high"), 10);   // served first, up to what it wants
  EXPECT_DOUBLE_EQ(share(t, s, "capped"), 4);  // its weight would give it more: the limit holds
  EXPECT_DOUBLE_EQ(share(t, s, "low"), 2);
}

TEST(QueueTree, ChildrenShareTheirParentsShare) {
  const QueueTree t({queue("dept-1", 12), queue("dept-2", 4), queue("t1", 2, 1, "dept-1"),
                     queue("t2", 2, 1, "dept-1"), queue("t3", 0, 1, "dept-2")});
  EXPECT_EQ(t.leaves().size(), 3U);
  const auto s = t.fair_shares(demand(t, {{"t1", 100}, {"t2", 4}, {"t3", 100}}), gpus(16));
  EXPECT_DOUBLE_EQ(share(t, s, "dept-1"), 12);
  EXPECT_DOUBLE_EQ(share(t, s, "dept-2"), 4);
  EXPECT_DOUBLE_EQ(share(t, s, "t2"), 4);
  EXPECT_DOUBLE_EQ(share(t, s, "t1"), 8);
  EXPECT_DOUBLE_EQ(share(t, s, "t3"), 4);
}

TEST(QueueTree, OvercommittedQuotasAreScaledToTheCapacity) {
  const QueueTree t({queue("a", 12), queue("b", 4)});
  const auto s = t.fair_shares(demand(t, {{"a", 100}, {"b", 100}}), gpus(8));
  EXPECT_DOUBLE_EQ(share(t, s, "a"), 6);
  EXPECT_DOUBLE_EQ(share(t, s, "b"), 2);
}

// A brute-force check of the water-filling: random trees of one level, every share within
// [min(quota, want), min(want, limit)], the shares summing to min(capacity, total want), and no
// queue below its weighted part while another with a larger part per weight still wants more.
TEST(QueueTree, WaterFillingAgreesWithItsDefinitionOnRandomQueues) {
  std::uint64_t seed = 7;
  auto next = [&](int n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return int((seed >> 33) % std::uint64_t(n));
  };
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<workload::QueueSpec> qs;
    std::map<std::string, double> want;
    const int n = 1 + next(6);
    for (int i = 0; i < n; ++i) {
      const std::string name = "q" + std::to_string(i);
      const int limit = next(3) == 0 ? next(20) : -1;
      qs.push_back(queue(name, next(8), 1 + next(4), "", limit < 0 ? workload::kUnlimited : limit));
      if (limit >= 0 && qs.back().gpu.quota > qs.back().gpu.limit)
        qs.back().gpu.quota = limit * 1000;
      want[name] = next(30);
    }
    const double capacity = next(60);
    const QueueTree t(qs);
    const auto s = t.fair_shares(demand(t, want), gpus(capacity));
    double total = 0, wanted = 0;
    for (const auto& q : qs) {
      const double got = share(t, s, q.name);
      const double w = want[q.name];
      const double cap = q.gpu.limit < 0 ? w : std::min(w, double(q.gpu.limit) / 1000);
      EXPECT_LE(got, cap + 1e-6) << q.name;
      total += got;
      wanted += cap;
    }
    double quotas = 0;
    for (const auto& q : qs) quotas += std::min(double(q.gpu.quota) / 1000, want[q.name]);
    EXPECT_NEAR(total, std::min(capacity, wanted), 1e-6) << "trial " << trial;
    if (quotas <= capacity) {
      for (const auto& q : qs) {
        EXPECT_GE(share(t, s, q.name) + 1e-6, std::min(double(q.gpu.quota) / 1000, want[q.name]));
      }
      // Envy-freeness of the weighted part: a queue that got less than it wants (and its limit)
      // never has a smaller over-quota part per weight than another queue.
      for (const auto& a : qs) {
        const double ca =
            a.gpu.limit < 0 ? want[a.name] : std::min(want[a.name], double(a.gpu.limit) / 1000);
        if (share(t, s, a.name) >= ca - 1e-6) continue;
        const double pa =
            (share(t, s, a.name) - std::min(double(a.gpu.quota) / 1000, want[a.name])) /
            a.gpu.over_quota_weight;
        for (const auto& b : qs) {
          const double pb =
              (share(t, s, b.name) - std::min(double(b.gpu.quota) / 1000, want[b.name])) /
              b.gpu.over_quota_weight;
          EXPECT_GE(pa + 1e-6, pb) << a.name << " vs " << b.name << " trial " << trial;
        }
      }
    }
  }
}

TEST(QueueTree, EachGpuModelIsSharedLikeAResourceOfItsOwn) {
  workload::QueueSpec a = queue("a", 8);
  a.gpu_models = {{"H100", {2000, workload::kUnlimited, 1}}, {"A100", {4000, 6000, 1}}};
  workload::QueueSpec b = queue("b", 8);
  b.gpu_models = {{"A100", {0, workload::kUnlimited, 3}}};
  const QueueTree t({a, b});
  ASSERT_EQ(t.gpu_models(), (std::vector<std::string>{"H100", "A100"}));
  const std::size_t h100 = *t.model_slot("H100"), a100 = *t.model_slot("A100");
  EXPECT_EQ(t.listed_slots(*t.find("a")), (std::vector<std::size_t>{h100, a100}));
  // b names no H100 quota: nothing guaranteed, its `gpu` limit and weight.
  EXPECT_DOUBLE_EQ(t.quota(*t.find("b"))[h100], 0);
  EXPECT_DOUBLE_EQ(t.limit(*t.find("a"))[a100], 6000);
  Amounts capacity = gpus(16);
  capacity[h100] = 4000;
  capacity[a100] = 12000;
  std::vector<Amounts> d(t.size(), Amounts{});
  for (const char* q : {"a", "b"}) {
    d[*t.find(q)][0] = 16000;
    d[*t.find(q)][h100] = 4000;
    d[*t.find(q)][a100] = 12000;
  }
  const auto s = t.fair_shares(d, capacity);
  // H100: a's 2 guaranteed, the other 2 by weight 1:1.
  EXPECT_DOUBLE_EQ(s[*t.find("a")][h100], 3000);
  EXPECT_DOUBLE_EQ(s[*t.find("b")][h100], 1000);
  // A100: a's 4 guaranteed and 2 of the other 8 by weight (1 against b's 3), its limit of 6;
  // b the rest.
  EXPECT_DOUBLE_EQ(s[*t.find("a")][a100], 6000);
  EXPECT_DOUBLE_EQ(s[*t.find("b")][a100], 6000);
}

}  // namespace
}  // namespace gpuorch::sched::jobs
