// Quotas per GPU model (spec.resources.gpuModels) in the job layer, on two nodes of two models:
// a queue's GPUs of each model count against its quota of that model, a job that accepts several
// models takes them in its queue's order (within its share first, as Kueue's flavor assignment
// with whenCanBorrow: TryNextFlavor), and reclaim takes back only the model the reclaimer needs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gpuorch/sched/jobs/elastic_sizing.hpp"
#include "sched/jobs/layer_world.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched::jobs {
namespace {

// A queue with `gpus` of overall quota and, per model, {quota, limit (-1: none), weight}.
struct ModelQuota {
  std::string model;
  double quota = 0;
  double limit = -1;
  double weight = 1;
};

workload::QueueSpec queue(std::string name, double gpus, std::vector<ModelQuota> models) {
  workload::QueueSpec q;
  q.name = std::move(name);
  q.gpu.quota = static_cast<std::int64_t>(gpus * 1000);
  for (const auto& m : models) {
    workload::QueueResource r;
    r.quota = static_cast<std::int64_t>(m.quota * 1000);
    r.limit = m.limit < 0 ? workload::kUnlimited : static_cast<std::int64_t>(m.limit * 1000);
    r.over_quota_weight = m.weight;
    q.gpu_models.push_back({m.model, r});
  }
  return q;
}

class JobLayerModels : public ::testing::Test, protected test::LayerWorld {
 protected:
  explicit JobLayerModels(std::vector<workload::QueueSpec> qs)
      : LayerWorld(std::move(qs), {test::gpu_node("a100-node", 64000, 4, "A100"),
                                   test::gpu_node("h100-node", 64000, 4, "H100")}) {}
  JobLayerModels() : JobLayerModels({queue("a", 4, {{"A100", 4}}), queue("b", 4, {{"H100", 4}})}) {}

  // A job of one one-GPU replica, restricted to `models` (empty: any).
  JobState& job(const std::string& name, const std::string& q,
                std::vector<std::string> models = {}) {
    workload::JobSpec s;
    s.name = name;
    s.queue = q;
    s.replica.allowed_models = std::move(models);
    return add(std::move(s));
  }

  RoundStats round(std::int64_t now) {
    RoundOptions o;
    o.now = now;
    return layer.round(states, o);
  }

  // GPUs queue q's jobs run on `model`.
  int running(const std::string& q, const std::string& model) const {
    int n = 0;
    for (const auto& s : states) {
      for (const auto& p : s.placements) {
        if (s.spec->queue == q && c.spec(p.node).gpu_model == model) ++n;
      }
    }
    return n;
  }

  [[nodiscard]] std::string model_of(const JobState& s) const {
    return s.placements.empty() ? "" : c.spec(s.placements.front().node).gpu_model;
  }
};

TEST_F(JobLayerModels, EachModelIsAResourceWithItsOwnCapacityAndShares) {
  ASSERT_EQ(tree.gpu_models(), (std::vector<std::string>{"A100", "H100"}));
  const std::size_t a100 = *tree.model_slot("A100");
  const std::size_t h100 = *tree.model_slot("H100");
  EXPECT_FALSE(tree.model_slot("V100"));
  EXPECT_DOUBLE_EQ(layer.capacity()[a100], 4000);
  EXPECT_DOUBLE_EQ(layer.capacity()[h100], 4000);
  for (int i = 0; i < 2; ++i) job(fmt::format("a{}", i), "a", {"A100"});
  round(0);
  const std::size_t qa = *tree.find("a");
  EXPECT_DOUBLE_EQ(layer.allocated()[qa][a100], 2000);
  EXPECT_DOUBLE_EQ(layer.allocated()[qa][h100], 0);
  EXPECT_DOUBLE_EQ(layer.allocated()[qa][0], 2000);  // the overall `gpu` counts them too
  EXPECT_DOUBLE_EQ(layer.fair_shares()[qa][a100], 2000);
}

TEST_F(JobLayerModels, AQueueTakesAnotherModelOnlyOverItsShareAndGivesItBackToItsOwner) {
  for (int i = 0; i < 8; ++i) job(fmt::format("a{}", i), "a");
  round(0);
  // Its own model first; the H100s nobody wants, over its share.
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(running("a", "H100"), 4);
  std::vector<std::string> before;
  for (const auto& s : states) before.push_back(model_of(s));
  for (int i = 0; i < 4; ++i) job(fmt::format("b{}", i), "b");
  const auto stats = round(60);
  EXPECT_EQ(running("b", "H100"), 4);
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(running("a", "H100"), 0);
  EXPECT_EQ(stats.preempted, 4);
  for (std::size_t i = 0; i < 8; ++i) {
    // Reclaim on the H100s never touched a job on the A100s.
    EXPECT_EQ(states[i].preempted.has_value(), before[i] == "H100") << specs[i].name;
  }
}

TEST_F(JobLayerModels, ReclaimOnOneModelNeverEvictsJobsOnTheOther) {
  // b holds the A100s over its share (a wants nothing yet) and its H100s within it.
  for (int i = 0; i < 4; ++i) job(fmt::format("ba{}", i), "b", {"A100"});
  for (int i = 0; i < 4; ++i) job(fmt::format("bh{}", i), "b", {"H100"});
  round(0);
  ASSERT_EQ(running("b", "A100"), 4);
  ASSERT_EQ(running("b", "H100"), 4);
  // b is over its overall share (8 of 4 GPUs); a's A100 job takes back one A100 only.
  job("a0", "a", {"A100"});
  const auto stats = round(60);
  EXPECT_EQ(model_of(states.back()), "A100");
  EXPECT_EQ(stats.preempted, 1);
  EXPECT_EQ(running("b", "H100"), 4);
  EXPECT_EQ(running("b", "A100"), 3);
}

TEST_F(JobLayerModels, AQueueCannotReclaimAModelItHasNoShareOf) {
  for (int i = 0; i < 4; ++i) job(fmt::format("b{}", i), "b", {"H100"});
  round(0);
  JobState& wants_h100 = job("a0", "a", {"H100"});
  const auto stats = round(60);
  EXPECT_EQ(stats.preempted, 0);
  EXPECT_EQ(running("b", "H100"), 4);
  EXPECT_EQ(wants_h100.replicas(), 0);
  EXPECT_EQ(wants_h100.waiting, WaitReason::kOverQuota);
  EXPECT_EQ(wants_h100.why,
            "queue a would hold 1 GPUs of model H100 against its fair share of 0 (quota 0)");
}

class JobLayerModelOrder : public JobLayerModels {
 protected:
  // a lists the A100s first: 2 guaranteed and no share of what is over quota (weight 0), then
  // the H100s with 2 guaranteed.
  JobLayerModelOrder()
      : JobLayerModels({queue("a", 4, {{"A100", 2, -1, 0}, {"H100", 2}}), queue("b", 0, {})}) {}
};

TEST_F(JobLayerModelOrder, AJobThatAcceptsBothTakesTheNextModelWhenTheFirstsShareIsUsed) {
  for (int i = 0; i < 4; ++i) job(fmt::format("a{}", i), "a");
  round(0);
  // Two A100s are still free, but the third job stays within a's share on the H100s.
  EXPECT_EQ(running("a", "A100"), 2);
  EXPECT_EQ(running("a", "H100"), 2);
  EXPECT_EQ(model_of(states[2]), "H100");
  // Its share of the H100s is all four (nobody else wants them): two more go there; past both
  // shares, the queue's order again: the free A100s, over its share.
  for (int i = 4; i < 8; ++i) job(fmt::format("a{}", i), "a");
  round(60);
  EXPECT_EQ(model_of(states[4]), "H100");
  EXPECT_EQ(model_of(states[5]), "H100");
  EXPECT_EQ(model_of(states[6]), "A100");
  EXPECT_EQ(model_of(states[7]), "A100");
}

class JobLayerModelLimit : public JobLayerModels {
 protected:
  JobLayerModelLimit() : JobLayerModels({queue("a", 8, {{"A100", 2, 2}, {"H100", 0}})}) {}
};

TEST_F(JobLayerModelLimit, ALimitOnAModelSendsTheRestToTheNextAndSaysWhyWhenNoneIsLeft) {
  for (int i = 0; i < 3; ++i) job(fmt::format("a{}", i), "a");
  JobState& only_a100 = job("a100-only", "a", {"A100"});
  round(0);
  EXPECT_EQ(running("a", "A100"), 2);
  EXPECT_EQ(model_of(states[2]), "H100");
  EXPECT_EQ(only_a100.replicas(), 0);
  EXPECT_EQ(only_a100.waiting, WaitReason::kOverLimit);
  EXPECT_EQ(only_a100.why, "queue a (or a parent) would pass its limit of GPUs of model A100");
}

// Sized rounds (optimus, pollux, lasgo: RoundOptions::sized) divide each model too: the sizing
// (size_by_value_per_model) counts a job on one model, against its queue's share of it, and the
// round starts it there.
class JobLayerSizedModels : public JobLayerModels {
 protected:
  using JobLayerModels::JobLayerModels;

  // An elastic job of 1..`most` one-GPU replicas.
  JobState& elastic(const std::string& name, const std::string& q, int most,
                    std::vector<std::string> models = {}) {
    JobState& s = job(name, q, std::move(models));
    specs.back().max_replicas = most;
    return s;
  }

  // Every job valued by the square root of its replicas (each GPU worth less than the last), sized
  // within the shares of each model as sim timeline's sized_round does, then the round (which
  // places a resized job anew: RoundOptions::repack). `move`: running jobs may change models.
  RoundStats sized_round(std::int64_t now, bool move = false) {
    std::vector<ElasticDemand> demands;
    for (const JobState& s : states) {
      ElasticDemand d;
      d.queue = s.queue;
      d.min = 1;
      for (int r = 0; r <= s.spec->max_replicas; ++r) d.value.push_back(std::sqrt(double(r)));
      d.models = model_order(c, tree, s, move);
      demands.push_back(std::move(d));
    }
    const Sized sized = size_by_value_per_model(tree, cluster_capacity(c, &tree), demands);
    for (std::size_t i = 0; i < states.size(); ++i) {
      states[i].wanted = sized.counts[i];
      states[i].sized_model = sized.models[i];
    }
    RoundOptions o;
    o.now = now;
    o.sized = true;
    o.repack = true;
    const RoundStats stats = layer.round(states, o);
    check_one_model_each();
    return stats;
  }

  // No job's replicas span two models.
  void check_one_model_each() const {
    for (const auto& s : states) {
      for (const auto& p : s.placements) {
        EXPECT_EQ(c.spec(p.node).gpu_model, model_of(s)) << s.spec->name;
      }
    }
  }
};

TEST_F(JobLayerSizedModels, AQueueBorrowsAModelOnlyWhileItsOwnerDoesNotWantItAndGivesItBack) {
  // a is guaranteed the A100s only, b the H100s only (the fixture's queues).
  elastic("a0", "a", 8);
  elastic("a1", "a", 8);
  sized_round(0);
  // One takes a's A100s (a job may not span both models), the other borrows the H100s nobody
  // wants: both start where the sizing counted them.
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(running("a", "H100"), 4);
  const std::size_t borrower = model_of(states[0]) == "H100" ? 0 : 1;
  EXPECT_EQ(states[borrower].replicas(), 4);
  // b's job comes: within one round b holds its H100s and the borrower gave them back.
  elastic("b0", "b", 8);
  const auto stats = sized_round(60);
  EXPECT_EQ(running("b", "H100"), 4);
  EXPECT_EQ(running("a", "H100"), 0);
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(states[borrower].replicas(), 0);
  EXPECT_EQ(states[borrower].preempted, PreemptReason::kResized);
  EXPECT_EQ(stats.preempted, 1);
  // The job on a's own model is untouched.
  EXPECT_TRUE(states[1 - borrower].preempted == std::nullopt);
  EXPECT_FALSE(states[1 - borrower].changed);
  // b's job ends: a borrows the H100s again.
  states[2].wanted = 0;
  layer.shrink(states[2], states[2].replicas());
  states.pop_back();
  sized_round(120);
  EXPECT_EQ(running("a", "H100"), 4);
}

TEST_F(JobLayerSizedModels, AWaitingJobTakesItsQueuesModelFirstAndTheNextOnlyWhenItIsUsed) {
  elastic("b0", "b", 2);
  sized_round(0);
  // b's only job sits on its own model, though both are free.
  EXPECT_EQ(model_of(states[0]), "H100");
  EXPECT_EQ(states[0].replicas(), 2);
  // a's A100-only job fills them; b's next job goes to the two H100s left, not the A100s.
  elastic("a0", "a", 4, {"A100"});
  elastic("b1", "b", 4);
  sized_round(60);
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(model_of(states[2]), "H100");
  EXPECT_EQ(running("b", "H100"), 4);
}

TEST_F(JobLayerSizedModels, AResizedJobMovesToTheModelWithRoomOnlyWhereItRestartsAnyway) {
  for (int i = 0; i < 4; ++i) elastic(fmt::format("a{}", i), "a", 1);
  sized_round(0);
  ASSERT_EQ(running("a", "A100"), 4);  // a's own model first
  for (auto& s : specs) s.max_replicas = 2;
  // Kept on their model, they cannot grow: the A100s are full and the H100s stay idle.
  sized_round(60);
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(running("a", "H100"), 0);
  // Placed anew when resized: two move to the H100s, the other two grow where they are.
  sized_round(120, true);
  EXPECT_EQ(running("a", "A100"), 4);
  EXPECT_EQ(running("a", "H100"), 4);
  for (const auto& s : states) EXPECT_EQ(s.replicas(), 2) << s.spec->name;
}

class JobLayerSizedModelLimit : public JobLayerSizedModels {
 protected:
  // a may hold 1 H100 at most (its limit), though nobody else wants them; b names no model (its
  // share of each is what nobody within quota wants).
  JobLayerSizedModelLimit()
      : JobLayerSizedModels({queue("a", 4, {{"A100", 4}, {"H100", 0, 1}}), queue("b", 4, {})}) {}
};

TEST_F(JobLayerSizedModelLimit, NoQueuePassesItsLimitOfAModel) {
  // Six jobs that would each take a GPU: four on the A100s, one on the H100s, one waits.
  for (int i = 0; i < 6; ++i) elastic(fmt::format("a{}", i), "a", 4);
  for (std::int64_t t = 0; t < 3 * 60; t += 60) {
    sized_round(t);
    EXPECT_EQ(running("a", "A100"), 4);
    EXPECT_EQ(running("a", "H100"), 1);
  }
}

}  // namespace
}  // namespace gpuorch::sched::jobs
