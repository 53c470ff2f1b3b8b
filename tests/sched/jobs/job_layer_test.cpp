// The job layer on small made workloads: quotas and over-quota sharing, reclaim that frees exactly
// what the quota needs with the fewest victims, non-preemptible jobs untouched, elastic replicas
// before whole jobs, priority preemption, FIFO blocking, least-attained-service order, and a
// reason for every job that waits.
#include "gpuorch/sched/jobs/job_layer.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <deque>

#include "gpuorch/sched/jobs/core_placer.hpp"
#include "gpuorch/sched/policy.hpp"
#include "sched/jobs/gpu_queue.hpp"
#include "sched/jobs/layer_world.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched::jobs {
namespace {

using gpuorch::test::gpu_queue;

// Two queues with 4 GPUs of quota each on two nodes of 4 GPUs.
class JobLayerTest : public ::testing::Test, protected test::LayerWorld {
 protected:
  explicit JobLayerTest(std::vector<workload::QueueSpec> qs = {gpu_queue("a", 4),
                                                               gpu_queue("b", 4)},
                        int nodes = 2)
      : LayerWorld(std::move(qs), make_nodes(nodes)) {}

  static std::vector<cluster::NodeSpec> make_nodes(int n) {
    std::vector<cluster::NodeSpec> out;
    for (int i = 0; i < n; ++i) out.push_back(test::gpu_node(fmt::format("n{}", i), 64000, 4));
    return out;
  }

  // A job of `replicas` one-GPU replicas (elastic up to `max`).
  JobState& job(const std::string& name, const std::string& q, int replicas, int max = 0,
                int priority = 0, bool preemptible = true) {
    workload::JobSpec s;
    s.name = name;
    s.queue = q;
    s.min_replicas = replicas;
    s.max_replicas = std::max(replicas, max);
    s.priority = priority;
    s.preemptible = preemptible;
    return add(std::move(s));
  }

  RoundStats round(std::int64_t now, RoundOptions o = {}) {
    o.now = now;
    return layer.round(states, o);
  }

  int running(const std::string& q) const {
    int n = 0;
    for (const auto& s : states) {
      if (s.spec->queue == q) n += s.replicas();
    }
    return n;
  }
};

TEST_F(JobLayerTest, AQueueUsesWhatNobodyWithinQuotaWants) {
  for (int i = 0; i < 8; ++i) job(fmt::format("b{}", i), "b", 1);
  round(0);
  EXPECT_EQ(running("b"), 8);  // 4 over its quota: a wants nothing
  EXPECT_EQ(c.fully_free_gpus_total(), 0);
}

TEST_F(JobLayerTest, ASizedRoundStartsStopsShrinksAndGrowsJobsToTheirCounts) {
  job("grows", "a", 1, 6);
  job("stops", "a", 1, 4);
  job("kept", "b", 1, 4, 0, /*preemptible=*/false);
  JobState& grows = states[0];
  JobState& stops = states[1];
  JobState& kept = states[2];
  grows.wanted = 2;
  stops.wanted = 4;
  kept.wanted = 2;
  RoundOptions sized;
  sized.sized = true;
  round(0, sized);
  EXPECT_EQ(grows.replicas(), 2);
  EXPECT_EQ(stops.replicas(), 4);
  EXPECT_EQ(kept.replicas(), 2);
  // The policy now values "grows" most: it grows in place, "stops" is sized to 0 and stops, and
  // "kept", sized to 0 too, keeps its replicas: it may not be preempted.
  const auto before = grows.placements;
  grows.wanted = 6;
  stops.wanted = 0;
  kept.wanted = 0;
  const auto stats = round(60, sized);
  EXPECT_EQ(stops.replicas(), 0);
  ASSERT_TRUE(stops.preempted.has_value());
  EXPECT_EQ(*stops.preempted, PreemptReason::kResized);
  EXPECT_EQ(stops.waiting, WaitReason::kLowerPriority);
  EXPECT_EQ(kept.replicas(), 2);
  EXPECT_FALSE(kept.preempted.has_value());
  EXPECT_EQ(grows.replicas(), 6);
  EXPECT_TRUE(
      std::equal(before.begin(), before.end(), grows.placements.begin(),
                 [](const auto& x, const auto& y) { return x.node == y.node && x.gpus == y.gpus; }))
      << "growth moved a running replica";
  EXPECT_EQ(stats.preempted, 1);
  EXPECT_EQ(stats.grown, 1);
  // Repacking instead: a resized job is placed anew as a whole.
  grows.wanted = 3;
  sized.repack = true;
  round(120, sized);
  EXPECT_EQ(grows.replicas(), 3);
  EXPECT_EQ(kept.replicas(), 2);
}

TEST_F(JobLayerTest, AJobTheOrderLeftOutIsNotSelectedEvenWhenItTriedTheIdleGpus) {
  job("b0", "b", 4);
  job("a0", "a", 4);
  job("a1", "a", 4);
  RoundOptions by_rank;
  by_rank.preempt_by_rank = true;
  round(0, by_rank);
  const JobState& a0 = states[1];
  const JobState& a1 = states[2];
  EXPECT_EQ(a0.replicas(), 4);
  EXPECT_TRUE(a0.selected);
  // a1 is past a's share in its order; it tried what other queues leave idle (nothing) and waits,
  // but least attained service must not count it as served.
  EXPECT_EQ(a1.replicas(), 0);
  EXPECT_FALSE(a1.selected);
  EXPECT_NE(a1.waiting, WaitReason::kNone);
}

// A post-filter added after the built-in ones: hands a running job's GPUs to the job that found
// no room (as a post-filter that moves work would), and the round records what it did.
class HandOver final : public PostFilterPlugin {
 public:
  HandOver(cluster::Cluster& c, std::vector<JobState>& states) : c_(c), states_(states) {}
  [[nodiscard]] std::string_view name() const override { return "hand-over"; }
  PostFilterResult post_filter(const PostFilterArgs& args) override {
    ++calls;
    PostFilterResult r;
    for (std::size_t v = 0; v < states_.size(); ++v) {
      if (v == args.id || states_[v].replicas() != static_cast<int>(args.count)) continue;
      for (const auto& p : states_[v].placements) {
        c_.release(p);
        c_.apply(p);
        r.placements.push_back(p);
      }
      r.victims.push_back({v, 0, std::nullopt});
      r.status = PostFilterStatus::kSuccess;
      r.reason = "hand-over";
      r.message = "made room by hand";
      return r;
    }
    return r;
  }
  int calls = 0;

 private:
  cluster::Cluster& c_;
  std::vector<JobState>& states_;
};

TEST_F(JobLayerTest, APostFilterAddedAfterTheBuiltInOnesMakesRoomAndTheRoundRecordsIt) {
  EXPECT_EQ(layer.post_filters().names(), (std::vector<std::string_view>{"reclaim", "priority"}));
  for (int i = 0; i < 2; ++i) job(fmt::format("b{}", i), "b", 4);
  round(0);
  job("b2", "b", 4);  // same queue, same priority: neither reclaim nor priority helps
  round(60);
  EXPECT_EQ(states[2].replicas(), 0);
  auto hand_over = std::make_unique<HandOver>(c, states);
  HandOver* plugin = hand_over.get();
  layer.post_filters().add(std::move(hand_over));
  const auto stats = round(120);
  EXPECT_EQ(plugin->calls, 1);
  EXPECT_EQ(states[2].replicas(), 4);
  EXPECT_EQ(states[0].replicas(), 0);
  ASSERT_TRUE(states[0].preempted.has_value());
  EXPECT_EQ(*states[0].preempted, PreemptReason::kPostFilter);
  EXPECT_NE(states[0].why.find("hand-over"), std::string::npos) << states[0].why;
  EXPECT_EQ(stats.preempted, 1);
  EXPECT_EQ(stats.started, 1);
  EXPECT_EQ(c.fully_free_gpus_total(), 0);
  EXPECT_EQ(running("b"), 8);
}

TEST_F(JobLayerTest, ReclaimFreesExactlyWhatTheQuotaNeedsFromTheFewestGpuHoursLost) {
  for (int i = 0; i < 8; ++i) {
    job(fmt::format("b{}", i), "b", 1);
    round(i * 100);  // b0 started first: the most GPU-hours a preemption would lose
  }
  ASSERT_EQ(running("b"), 8);
  job("a0", "a", 2);
  const auto stats = round(1000);
  EXPECT_EQ(running("a"), 2);
  EXPECT_EQ(running("b"), 6);
  EXPECT_EQ(stats.preempted, 2);
  // The two latest starters go: b7 and b6.
  for (const auto& s : states) {
    const bool victim = s.spec->name == "b7" || s.spec->name == "b6";
    EXPECT_EQ(s.preempted.has_value(), victim) << s.spec->name;
    if (victim) {
      EXPECT_EQ(*s.preempted, PreemptReason::kReclaim);
      EXPECT_NE(s.why.find("a0"), std::string::npos) << s.why;
    }
  }
  // The next round changes nothing: no reclaim loop.
  const auto again = round(1060);
  EXPECT_EQ(again.preempted, 0);
  EXPECT_EQ(running("a"), 2);
}

TEST_F(JobLayerTest, ReclaimStopsAtTheVictimQueuesFairShare) {
  for (int i = 0; i < 8; ++i) job(fmt::format("b{}", i), "b", 1);
  round(0);
  // a asks for 6: 2 over its quota of 4, so only 4 can come back from b (b keeps its quota).
  job("a-big", "a", 6);
  round(60);
  EXPECT_EQ(running("a"), 0);
  EXPECT_EQ(running("b"), 8);
  const JobState& big = states.back();
  EXPECT_EQ(big.waiting, WaitReason::kOverQuota) << big.why;
  job("a-fits", "a", 4);
  round(120);
  EXPECT_EQ(running("a"), 4);
  EXPECT_EQ(running("b"), 4);
}

TEST_F(JobLayerTest, NonPreemptibleJobsAreNeverVictims) {
  for (int i = 0; i < 8; ++i) job(fmt::format("b{}", i), "b", 1, 0, 0, /*preemptible=*/false);
  round(0);
  job("a0", "a", 1);
  round(60);
  EXPECT_EQ(running("b"), 8);
  EXPECT_EQ(states.back().waiting, WaitReason::kShareHeld) << states.back().why;
}

TEST_F(JobLayerTest, ElasticReplicasAboveMinGoBeforeWholeJobs) {
  job("b-rigid", "b", 2);
  round(0);
  job("b-elastic", "b", 2, 6);  // starts at 6: everything free
  round(10);
  ASSERT_EQ(running("b"), 8);
  job("a0", "a", 3);
  round(20);
  EXPECT_EQ(running("a"), 3);
  const JobState& rigid = states[0];
  const JobState& elastic = states[1];
  EXPECT_EQ(rigid.replicas(), 2);    // untouched, although it lost less (started earlier: more)
  EXPECT_EQ(elastic.replicas(), 3);  // shrunk by exactly 3, still above its min
  ASSERT_TRUE(elastic.preempted.has_value());
}

TEST_F(JobLayerTest, AnElasticJobGrowsNextToItsReplicasWithoutMovingThem) {
  // Pods outside the job layer hold 3 GPUs of node 0 and all of node 1.
  const auto p0 = test::placement(0, 0, 1000, {0, 1, 2});
  const auto p1 = test::placement(1, 0, 1000, {0, 1, 2, 3});
  c.apply(p0);
  c.apply(p1);
  job("elastic", "a", 1, 4);  // wants 4, only 1 free: starts with its min
  round(0);
  ASSERT_EQ(states[0].replicas(), 1);
  const cluster::Placement first = states[0].placements[0];
  EXPECT_EQ(first.node, 0U);
  c.release(p0);  // node 0 frees up: the job grows there, beside its replica
  round(60);
  ASSERT_EQ(states[0].replicas(), 4);
  EXPECT_EQ(states[0].placements[0].gpus, first.gpus);  // not moved
  for (const auto& p : states[0].placements) EXPECT_EQ(p.node, 0U);
}

TEST_F(JobLayerTest, HigherPriorityPreemptsLowerInItsQueue) {
  for (int i = 0; i < 8; ++i) job(fmt::format("a{}", i), "a", 1);
  round(0);
  job("urgent", "a", 2, 0, /*priority=*/10);
  round(60);
  EXPECT_EQ(states.back().replicas(), 2);
  int by_priority = 0;
  for (const auto& s : states) by_priority += s.preempted == PreemptReason::kPriority;
  EXPECT_EQ(by_priority, 2);
}

TEST_F(JobLayerTest, StrictFifoBlocksBehindTheHeadAndBackfillDoesNot) {
  for (int i = 0; i < 6; ++i) job(fmt::format("a{}", i), "a", 1);
  round(0);
  job("a-big", "a", 4);
  job("a-small", "a", 1);
  RoundOptions fifo;
  fifo.backfill = false;
  round(60, fifo);
  EXPECT_EQ(states[6].replicas(), 0);
  EXPECT_EQ(states[7].replicas(), 0);
  EXPECT_EQ(states[7].waiting, WaitReason::kLowerPriority);
  EXPECT_NE(states[7].why.find("a-big"), std::string::npos) << states[7].why;
  round(120);
  EXPECT_EQ(states[7].replicas(), 1);
}

TEST_F(JobLayerTest, RankOrderPreemptsRunningJobsRankedAfterWaitingOnes) {
  for (int i = 0; i < 4; ++i) job(fmt::format("a{}", i), "a", 2);  // all of the cluster
  round(0);
  ASSERT_EQ(running("a"), 8);
  JobState& fresh = job("a-new", "a", 2);
  fresh.rank = -1;  // least attained service: ranked first
  RoundOptions las;
  las.preempt_by_rank = true;
  // a's fair share is the whole cluster (b wants nothing): the last-ranked job gives way.
  round(60, las);
  EXPECT_EQ(states.back().replicas(), 2);
  EXPECT_EQ(states[3].replicas(), 0);
  EXPECT_EQ(states[3].preempted, PreemptReason::kQueueOrder);
}

TEST_F(JobLayerTest, RankOrderLeavesNoGpuIdleThatAnotherQueueCannotUse) {
  for (int i = 0; i < 8; ++i) job(fmt::format("a{}", i), "a", 1);
  // b wants 2 GPUs of a model the cluster lacks: its share is kept for it, but it cannot use it.
  job("b-elsewhere", "b", 2);
  specs.back().replica.allowed_models = {"H100"};
  RoundOptions las;
  las.preempt_by_rank = true;
  round(0, las);
  EXPECT_EQ(running("a"), 8);  // 6 within a's share, 2 over it on what b cannot use
  EXPECT_EQ(states.back().waiting, WaitReason::kInfeasible) << states.back().why;
  round(60, las);  // and they stay: no preemption loop
  EXPECT_EQ(running("a"), 8);
}

// Quotas of 2 GPUs each on 8: 4 GPUs over quota. a's 8 jobs have much attained service; b's 6
// new ones none. By weight b gets its fair share (2 + half of the 4); with the GPUs over quota
// ordered by rank across the queues it gets all 4 of them, and a keeps its quota (its first two).
class OverQuota : public JobLayerTest {
 protected:
  OverQuota() : JobLayerTest({gpu_queue("a", 2), gpu_queue("b", 2)}) {}
  void flood_then_arrive(RoundOptions las) {
    las.preempt_by_rank = true;
    for (int i = 0; i < 8; ++i) job(fmt::format("a{}", i), "a", 1).rank = 100 + i;
    round(0, las);
    ASSERT_EQ(running("a"), 8);
    for (int i = 0; i < 6; ++i) job(fmt::format("b{}", i), "b", 1).rank = i;
    round(60, las);
  }
};

TEST_F(OverQuota, ByWeightEachQueueGetsItsFairShare) {
  flood_then_arrive({});
  EXPECT_EQ(running("a"), 4);
  EXPECT_EQ(running("b"), 4);
}

TEST_F(OverQuota, ByRankTheGpusOverQuotaGoToTheJobsRankedFirstAcrossQueues) {
  RoundOptions las;
  las.over_quota_by_rank = true;
  flood_then_arrive(las);
  EXPECT_EQ(running("b"), 6);
  EXPECT_EQ(running("a"), 2);
  EXPECT_EQ(states[0].replicas() + states[1].replicas(), 2);  // a's quota, to its first two
  EXPECT_EQ(states[7].preempted, PreemptReason::kQueueOrder);
  las.preempt_by_rank = true;
  round(120, las);  // and it stays
  EXPECT_EQ(running("b"), 6);
  EXPECT_EQ(running("a"), 2);
}

TEST_F(JobLayerTest, EveryWaitingJobHasAReason) {
  // Pods outside the job layer hold 2 GPUs of each node.
  c.apply(test::placement(0, 0, 1000, {0, 1}));
  c.apply(test::placement(1, 0, 1000, {0, 1}));
  // One replica of 4 GPUs needs one node with 4 free: 2 free on two nodes is fragmentation.
  job("a-frag", "a", 1);
  specs.back().replica.gpu_count = 4;
  // A replica of 8 GPUs fits no node of 4: infeasible.
  job("a-never", "a", 1);
  specs.back().replica.gpu_count = 8;
  round(60);
  EXPECT_EQ(states[0].waiting, WaitReason::kFragmented) << states[0].why;
  EXPECT_EQ(states[1].waiting, WaitReason::kInfeasible) << states[1].why;
  EXPECT_FALSE(states[0].why.empty());
  EXPECT_FALSE(states[1].why.empty());
}

class LimitedQueues : public JobLayerTest {
 protected:
  LimitedQueues() : JobLayerTest({gpu_queue("a", 2, 3), gpu_queue("b", 2)}) {}
};

TEST_F(LimitedQueues, ALimitIsNeverPassed) {
  for (int i = 0; i < 4; ++i) job(fmt::format("a{}", i), "a", 1);
  round(0);
  EXPECT_EQ(running("a"), 3);
  EXPECT_EQ(states[3].waiting, WaitReason::kOverLimit);
}

}  // namespace
}  // namespace gpuorch::sched::jobs
