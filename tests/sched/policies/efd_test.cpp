// EFD, expected-fill descent (docs/policies.md): score = stranded(before) - stranded(after) -
// scarce-model price, as floor(100 sigmoid(gain / score_scale)) or, with quantise=0, as
// round(1000 gain). Every spec that depends on the target workload passes `popularity`, and
// every quantised score `score_scale`, explicitly (their defaults are tuning choices); numbers
// are derived by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/policy_bench.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::placement;
using ::testing::ElementsAre;

// `n` pods of one shape, for a history.
std::vector<workload::PodSpec> pods(int n, std::int64_t cpu, int gpus, std::int64_t milli,
                                    std::vector<std::string> models = {}) {
  return std::vector<workload::PodSpec>(static_cast<std::size_t>(n),
                                        test::pod("h", cpu, gpus, milli, 0, std::move(models)));
}

std::vector<workload::PodSpec> concat(std::vector<std::vector<workload::PodSpec>> parts) {
  std::vector<workload::PodSpec> out;
  for (auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// A cluster, the policy built from `spec` with the history's shapes (as sim fill builds it:
// typical_pods(history, 1.0)), and the scheduler core around it.
struct EfdBench : test::PolicyBench {
  EfdBench(std::string_view spec, std::vector<cluster::NodeSpec> nodes,
           const std::vector<workload::PodSpec>& past, SchedulerOptions options = {})
      : PolicyBench(spec, std::move(nodes), {}, 1, workload::typical_pods(past, 1.0), options) {}

  NodeScore score(cluster::NodeIndex n, const PodRequest& p) {
    EXPECT_EQ(check_node(cluster, n, p), kFits);
    return policy->score_node(cluster, n, p);
  }
};

// A one-node cluster and a policy context over it, for policies built by hand.
struct Bare {
  cluster::Cluster cluster{std::vector<cluster::NodeSpec>{gpu_node("n", 64000, 1)}};
  base::Rng rng{1};
  PolicyContext context(const workload::TargetWorkload* history = nullptr) {
    return {&cluster, nullptr, &rng, history};
  }
};

// History: 810-milli and 500-milli pods, one each (p = .5 each), no CPU. By hand:
//   fill(r) = 0 below 500; 500 for 500 <= r < 810;
//   fill(r) = .5 (810 + fill(< 190)) + .5 (500 + fill(310..499)) = 655 for 810 <= r < 1000;
//   fill(1000) = .5 (810 + fill(190)) + .5 (500 + fill(500)) = 405 + 500 = 905.
// Stranded per GPU: 1000 -> 95, 810 -> 155, 190 -> 190, 0 -> 0.
std::vector<workload::PodSpec> history_810_500() {
  return concat({pods(1, 0, 1, 810), pods(1, 0, 1, 500)});
}

TEST(EfdPolicy, PodOf810GoesWhereItsRemainderStrandsLeast) {
  // Node 0 is empty; node 1 has a 190-milli share on GPU 1, so an 810-milli pod fits it exactly.
  //   fresh: [1000, 1000] 190 -> [190, 1000] 285: gain -95.
  //   used:  [1000, 810] 250 -> GPU 0: [190, 810] 345 (gain -95); GPU 1: [1000, 0] 95 (+155).
  const std::vector<cluster::NodeSpec> nodes{gpu_node("fresh", 64000, 2),
                                             gpu_node("used", 64000, 2)};
  EfdBench exact("efd:popularity=1:quantise=0", nodes, history_810_500());
  exact.apply(1, 0, 190, {1});
  const PodRequest p = exact.req(0, 1, 810);
  EXPECT_EQ(exact.score(0, p).score, -95000);
  EXPECT_EQ(exact.score(0, p).gpu, 0);
  EXPECT_EQ(exact.score(1, p).score, 155000);
  EXPECT_EQ(exact.score(1, p).gpu, 1);

  // Quantised: floor(100 sigmoid(-95 / 2000)) = floor(48.81) = 48; +155: floor(51.94) = 51.
  EfdBench b("efd:popularity=1:score_scale=2000", nodes, history_810_500());
  b.apply(1, 0, 190, {1});
  EXPECT_EQ(b.score(0, b.req(0, 1, 810)).score, 48);
  EXPECT_EQ(b.score(1, b.req(0, 1, 810)).score, 51);
  const Decision d = b.scheduler.decide(b.req(0, 1, 810));
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(1));
}

TEST(EfdPolicy, GapOf190CountsAsFilledOnlyWhenTheTargetHasPodsThatSmall) {
  // History: 90 pods of 810 milli and 10 of 100 milli. With popularity=1 the target keeps both
  // (p = .9, .1): fill(190) = 100 + fill(90) = 100;
  //   fill(900) = .9 (810 + fill(90)) + .1 (100 + fill(800)) = 729 + .1 (100 + 800) = 819;
  //   fill(1000) = .9 (810 + fill(190)) + .1 (100 + fill(900)) = 819 + 91.9 = 910.9.
  // An 810-milli pod on the empty GPU: stranded 89.1 -> 90 (190 - 100): gain -0.9 -> -900.
  // With popularity=0.9 the 100-milli pods are cut (810-milli pods cover 90 %): fill(1000) =
  // 810, stranded 190 before and after: gain 0.
  const auto history = concat({pods(90, 0, 1, 810), pods(10, 0, 1, 100)});
  EfdBench all("efd:popularity=1:quantise=0", {gpu_node("n", 64000, 1)}, history);
  EXPECT_EQ(all.score(0, all.req(0, 1, 810)).score, -900);
  EfdBench cut("efd:popularity=0.9:quantise=0", {gpu_node("n", 64000, 1)}, history);
  EXPECT_EQ(cut.score(0, cut.req(0, 1, 810)).score, 0);
}

TEST(EfdPolicy, PopularityBandAveragesTheCuts) {
  // The history of GapOf190...; popularity .9 with band .1 cuts at .8, .85, .9 (810-milli pods
  // only: stranded 190 before and after) and .95, 1 (both classes: 89.1 before, 90 after). The
  // mean: .6 x 190 + .4 x 89.1 = 149.64 before, .6 x 190 + .4 x 90 = 150 after: gain -0.36.
  const auto history = concat({pods(90, 0, 1, 810), pods(10, 0, 1, 100)});
  EfdBench band("efd:popularity=0.9:popularity_band=0.1:quantise=0", {gpu_node("n", 64000, 1)},
                history);
  EXPECT_EQ(band.score(0, band.req(0, 1, 810)).score, -360);
  // efd-online makes the same cuts of the arrivals once it has learnt them (32 arrivals).
  EfdBench online("efd-online:popularity=0.9:popularity_band=0.1:quantise=0",
                  {gpu_node("n", 64000, 1)}, history);
  for (int i = 0; i < 32; ++i) {
    online.policy->observe(i % 10 < 9 ? online.req(0, 1, 810) : online.req(0, 1, 100));
  }
  // 32 arrivals: 29 of 810 and 3 of 100 (a = 29/32, b = 3/32); the cuts at .95 and 1 keep both:
  //   fill(1000) = a (810 + 100) + b (100 + a 810 + b 900) = 910.79, 89.21 stranded before.
  // The mean: .6 x 190 + .4 x 89.21 = 149.68 before, 150 after: gain -0.316.
  EXPECT_EQ(online.score(0, online.req(0, 1, 810)).score, -316);
}

// multi_reserve. History: one 8-GPU pod and eight 1-GPU pods, so 8-GPU pods are half the GPU
// milli. Two empty 8-GPU nodes: 16000 milli fillable, lambda = .5 x 16000 / 8000 = 1 such pod
// still to come, 2 rooms: P(N >= 2) = 1 - 2/e = .264, rounded to .25 (steps of .05). A 1-GPU pod
// on either breaks a room: .25 x 8000 = 2000 milli. Once node b is broken: 15000 fillable,
// lambda = .9375, 1 room left: P(N >= 1) = 1 - exp(-.9375) = .608, .6, so breaking a costs 4800
// and b costs nothing.
TEST(EfdPolicy, MultiReservePricesTheRoomsMultiGpuPodsStillNeed) {
  const std::vector<cluster::NodeSpec> nodes{gpu_node("a", 96000, 8), gpu_node("b", 96000, 8)};
  const auto history = concat({pods(1, 0, 8, 1000), pods(8, 0, 1, 1000)});
  EfdBench b("efd:popularity=1:quantise=0", nodes, history);
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, -2000000);
  b.apply(1, 0, 1000, {0});
  for (int i = 0; i < 256; ++i) b.policy->observe(b.req(0, 1, 1000));  // re-measured every 256
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, -4800000);
  EXPECT_EQ(b.score(1, b.req(0, 1, 1000)).score, 0);
  // An 8-GPU pod pays for its own room too, wherever it goes.
  EXPECT_EQ(b.score(0, b.req(0, 8, 1000)).score, -4800000);
  // Off: no price.
  EfdBench off("efd:popularity=1:quantise=0:multi_reserve=0", nodes, history);
  EXPECT_EQ(off.score(0, off.req(0, 1, 1000)).score, 0);
  // Rooms far more than the demand still to come: 20 rooms, lambda = 10, P(N >= 20) = .003,
  // which rounds to no price.
  std::vector<cluster::NodeSpec> many;
  for (int i = 0; i < 20; ++i) many.push_back(gpu_node("n" + std::to_string(i), 96000, 8));
  EfdBench plenty("efd:popularity=1:quantise=0", many, history);
  EXPECT_EQ(plenty.score(0, plenty.req(0, 1, 1000)).score, 0);
}

// reserve_nested. History: an 8-GPU pod with 88 cores, one with 64 cores and sixteen 1-GPU
// pods: each 8-GPU class is a quarter of the GPU milli. Three empty 8-GPU nodes with 96 cores:
// 24000 milli fillable, lambda = .25 x 24000 / 8000 = .75 pods of each class, 3 rooms each.
// Alone, P(N >= 3) = 1 - e^-.75 (1 + .75 + .28125) = .0405, rounded to .05 for both classes.
// Nested, the 88-core pods take the 64-core class's rooms too: lambda = 1.5, P(N >= 3) =
// 1 - e^-1.5 (1 + 1.5 + 1.125) = .191, .2. A 1-GPU pod breaks one room of each class:
// (.05 + .05) x 8000 = 800 milli alone, (.2 + .05) x 8000 = 2000 nested.
TEST(EfdPolicy, ReserveNestedCountsThePodsThatTakeAClassRooms) {
  std::vector<cluster::NodeSpec> nodes;
  for (const char* name : {"a", "b", "c"}) nodes.push_back(gpu_node(name, 96000, 8));
  const auto history =
      concat({pods(1, 88000, 8, 1000), pods(1, 64000, 8, 1000), pods(16, 0, 1, 1000)});
  EfdBench nested("efd:popularity=1:quantise=0", nodes, history);
  EXPECT_EQ(nested.score(0, nested.req(0, 1, 1000)).score, -2000000);
  EfdBench alone("efd:popularity=1:quantise=0:reserve_nested=0", nodes, history);
  EXPECT_EQ(alone.score(0, alone.req(0, 1, 1000)).score, -800000);
}

TEST(EfdPolicy, SharedPodPrefersAPartlyUsedNode) {
  // History: 500 and 300 milli, p = .5 each (expected_fill_test.cpp: stranded per GPU 1000 ->
  // 125, 700 -> 150, 500 -> 100, 0 -> 0). A 500-milli pod:
  //   empty [1000, 1000] 250 -> [500, 1000] 225: gain 25 -> floor(50.31) = 50;
  //   used  [500, 1000] 225 -> GPU 0: [0, 1000] 125 (gain 100 -> floor(51.25) = 51);
  //                            GPU 1: [500, 500] 200 (gain 25).
  // The used node wins although the node order ranks the empty one first.
  EfdBench b("efd:popularity=1:score_scale=2000",
             {gpu_node("empty", 64000, 2), gpu_node("used", 64000, 2)},
             concat({pods(1, 0, 1, 500), pods(1, 0, 1, 300)}));
  b.apply(1, 0, 500, {0});
  const PodRequest p = b.req(0, 1, 500);
  EXPECT_EQ(b.score(0, p).score, 50);
  EXPECT_EQ(b.score(1, p).score, 51);
  EXPECT_EQ(b.score(1, p).gpu, 0);
  const Decision d = b.scheduler.decide(p);
  EXPECT_EQ(d.placement.node, 1U);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0));
}

TEST(EfdPolicy, GpusThatStrandEquallyGoToTheFirst) {
  // History: 500 milli only (stranded per GPU: r mod 500). Node [700, 600] strands 300. A
  // 100-milli pod: GPU 0 -> [600, 600] 200; GPU 1 -> [700, 500] 200: equal, the first GPU wins
  // (best-fit would take GPU 1, the one with less free).
  EfdBench b("efd:popularity=1:quantise=0", {gpu_node("n", 64000, 2)}, pods(1, 0, 1, 500));
  b.apply(0, 0, 300, {0});
  b.apply(0, 0, 400, {1});
  const PodRequest p = b.req(0, 1, 100);
  EXPECT_EQ(b.score(0, p).score, 100000);
  EXPECT_EQ(b.score(0, p).gpu, 0);
  EXPECT_THAT(b.scheduler.decide(p).placement.gpus, ElementsAre(0));
}

TEST(EfdPolicy, EqualScoresGoByTheNodeRanking) {
  // History: 500 milli only. A 500-milli pod strands nothing anywhere: 50 on both nodes, so
  // the tie-break ranking picks, whichever node is partly used.
  EfdBench b("efd:popularity=1:score_scale=2000",
             {gpu_node("a", 64000, 2), gpu_node("b", 64000, 2)}, pods(1, 0, 1, 500));
  b.apply(1, 0, 500, {0});
  const PodRequest p = b.req(0, 1, 500);
  EXPECT_EQ(b.score(0, p).score, 50);
  EXPECT_EQ(b.score(1, p).score, 50);
  EXPECT_EQ(b.scheduler.decide(p).placement.node, 0U);
  b.scheduler.set_tie_break_rank({1, 0});
  EXPECT_EQ(b.scheduler.decide(p).placement.node, 1U);
}

// Node 0 "b": model B, 2 GPUs; node 1 "a": model A, 6 GPUs (capacity 2000 and 6000 milli).
// History: 1000 milli on one GPU of model B only, and 1000 milli on any model, one each.
// Demand 1000 (per pod, weighted); B-only reserves .5 of it, all on B (capacity 2000 of 2000
// allowed): reserved[B] = .5, pressure[B] = .5 / (2000 / 8000) = 2, capped at 1; pressure[A] =
// 0. Nothing is stranded on either model (whole GPUs fill whole GPUs), so the gain is minus the
// price: scarcity_weight x GPU milli x (pressure[model] - least pressed allowed).
std::vector<cluster::NodeSpec> two_models() {
  return {gpu_node("b", 64000, 2, "B"), gpu_node("a", 64000, 6, "A")};
}
std::vector<workload::PodSpec> constrained_history() {
  return concat({pods(1, 0, 1, 1000, {"B"}), pods(1, 0, 1, 1000)});
}

TEST(EfdPolicy, ScarceModelPriceSteersAnyModelPodsAway) {
  // The price on every milli taken (scarcity_feed=0); the default's is below.
  EfdBench exact("efd:popularity=1:quantise=0:scarcity_feed=0", two_models(),
                 constrained_history());
  // Any-model pod of one GPU: on B 1 x 1000 x 1 = 1000 -> -1000000; on A 0.
  EXPECT_EQ(exact.score(0, exact.req(0, 1, 1000)).score, -1000000);
  EXPECT_EQ(exact.score(1, exact.req(0, 1, 1000)).score, 0);
  // Two GPUs: 1 x 2000 x 1 = 2000.
  EXPECT_EQ(exact.score(0, exact.req(0, 2, 1000)).score, -2000000);
  // A pod that may only use B pays nothing there (B is its cheapest allowed model).
  EXPECT_EQ(exact.score(0, exact.req(0, 1, 1000, {"B"})).score, 0);
  // A share pays for its milli, 1 x 500 x 1 = 500, and strands the 500 milli it leaves (no
  // class is that small): -1000 -> -1000000.
  EXPECT_EQ(exact.score(0, exact.req(0, 1, 500)).score, -1000000);
  // As shipped (scarcity_feed=1) the share pays for the whole GPU the pinned whole-GPU pods
  // can no longer fill: -500 - 1 x 1000 -> -1500000; a whole GPU pays the same as above.
  EfdBench feed("efd:popularity=1:quantise=0", two_models(), constrained_history());
  EXPECT_EQ(feed.score(0, feed.req(0, 1, 500)).score, -1500000);
  EXPECT_EQ(feed.score(0, feed.req(0, 1, 1000)).score, -1000000);

  // Quantised: floor(100 sigmoid(-1000 / 2000)) = floor(37.75) = 37 against 50; the any-model
  // pod goes to A although B ranks first.
  EfdBench b("efd:popularity=1:score_scale=2000", two_models(), constrained_history());
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, 37);
  EXPECT_EQ(b.score(1, b.req(0, 1, 1000)).score, 50);
  EXPECT_EQ(b.scheduler.decide(b.req(0, 1, 1000)).placement.node, 1U);
  EXPECT_EQ(b.scheduler.decide(b.req(0, 1, 1000, {"B"})).placement.node, 0U);
}

TEST(EfdPolicy, ScarcityWeightZeroRemovesThePrice) {
  EfdBench exact("efd:popularity=1:quantise=0:scarcity_weight=0", two_models(),
                 constrained_history());
  EXPECT_EQ(exact.score(0, exact.req(0, 1, 1000)).score, 0);
  EXPECT_EQ(exact.score(1, exact.req(0, 1, 1000)).score, 0);
  // Equal scores: the node ranking picks B.
  EfdBench b("efd:popularity=1:scarcity_weight=0:score_scale=2000", two_models(),
             constrained_history());
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, 50);
  EXPECT_EQ(b.scheduler.decide(b.req(0, 1, 1000)).placement.node, 0U);
  // The price scales with the weight (.5 x 1000 x 1), and without the cap with the pressure
  // itself (1 x 1000 x 2).
  EfdBench half("efd:popularity=1:quantise=0:scarcity_weight=0.5", two_models(),
                constrained_history());
  EXPECT_EQ(half.score(0, half.req(0, 1, 1000)).score, -500000);
  EfdBench uncapped("efd:popularity=1:quantise=0:scarcity_cap=0", two_models(),
                    constrained_history());
  EXPECT_EQ(uncapped.score(0, uncapped.req(0, 1, 1000)).score, -2000000);
}

// Pinned pods are split over many rare shapes, so the target's popularity cut drops them; the
// pressure is measured on the whole history. History: three any-model pods and one B-only pod
// of one whole GPU; popularity .5 keeps only the any-model class. B-only demand is .25 of all,
// B's capacity .25 of all: pressure[B] = 1, so an any-model pod pays 1000 on B. Measured on the
// target (scarcity_history=0) there is no pinned demand and no price.
TEST(EfdPolicy, ScarceModelPressureComesFromTheWholeHistory) {
  const auto past = concat({pods(3, 0, 1, 1000), pods(1, 0, 1, 1000, {"B"})});
  EfdBench history("efd:popularity=0.5:quantise=0", two_models(), past);
  EXPECT_EQ(history.score(0, history.req(0, 1, 1000)).score, -1000000);
  EXPECT_EQ(history.score(1, history.req(0, 1, 1000)).score, 0);
  EfdBench target("efd:popularity=0.5:quantise=0:scarcity_history=0", two_models(), past);
  EXPECT_EQ(target.score(0, target.req(0, 1, 1000)).score, 0);
}

// scarcity_feed=1 charges the price on the pinned milli the node could still feed. Node "b":
// model B, 2 GPUs, 8000 CPU; node "a": model A, 6 GPUs. History: a B-only whole-GPU pod of 8000
// CPU and an any-model one of no CPU: pressure[B] = 1 as above. The B node's CPU feeds one pinned
// pod, not two, so the pinned workload can fill 1000 of its 2000 idle milli.
TEST(EfdPolicy, ScarcityFeedChargesOnlyWhatPinnedPodsCouldStillFill) {
  // scarcity_feed=1 is the default; `feed` names it for the reader.
  const std::vector<cluster::NodeSpec> nodes{gpu_node("b", 8000, 2, "B"),
                                             gpu_node("a", 64000, 6, "A")};
  const auto past = concat({pods(1, 8000, 1, 1000, {"B"}), pods(1, 0, 1, 1000)});
  EfdBench feed("efd:popularity=1:quantise=0:scarcity_feed=1", nodes, past);
  EfdBench every("efd:popularity=1:quantise=0:scarcity_feed=0", nodes, past);
  // An any-model GPU of no CPU leaves the 8000 CPU that feeds one pinned pod: nothing displaced
  // with the option, 1 x 1000 without it (nothing is stranded either way).
  EXPECT_EQ(feed.score(0, feed.req(0, 1, 1000)).score, 0);
  EXPECT_EQ(every.score(0, every.req(0, 1, 1000)).score, -1000000);
  // One of 8000 CPU takes the CPU too: the pinned fill drops from 1000 to 0, the same price, and
  // the idle GPU left is stranded (no CPU to feed it): -1000 - 1000 either way.
  EXPECT_EQ(feed.score(0, feed.req(8000, 1, 1000)).score, -2000000);
  EXPECT_EQ(every.score(0, every.req(8000, 1, 1000)).score, -2000000);
  // Model A has no pressure: no price there.
  EXPECT_EQ(feed.score(1, feed.req(0, 1, 1000)).score, 0);
}

// scarcity_dynamic (on by default) re-measures the pressure every 64 arrivals: history pressure x
// (the cluster's fillable share) / (the pinned-fillable share of the model). Two models as above:
// pressure[B] = 1 from the history. Two whole GPUs used on A: the cluster's fillable share is
// 6000 / 8000 = .75, B's pinned-fillable share 2000 / 2000 = 1: pressure[B] = .75, and an
// any-model GPU on B pays 750. One GPU of B used as well: 5000 / 8000 over 1000 / 2000 = 1.25,
// capped at 1 (uncapped, x the history's 2: 2.5).
TEST(EfdPolicy, DynamicPressureFollowsWhatIsLeftToFill) {
  const auto observe_64 = [](EfdBench& b) {
    const std::uint64_t epoch = b.policy->score_epoch();
    for (int i = 0; i < 64; ++i) b.policy->observe(b.req(0, 1, 1000));
    return b.policy->score_epoch() != epoch;
  };
  EfdBench b("efd:popularity=1:quantise=0:scarcity_dynamic=1", two_models(), constrained_history());
  b.apply(1, 0, 1000, {0});
  b.apply(1, 0, 1000, {1});
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, -1000000);  // until the next re-measurement
  EXPECT_TRUE(observe_64(b));
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, -750000);
  EXPECT_EQ(b.score(1, b.req(0, 1, 1000)).score, 0);
  EXPECT_FALSE(observe_64(b));  // nothing moved: the cached scores stay
  b.apply(0, 0, 1000, {0});
  EXPECT_TRUE(observe_64(b));
  EXPECT_EQ(b.score(0, b.req(0, 1, 1000)).score, -1000000);
  EfdBench uncapped("efd:popularity=1:quantise=0:scarcity_dynamic=1:scarcity_cap=0", two_models(),
                    constrained_history());
  uncapped.apply(1, 0, 1000, {0});
  uncapped.apply(1, 0, 1000, {1});
  uncapped.apply(0, 0, 1000, {0});
  observe_64(uncapped);
  EXPECT_EQ(uncapped.score(0, uncapped.req(0, 1, 1000)).score, -2500000);
  // Off: the history's pressure whatever the state.
  EfdBench fixed("efd:popularity=1:quantise=0:scarcity_dynamic=0", two_models(),
                 constrained_history());
  fixed.apply(1, 0, 1000, {0});
  fixed.apply(1, 0, 1000, {1});
  EXPECT_FALSE(observe_64(fixed));
  EXPECT_EQ(fixed.score(0, fixed.req(0, 1, 1000)).score, -1000000);
}

// efd-online re-measures after each re-learn: 32 arrivals, half pinned to B, learn
// pressure[B] = 1; two GPUs of A then used, the 64th arrival re-learns and re-measures: .75.
TEST(EfdPolicy, OnlineRemeasuresThePressureAfterEachRelearn) {
  const auto arrive_32 = [](EfdBench& b) {
    for (int i = 0; i < 16; ++i) {
      b.policy->observe(b.req(0, 1, 1000, {"B"}));
      b.policy->observe(b.req(0, 1, 1000));
    }
  };
  EfdBench online("efd-online:popularity=1:quantise=0", two_models(), constrained_history());
  EfdBench fixed("efd-online:popularity=1:quantise=0:scarcity_dynamic=0", two_models(),
                 constrained_history());
  for (EfdBench* b : {&online, &fixed}) {
    arrive_32(*b);
    b->apply(1, 0, 1000, {0});
    b->apply(1, 0, 1000, {1});
    EXPECT_EQ(b->score(0, b->req(0, 1, 1000)).score, -1000000);
    arrive_32(*b);
  }
  EXPECT_EQ(online.score(0, online.req(0, 1, 1000)).score, -750000);
  EXPECT_EQ(fixed.score(0, fixed.req(0, 1, 1000)).score, -1000000);
}

TEST(EfdPolicy, ScoresAreSigmoidIntegersOrTheExactGain) {
  // History: 500 milli with 4000 CPU. Node "tight": 8000 CPU, 1 GPU: its GPU's fill (two pods)
  // needs 8000 CPU, so a CPU-only pod of 4000 CPU halves it: stranded 0 -> 500, gain -500.
  const auto history = pods(1, 4000, 1, 500);
  const std::vector<cluster::NodeSpec> nodes{gpu_node("tight", 8000, 1),
                                             gpu_node("roomy", 64000, 1)};
  EfdBench exact("efd:popularity=1:quantise=0", nodes, history);
  EXPECT_EQ(exact.score(0, exact.req(4000, 0, 0)).score, -500000);
  EXPECT_EQ(exact.score(1, exact.req(4000, 0, 0)).score, 0);
  // floor(100 sigmoid(-500 / 2000)) = floor(43.78) = 43; 0 -> 50.
  EfdBench b("efd:popularity=1:score_scale=2000", nodes, history);
  EXPECT_EQ(b.score(0, b.req(4000, 0, 0)).score, 43);
  EXPECT_EQ(b.score(1, b.req(4000, 0, 0)).score, 50);
  EXPECT_EQ(b.scheduler.decide(b.req(4000, 0, 0)).placement.node, 1U);
  // score_scale: -500 / 1000 -> floor(37.75) = 37; -500 / 100 -> floor(0.67) = 0.
  EfdBench s1000("efd:popularity=1:score_scale=1000", nodes, history);
  EXPECT_EQ(s1000.score(0, s1000.req(4000, 0, 0)).score, 37);
  EfdBench s100("efd:popularity=1:score_scale=100", nodes, history);
  EXPECT_EQ(s100.score(0, s100.req(4000, 0, 0)).score, 0);
  // Every quantised score lies in 0..100, whatever the pod.
  for (const PodRequest& p : {b.req(4000, 0, 0), b.req(8000, 0, 0), b.req(0, 1, 500),
                              b.req(4000, 1, 500), b.req(8000, 1, 1000), b.req(0, 1, 100)}) {
    for (cluster::NodeIndex n = 0; n < 2; ++n) {
      if (check_node(b.cluster, n, p) != kFits) continue;
      const std::int64_t s = b.policy->score_node(b.cluster, n, p).score;
      EXPECT_GE(s, 0);
      EXPECT_LE(s, 100);
    }
  }
}

TEST(EfdPolicy, FeedLimitOptionReachesTheModel) {
  // As above, without the feeding limit the CPU-only pod strands nothing: gain 0.
  const auto history = pods(1, 4000, 1, 500);
  EfdBench b("efd:popularity=1:quantise=0:feed_limit=0", {gpu_node("tight", 8000, 1)}, history);
  EXPECT_EQ(b.score(0, b.req(4000, 0, 0)).score, 0);
}

TEST(EfdPolicy, CpuCompetitionOptionReachesTheModel) {
  // History: 500 milli with 4000 CPU and CPU-only pods of 4000 CPU, p = .5 each. Node: 8000 CPU,
  // 1 GPU. With competition c the GPU pods get cpu_free x (1 - c x 2000 / 4000) (while a CPU-only
  // pod fits in cpu_free). A 500-milli pod with 4000 CPU:
  //   c = .25 (explicit): before 8000 x .875 = 7000 of 8000: 1000 - 875 = 125;
  //                       after [500], 4000 x .875 = 3500 of 4000: 500 - 437.5 = 62.5;
  //                       gain 62.5 -> 62500.
  //   c = 0: nothing stranded before or after: 0.
  const auto history = concat({pods(1, 4000, 1, 500), pods(1, 4000, 0, 0)});
  EfdBench some("efd:popularity=1:quantise=0:cpu_competition=0.25", {gpu_node("n", 8000, 1)},
                history);
  EXPECT_EQ(some.score(0, some.req(4000, 1, 500)).score, 62500);
  EfdBench none("efd:popularity=1:quantise=0:cpu_competition=0", {gpu_node("n", 8000, 1)}, history);
  EXPECT_EQ(none.score(0, none.req(4000, 1, 500)).score, 0);
}

TEST(EfdPolicy, MultiGpuWeightOptionReachesTheModel) {
  // History: 2 whole GPUs and 500 milli, p = .5 each. A 1-GPU pod on an empty 2-GPU node leaves
  // one whole GPU: the 2-GPU class no longer fits, 1000 idle milli stranded x weight x .5. The
  // reserve price is off to see the term alone.
  const auto history = concat({pods(1, 0, 2, 1000), pods(1, 0, 1, 500)});
  const std::vector<cluster::NodeSpec> nodes{gpu_node("n", 64000, 2)};
  EfdBench half("efd:popularity=1:quantise=0:multi_reserve=0:multi_gpu_weight=0.5", nodes, history);
  EXPECT_EQ(half.score(0, half.req(0, 1, 1000)).score, -250000);
  EfdBench one("efd:popularity=1:quantise=0:multi_reserve=0:multi_gpu_weight=1", nodes, history);
  EXPECT_EQ(one.score(0, one.req(0, 1, 1000)).score, -500000);
  EfdBench off("efd:popularity=1:quantise=0:multi_reserve=0:multi_gpu_weight=0", nodes, history);
  EXPECT_EQ(off.score(0, off.req(0, 1, 1000)).score, 0);
  // Off by default (docs/policies.md: on multigpu50 the term guards the wrong nodes).
  EfdBench shipped("efd:popularity=1:quantise=0:multi_reserve=0", nodes, history);
  EXPECT_EQ(shipped.score(0, shipped.req(0, 1, 1000)).score, 0);
  // The 2-GPU pod itself takes both GPUs: nothing idle is left, nothing stranded.
  EXPECT_EQ(one.score(0, one.req(0, 2, 1000)).score, 0);
}

TEST(EfdPolicy, NeedsAHistory) {
  Bare bare;
  const std::string message = "policy 'efd' needs a workload history (use efd-online without one)";
  EXPECT_EQ(test::input_error([&] { make_policy("efd", bare.context()); }), message);
  EXPECT_EQ(test::input_error([&] { make_policy("default", bare.context()); }), message);
  const workload::TargetWorkload empty;
  EXPECT_EQ(test::input_error([&] { make_policy("efd:popularity=1", bare.context(&empty)); }),
            message);
  // efd-online learns from arrivals and needs none.
  EXPECT_EQ(make_policy("efd-online", bare.context())->name(), "efd-online");
}

TEST(EfdPolicy, SpecOptionsAreChecked) {
  EXPECT_NO_THROW(check_policy_spec("efd"));
  EXPECT_NO_THROW(
      check_policy_spec("efd:popularity=1:score_scale=1000:scarcity_weight=0:cpu_competition=0.5:"
                        "multi_gpu_weight=0:feed_limit=0:quantise=0"));
  EXPECT_NO_THROW(check_policy_spec("efd-online:popularity=0.8"));
  EXPECT_EQ(test::input_error([] { check_policy_spec("efd:popularty=1"); }),
            "policy 'efd' has no option 'popularty' (options: popularity, score_scale, "
            "scarcity_weight, scarcity_history, scarcity_cap, scarcity_feed, cpu_competition, "
            "multi_gpu_weight, feed_limit, quantise, scarcity_dynamic, popularity_band, "
            "multi_reserve, reserve_nested, feed_tail)");
  EXPECT_THAT(test::input_error([] { check_policy_spec("efd-online:alpha=1"); }),
              ::testing::HasSubstr("policy 'efd-online' has no option 'alpha'"));
  EXPECT_EQ(test::input_error([] { check_policy_spec("efd:popularity"); }),
            "policy 'efd': option 'popularity' needs a non-negative number, got ''");
  EXPECT_EQ(test::input_error([] { check_policy_spec("efd:quantise=-1"); }),
            "policy 'efd': option 'quantise' needs a non-negative number, got '-1'");
  EXPECT_EQ(test::input_error([] { check_policy_spec("efd:quantise=no"); }),
            "policy 'efd': option 'quantise' needs a non-negative number, got 'no'");
  // make_policy checks the same way before building anything.
  Bare bare;
  const workload::TargetWorkload history = workload::typical_pods(pods(1, 0, 1, 500), 1.0);
  EXPECT_THAT(test::input_error([&] { make_policy("efd:bogus=1", bare.context(&history)); }),
              ::testing::HasSubstr("has no option 'bogus'"));
}

TEST(EfdPolicy, EqualNodeStatesGetEqualScores) {
  EfdBench b("efd:popularity=1:score_scale=2000",
             {gpu_node("x", 64000, 4), gpu_node("y", 64000, 4)},
             concat({pods(3, 4000, 1, 500), pods(2, 8000, 1, 300), pods(1, 0, 2, 1000)}));
  EXPECT_TRUE(b.policy->scores_per_node());
  EXPECT_TRUE(b.policy->scores_by_state());
  // Same state, different histories (node 1 changed and changed back: another version).
  b.apply(1, 4000, 700, {2});
  b.cluster.release(placement(1, 4000, 700, {2}));
  const std::vector<PodRequest> requests{b.req(4000, 1, 500), b.req(8000, 1, 300),
                                         b.req(0, 2, 1000), b.req(16000, 0, 0),
                                         b.req(4000, 1, 810)};
  auto same = [&] {
    for (const PodRequest& p : requests) {
      const NodeScore x = b.score(0, p);
      const NodeScore y = b.score(1, p);
      EXPECT_EQ(x.score, y.score);
      EXPECT_EQ(x.gpu, y.gpu);
    }
  };
  same();
  // Same placements on both, scored in between: the per-node caches follow each node's state.
  b.apply(0, 8000, 300, {1});
  const std::int64_t changed = b.score(0, requests[1]).score;
  b.apply(1, 8000, 300, {1});
  EXPECT_EQ(b.score(1, requests[1]).score, changed);
  same();
  b.apply(0, 4000, 500, {3});
  b.apply(1, 4000, 500, {3});
  same();
}

TEST(EfdPolicy, ScoresFollowTheNodeState) {
  // history_810_500: an 810-milli pod on [1000, 1000] gains -95 (48); after a 190 share on
  // GPU 1 it gains +155 (51); releasing the share brings back 48.
  EfdBench b("efd:popularity=1:score_scale=2000", {gpu_node("n", 64000, 2)}, history_810_500());
  const PodRequest p = b.req(0, 1, 810);
  EXPECT_EQ(b.score(0, p).score, 48);
  b.apply(0, 0, 190, {1});
  EXPECT_EQ(b.score(0, p).score, 51);
  b.cluster.release(placement(0, 0, 190, {1}));
  EXPECT_EQ(b.score(0, p).score, 48);
}

// A mixed sequence placed through the score index and through the full scan: the same
// placements (EFD's scores are per node and cached by version and epoch).
void expect_incremental_matches_full_scan(std::string_view spec) {
  std::vector<cluster::NodeSpec> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(gpu_node("n" + std::to_string(i), i % 2 == 0 ? 32000 : 96000, 2 + 2 * (i % 3),
                             i % 3 == 0 ? "A" : "B"));
  }
  const auto history =
      concat({pods(6, 4000, 1, 500), pods(4, 8000, 1, 810), pods(3, 2000, 1, 300),
              pods(2, 16000, 2, 1000), pods(2, 4000, 1, 1000, {"A"}), pods(2, 6000, 0, 0)});
  EfdBench inc(spec, nodes, history);
  SchedulerOptions full_scan;
  full_scan.incremental = false;
  EfdBench full(spec, nodes, history, full_scan);
  const std::vector<workload::PodSpec> arrivals =
      concat({pods(1, 4000, 1, 500), pods(1, 8000, 1, 810), pods(1, 2000, 1, 300),
              pods(1, 16000, 2, 1000), pods(1, 4000, 1, 1000, {"A"}), pods(1, 6000, 0, 0)});
  // 60 arrivals ask for about 46 GPUs and 400 cores of 24 GPUs and 384 cores: the cluster fills.
  int placed = 0;
  for (int i = 0; i < 60; ++i) {
    const workload::PodSpec& spec_i = arrivals[static_cast<std::size_t>((i * 5 + i / 6) % 6)];
    const Decision a = inc.scheduler.schedule(inc.resolver.resolve(spec_i));
    const Decision b = full.scheduler.schedule(full.resolver.resolve(spec_i));
    ASSERT_EQ(a.outcome, b.outcome) << spec << " pod " << i;
    if (a.outcome != Outcome::kPlaced) continue;
    ++placed;
    EXPECT_EQ(a.placement.node, b.placement.node) << spec << " pod " << i;
    EXPECT_EQ(a.placement.gpus, b.placement.gpus) << spec << " pod " << i;
  }
  EXPECT_GT(placed, 20) << spec;
  EXPECT_LT(placed, 60) << spec;
}

TEST(EfdPolicy, IncrementalDecisionsMatchTheFullScan) {
  expect_incremental_matches_full_scan("efd:popularity=1");
  expect_incremental_matches_full_scan("efd-online:popularity=1");
}

TEST(EfdOnlinePolicy, RelearnsAt32And64And128ArrivalsThenEvery4096) {
  Bare bare;
  const auto policy = make_policy("efd-online:popularity=1", bare.context());
  RequestResolver resolver(bare.cluster);
  const PodRequest p = resolver.resolve(test::pod("p", 0, 1, 500));
  const std::uint64_t start = policy->score_epoch();
  int arrivals = 0;
  auto arrive_until = [&](int n) {
    while (arrivals < n) {
      policy->observe(p);
      ++arrivals;
    }
    return policy->score_epoch() - start;
  };
  EXPECT_EQ(arrive_until(31), 0U);
  EXPECT_EQ(arrive_until(32), 1U);
  EXPECT_EQ(arrive_until(63), 1U);
  EXPECT_EQ(arrive_until(64), 2U);
  EXPECT_EQ(arrive_until(127), 2U);
  EXPECT_EQ(arrive_until(128), 3U);
  EXPECT_EQ(arrive_until(4095), 7U);  // 256, 512, 1024, 2048
  EXPECT_EQ(arrive_until(4096), 8U);
  EXPECT_EQ(arrive_until(8191), 8U);  // then every 4096
  EXPECT_EQ(arrive_until(8192), 9U);
}

TEST(EfdOnlinePolicy, ScoresFollowTheLearntTarget) {
  // Node 0 is empty; node 1 has 190 milli used on its GPU. Before anything is learnt EFD has no
  // target: every gain is 0 and the ranking picks node 0 for an 810-milli pod. After 32
  // arrivals of 500-milli pods: fill(1000) = 1000, fill(810) = 500 + fill(310) = 500, so
  //   node 0: [1000] 0 -> [190] 190: gain -190;
  //   node 1: [810] 310 -> [0] 0: gain +310.
  EfdBench b("efd-online:popularity=1:quantise=0",
             {gpu_node("fresh", 64000, 1), gpu_node("used", 64000, 1)}, {});
  b.apply(1, 0, 190, {0});
  const PodRequest big = b.req(0, 1, 810);
  EXPECT_EQ(b.score(0, big).score, 0);
  EXPECT_EQ(b.score(1, big).score, 0);
  EXPECT_EQ(b.scheduler.decide(big).placement.node, 0U);
  const PodRequest half = b.req(0, 1, 500);
  for (int i = 0; i < 31; ++i) b.policy->observe(half);
  EXPECT_EQ(b.scheduler.decide(big).placement.node, 0U);  // not learnt yet
  b.policy->observe(half);
  EXPECT_EQ(b.score(0, big).score, -190000);
  EXPECT_EQ(b.score(1, big).score, 310000);
  // The scheduler drops the scores it cached under the old epoch.
  EXPECT_EQ(b.scheduler.decide(big).placement.node, 1U);
}

}  // namespace
}  // namespace gpuorch::sched
