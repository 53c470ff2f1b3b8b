// The post-filter step: registered post-filters run in order when a pod fits nowhere, the first
// that makes room ends it; consolidation is one of them.
#include "gpuorch/sched/framework/post_filter_registry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpuorch/sched/post_filters/consolidation.hpp"
#include "support/policy_bench.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using ::testing::ElementsAre;

// A stand-in for a preemption post-filter: it records that it ran and answers as told.
class Scripted final : public PostFilterPlugin {
 public:
  Scripted(std::string name, bool helps, std::vector<std::string>* ran)
      : name_(std::move(name)), helps_(helps), ran_(ran) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  PostFilterResult post_filter(const PostFilterArgs& args) override {
    ran_->push_back(name_);
    PostFilterResult r;
    if (!helps_) {
      r.message = "no victim";
      return r;
    }
    r.status = PostFilterStatus::kSuccess;
    r.reason = "priority";
    r.victims = {Victim{.id = args.id + 100, .replicas = 2, .moved_to = {}}};
    r.nominated_node = 0;
    return r;
  }

 private:
  std::string name_;
  bool helps_;
  std::vector<std::string>* ran_;
};

struct Fixture : test::PolicyBench {
  Fixture()
      : PolicyBench("best-fit", {gpu_node("t4", 8000, 1, "T4"), gpu_node("g2", 8000, 1, "G2")}) {}
  const PodRequest& req(int gpus, std::vector<std::string> models = {}) {
    requests.push_back(PolicyBench::req(1000, gpus, 1000, std::move(models)));
    return requests.back();
  }
  std::deque<PodRequest> requests;  // stable addresses
};

TEST(PostFilterRegistry, RunsInOrderUntilOneMakesRoom) {
  Fixture f;
  std::vector<std::string> ran;
  PostFilterRegistry registry;
  EXPECT_TRUE(registry.empty());
  registry.add(std::make_unique<Scripted>("reclaim", false, &ran));
  registry.add(std::make_unique<Scripted>("preemption", true, &ran));
  registry.add(std::make_unique<Scripted>("never-reached", true, &ran));
  EXPECT_THAT(registry.names(), ElementsAre("reclaim", "preemption", "never-reached"));
  EXPECT_THROW(registry.add(std::make_unique<Scripted>("reclaim", true, &ran)),
               std::invalid_argument);

  const PodRequest& pod = f.req(2);
  const Decision d = f.scheduler.decide(pod);
  ASSERT_EQ(d.outcome, Outcome::kInfeasible);
  const PostFilterResult r = registry.run({.id = 7, .request = pod, .count = 3, .failure = d});
  EXPECT_THAT(ran, ElementsAre("reclaim", "preemption"));
  ASSERT_TRUE(r.success());
  EXPECT_EQ(r.reason, "priority");
  ASSERT_EQ(r.victims.size(), 1U);
  EXPECT_EQ(r.victims[0].id, 107U);
  EXPECT_EQ(r.victims[0].replicas, 2U);
  EXPECT_EQ(r.nominated_node, 0U);
}

TEST(PostFilterRegistry, NoneHelpsSaysWhyEachDidNot) {
  Fixture f;
  std::vector<std::string> ran;
  PostFilterRegistry registry;
  registry.add(std::make_unique<Scripted>("reclaim", false, &ran));
  registry.add(std::make_unique<Scripted>("preemption", false, &ran));
  const PodRequest& pod = f.req(2);
  const PostFilterResult r =
      registry.run({.id = 1, .request = pod, .failure = f.scheduler.decide(pod)});
  EXPECT_FALSE(r.success());
  EXPECT_EQ(r.message, "reclaim: no victim; preemption: no victim");
  EXPECT_TRUE(r.victims.empty());
}

TEST(ConsolidationPostFilter, MovesAPodForAWaitingPodAndPassesOnAnInfeasibleOne) {
  Fixture f;
  Consolidator consolidator(f.cluster, f.scheduler, ConsolidationOptions{1, 8});
  PostFilterRegistry registry;
  registry.add(std::make_unique<ConsolidationPostFilter>(consolidator));

  const PodRequest& any = f.req(1);
  const Decision placed = f.scheduler.schedule(any);
  ASSERT_EQ(placed.placement.node, 0U);  // the T4 (node order breaks the tie)
  consolidator.bound(0, any, placed.placement);

  const PodRequest& t4_only = f.req(1, {"T4"});
  const Decision waiting = f.scheduler.schedule(t4_only);
  ASSERT_EQ(waiting.outcome, Outcome::kWaiting);
  const PostFilterResult r = registry.run({.id = 1, .request = t4_only, .failure = waiting});
  ASSERT_TRUE(r.success());
  EXPECT_EQ(r.reason, "consolidation");
  EXPECT_EQ(r.nominated_node, 0U);
  ASSERT_EQ(r.placements.size(), 1U);
  EXPECT_EQ(r.placements[0].node, 0U);
  ASSERT_EQ(r.victims.size(), 1U);
  EXPECT_EQ(r.victims[0].id, 0U);
  ASSERT_TRUE(r.victims[0].moved_to);
  EXPECT_EQ(r.victims[0].moved_to->node, 1U);

  const PodRequest& two = f.req(2);
  const PostFilterResult none =
      registry.run({.id = 2, .request = two, .failure = f.scheduler.decide(two)});
  EXPECT_FALSE(none.success());
  EXPECT_EQ(none.message, "consolidation: fits no node even when empty");
  EXPECT_EQ(f.cluster.gpu_milli_used(), 2000);
}

}  // namespace
}  // namespace gpuorch::sched
