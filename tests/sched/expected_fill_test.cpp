// The expected-fill model behind EFD (sched/expected_fill.hpp): fill(r) = sum over fitting classes
// m of p_m (d_m + fill(r - d_m)) / fitting mass, per GPU model; stranded = idle - fill, scaled by
// the feeding limit, plus the multi-GPU term. Every expected number is derived by hand below.
#include "gpuorch/sched/expected_fill.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpuorch/sched/pod_request.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using Gpus = std::vector<std::int32_t>;

constexpr std::int64_t kPlenty = std::int64_t{1} << 40;  // CPU or memory that feeds anything

ShapeClass gpu_class(std::int32_t milli, double weight, std::int64_t cpu = 0, int gpus = 1,
                     double memory = 0, std::uint64_t mask = kAnyModel) {
  return ShapeClass{cpu, milli, gpus, mask, memory, weight};
}

ShapeClass cpu_class(std::int64_t cpu, double weight) {
  return ShapeClass{cpu, 0, 0, 0, 0, weight};
}

ExpectedFillParams params(double cpu_competition = 0, double multi_gpu_weight = 1,
                          bool feed_limit = true) {
  return ExpectedFillParams{cpu_competition, multi_gpu_weight, feed_limit};
}

// One GPU of model 0, fed without limit: stranded = r - fill(r).
double stranded_one(const ExpectedFill& f, std::int32_t left) {
  const Gpus gpus{left};
  return f.stranded(0, kPlenty, kPlenty, gpus);
}

TEST(ExpectedFill, OneClassOfHalfGpus) {
  // Target: 500 milli, p = 1. fill(1000) = 500 + fill(500) = 500 + 500 + fill(0) = 1000;
  // fill(700) = 500 + fill(200) = 500; fill(400) = 0 (nothing fits).
  const ExpectedFill f({gpu_class(500, 1.0)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(f, 1000), 0.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 700), 200.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 400), 400.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 500), 0.0);
  // A node sums its GPUs: 0 + 200 + 400; a node with no idle GPU strands nothing.
  const Gpus node{1000, 700, 400};
  EXPECT_DOUBLE_EQ(f.stranded(0, kPlenty, kPlenty, node), 600.0);
  const Gpus full{0, 0};
  EXPECT_DOUBLE_EQ(f.stranded(0, kPlenty, kPlenty, full), 0.0);
}

TEST(ExpectedFill, FirstFittingPodAveragesOverTheFittingClasses) {
  // Target: 500 and 300 milli, p = 0.5 each.
  //   fill(r) = 0 for r < 300; 300 for 300 <= r < 500 (only 300 fits, 300 + fill(< 200));
  //   fill(500) = .5 (500 + fill(0)) + .5 (300 + fill(200)) = 250 + 150 = 400;
  //   fill(600) = .5 (500 + fill(100)) + .5 (300 + fill(300)) = 250 + 300 = 550;
  //   fill(700) = .5 (500 + fill(200)) + .5 (300 + fill(400)) = 250 + 300 = 550;
  //   fill(1000) = .5 (500 + fill(500)) + .5 (300 + fill(700)) = 450 + 425 = 875.
  const ExpectedFill f({gpu_class(500, 0.5), gpu_class(300, 0.5)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(f, 299), 299.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 450), 150.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 500), 100.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 600), 50.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 700), 150.0);
  EXPECT_DOUBLE_EQ(stranded_one(f, 1000), 125.0);
  // The weights are relative: 1 and 1 give the same programme as .5 and .5.
  const ExpectedFill g({gpu_class(500, 1.0), gpu_class(300, 1.0)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(g, 1000), 125.0);
}

TEST(ExpectedFill, GapOf190IsStrandedUnlessSuchSmallPodsAreInTheTarget) {
  // Only 810-milli pods: a 190 gap fits nothing; a whole GPU is filled to 810, 190 stranded.
  const ExpectedFill big({gpu_class(810, 1.0)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(big, 190), 190.0);
  EXPECT_DOUBLE_EQ(stranded_one(big, 1000), 190.0);
  // With 100-milli pods in the target: fill(190) = 100 + fill(90) = 100, 90 stranded.
  const ExpectedFill small({gpu_class(810, 0.9), gpu_class(100, 0.1)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(small, 190), 90.0);
  // With 160-milli pods: fill(190) = 160, 30 stranded.
  const ExpectedFill s160({gpu_class(810, 0.9), gpu_class(160, 0.1)}, 1, params());
  EXPECT_DOUBLE_EQ(stranded_one(s160, 190), 30.0);
  // With 190-milli pods the gap is filled exactly, whatever their weight.
  const ExpectedFill exact({gpu_class(810, 0.99), gpu_class(190, 0.01)}, 1, params());
  EXPECT_NEAR(stranded_one(exact, 190), 0.0, 1e-9);
}

TEST(ExpectedFill, SeveralTargetsAverageTheirProgrammes) {
  // Targets {810: 1} (stranded 190 at r = 190 and r = 1000) and {810: .9, 100: .1} (90 at 190;
  // 1000 - 910.9 = 89.1 at 1000, as in GapOf190...): the mean, 140 and 139.55.
  const std::vector<std::vector<ShapeClass>> targets{{gpu_class(810, 1.0)},
                                                     {gpu_class(810, 0.9), gpu_class(100, 0.1)}};
  const ExpectedFill mixed(targets, 1, params());
  EXPECT_NEAR(stranded_one(mixed, 190), 140.0, 1e-9);
  EXPECT_NEAR(stranded_one(mixed, 1000), 139.55, 1e-9);
  // One target: the same numbers as the one-target programme.
  const ExpectedFill one(std::vector<std::vector<ShapeClass>>{targets[1]}, 1, params());
  const ExpectedFill single(targets[1], 1, params());
  for (const std::int32_t r : {90, 190, 500, 900, 1000}) {
    EXPECT_DOUBLE_EQ(stranded_one(one, r), stranded_one(single, r)) << r;
  }
  // The multi-GPU term weighs a class by its mean weight: a 2-GPU class in one target of two
  // counts .5. A node with one free GPU cannot host it: 1000 x .5 on top of a fill of 1000.
  const ExpectedFill pairs(
      std::vector<std::vector<ShapeClass>>{{gpu_class(1000, 1.0, 0, 2)}, {gpu_class(1000, 1.0)}}, 1,
      params());
  const Gpus one_free{1000, 0};
  EXPECT_DOUBLE_EQ(pairs.stranded(0, kPlenty, kPlenty, one_free), 500.0);
}

TEST(ExpectedFill, ClassesFillOnlyTheModelsTheyAllow) {
  // Two models. 500 milli only on model 1 (mask 0b10); 300 milli anywhere, p = .5 each.
  // Model 0: only 300 fits: fill(1000) = 300 + 300 + 300 + fill(100) = 900, 100 stranded.
  // Model 1: both, as in FirstFittingPodAveragesOverTheFittingClasses: 125 stranded.
  const ExpectedFill f({gpu_class(500, 0.5, 0, 1, 0, 0b10), gpu_class(300, 0.5)}, 2, params());
  const Gpus gpu{1000};
  EXPECT_DOUBLE_EQ(f.stranded(0, kPlenty, kPlenty, gpu), 100.0);
  EXPECT_DOUBLE_EQ(f.stranded(1, kPlenty, kPlenty, gpu), 125.0);
  // A node without GPUs (no model) has nothing to strand.
  EXPECT_DOUBLE_EQ(f.stranded(cluster::kNoModel, kPlenty, kPlenty, Gpus{}), 0.0);
}

TEST(ExpectedFill, NodeThatCannotFeedItsGpusStrandsThem) {
  // Target: 500 milli with 4000 CPU and 1024 MiB, p = 1. A whole GPU takes two pods: fill 1000
  // milli, 8000 CPU, 2048 MiB; two whole GPUs ask for 16000 CPU and 4096 MiB.
  const ExpectedFill f({gpu_class(500, 1.0, 4000, 1, 1024)}, 1, params());
  const Gpus two{1000, 1000};
  EXPECT_DOUBLE_EQ(f.stranded(0, 16000, 4096, two), 0.0);
  // 4000 CPU feeds a quarter of it: 2000 - 2000 x 0.25 = 1500.
  EXPECT_DOUBLE_EQ(f.stranded(0, 4000, 4096, two), 1500.0);
  // 1024 MiB feeds a quarter of it too.
  EXPECT_DOUBLE_EQ(f.stranded(0, 16000, 1024, two), 1500.0);
  // The tighter of the two counts: 8000 CPU (half) and 1024 MiB (a quarter).
  EXPECT_DOUBLE_EQ(f.stranded(0, 8000, 1024, two), 1500.0);
  // No CPU at all: everything idle is stranded.
  EXPECT_DOUBLE_EQ(f.stranded(0, 0, 4096, two), 2000.0);

  // feed_limit off: CPU and memory are ignored, the GPUs count as filled.
  const ExpectedFill off({gpu_class(500, 1.0, 4000, 1, 1024)}, 1, params(0, 1, false));
  EXPECT_DOUBLE_EQ(off.stranded(0, 4000, 4096, two), 0.0);
  EXPECT_DOUBLE_EQ(off.stranded(0, 16000, 1024, two), 0.0);
  EXPECT_DOUBLE_EQ(off.stranded(0, 0, 0, two), 0.0);
}

TEST(ExpectedFill, FeedTailLosesTheLastPodsOfEachGpuFirst) {
  // Target: A = 600 milli with 1000 CPU, B = 400 milli with 3000 CPU and 2048 MiB, p = .5 each.
  //   fill(400) = B alone: 400 milli, 3000 CPU, 2048 MiB;
  //   fill(600) = .5 A (600, 1000 CPU) + .5 B (400 + fill(200) = 400, 3000 CPU, 2048 MiB):
  //               500 milli, 2000 CPU, 1024 MiB;
  //   fill(1000) = .5 A (600 + fill(400): 1000 milli, 4000 CPU, 2048 MiB)
  //              + .5 B (400 + fill(600): 900 milli, 5000 CPU, 3072 MiB):
  //              950 milli, 4500 CPU, 2560 MiB, of which the first pods 500 milli, 2000 CPU and
  //              1024 MiB.
  const std::vector<ShapeClass> target{gpu_class(600, 0.5, 1000),
                                       gpu_class(400, 0.5, 3000, 1, 2048)};
  const ExpectedFill tail(target, 1, ExpectedFillParams{0, 1, true, true});
  const Gpus one{1000};
  EXPECT_DOUBLE_EQ(tail.stranded(0, 4500, kPlenty, one), 50.0);
  // 3250 CPU feeds the first pods and half of the rest: 1000 - (500 + 450 x .5) = 275.
  EXPECT_DOUBLE_EQ(tail.stranded(0, 3250, kPlenty, one), 275.0);
  // 1000 CPU feeds half of the first pods: 1000 - 250 = 750.
  EXPECT_DOUBLE_EQ(tail.stranded(0, 1000, kPlenty, one), 750.0);
  // 1792 MiB feeds the first pods and half of the rest too.
  EXPECT_DOUBLE_EQ(tail.stranded(0, kPlenty, 1792, one), 275.0);
  // Scaled as a whole instead (feed_tail off): 2250 CPU is half the fill, 1000 - 475 = 525;
  // with the tail last it is 1000 - (500 + 450 x .1) = 455.
  const ExpectedFill whole(target, 1, params());
  EXPECT_DOUBLE_EQ(whole.stranded(0, 2250, kPlenty, one), 525.0);
  EXPECT_DOUBLE_EQ(tail.stranded(0, 2250, kPlenty, one), 455.0);
}

TEST(ExpectedFill, MultiGpuPodsShareTheirCpuOverTheirGpus) {
  // Target: 2 whole GPUs with 8000 CPU, p = 1: each GPU's fill brings 8000 / 2 = 4000 CPU, so
  // two free GPUs need 8000 CPU. 4000 CPU feeds half: the DP part strands 1000. The multi-GPU
  // term is off here (weight 0) to isolate the feeding limit.
  const ExpectedFill f({gpu_class(1000, 1.0, 8000, 2)}, 1, params(0, 0));
  const Gpus two{1000, 1000};
  EXPECT_DOUBLE_EQ(f.stranded(0, 8000, kPlenty, two), 0.0);
  EXPECT_DOUBLE_EQ(f.stranded(0, 4000, kPlenty, two), 1000.0);
}

TEST(ExpectedFill, CpuOnlyPodsCompeteForTheFreeCpu) {
  // Target: a GPU class (500 milli, 4000 CPU) and a CPU-only class (4000 CPU), p = .5 each. CPU-
  // only classes take no part in the GPU programme: one whole GPU's fill is 1000 milli with
  // 8000 CPU. With competition c, the CPU the GPU pods may use is
  //   cpu_free x (1 - c x cpu_only / (cpu_only + gpu_pods)) = cpu_free x (1 - c x 2000 / 4000).
  const std::vector<ShapeClass> classes{gpu_class(500, 0.5, 4000), cpu_class(4000, 0.5)};
  const Gpus one{1000};
  const ExpectedFill none(classes, 1, params(0));
  EXPECT_DOUBLE_EQ(none.stranded(0, 8000, kPlenty, one), 0.0);
  // c = .5: 8000 x .75 = 6000 of the 8000 needed: 1000 - 750 = 250.
  const ExpectedFill half(classes, 1, params(0.5));
  EXPECT_DOUBLE_EQ(half.stranded(0, 8000, kPlenty, one), 250.0);
  // c = 1: 8000 x .5 = 4000: 500 stranded.
  const ExpectedFill full(classes, 1, params(1.0));
  EXPECT_DOUBLE_EQ(full.stranded(0, 8000, kPlenty, one), 500.0);
  // CPU-only pods compete only where they fit: with 2000 CPU free (< 4000) there is no
  // competition, 2000 / 8000 feeds a quarter: 750 stranded with or without it.
  EXPECT_DOUBLE_EQ(none.stranded(0, 2000, kPlenty, one), 750.0);
  EXPECT_DOUBLE_EQ(full.stranded(0, 2000, kPlenty, one), 750.0);
  // Competition is part of the feeding limit: without the limit it has no effect.
  const ExpectedFill unfed(classes, 1, params(1.0, 1, false));
  EXPECT_DOUBLE_EQ(unfed.stranded(0, 8000, kPlenty, one), 0.0);
}

TEST(ExpectedFill, NodeThatCannotHostAMultiGpuClassStrandsItsIdleGpuForIt) {
  // Target: 2 whole GPUs (p = .5) and 500 milli (p = .5), no CPU. The programme fills every
  // GPU: fill(1000) = .5 x 1000 + .5 (500 + fill(500)) = 1000, fill(500) = 500.
  const std::vector<ShapeClass> classes{gpu_class(1000, 0.5, 0, 2), gpu_class(500, 0.5)};
  const ExpectedFill w1(classes, 1, params(0, 1.0));
  const ExpectedFill w_half(classes, 1, params(0, 0.5));
  const ExpectedFill w0(classes, 1, params(0, 0));
  // Two whole GPUs free: the 2-GPU class fits, nothing is stranded.
  const Gpus hosts{1000, 1000, 500, 500};
  EXPECT_DOUBLE_EQ(w1.stranded(0, kPlenty, kPlenty, hosts), 0.0);
  // One whole GPU free: the node cannot host it, its 2500 idle milli count for it with weight
  // multi_gpu_weight x p: 1 x .5 x 2500 = 1250; .5 x .5 x 2500 = 625; 0 with the term off.
  const Gpus cannot{1000, 500, 500, 500};
  EXPECT_DOUBLE_EQ(w1.stranded(0, kPlenty, kPlenty, cannot), 1250.0);
  EXPECT_DOUBLE_EQ(w_half.stranded(0, kPlenty, kPlenty, cannot), 625.0);
  EXPECT_DOUBLE_EQ(w0.stranded(0, kPlenty, kPlenty, cannot), 0.0);
  // A node with fewer GPUs than the class asks for is not charged for it (it never could host
  // it, whatever is placed there): fill(500) = 500, nothing stranded.
  const Gpus single{500};
  EXPECT_DOUBLE_EQ(w1.stranded(0, kPlenty, kPlenty, single), 0.0);
}

TEST(ExpectedFill, MultiGpuTermCountsTheCpuTheClassNeeds) {
  // Target: 2 whole GPUs with 8000 CPU, p = 1; feeding limit off to isolate the term. Two whole
  // GPUs free but 4000 CPU: the class does not fit, 1 x 1 x 2000 idle milli stranded for it.
  const ExpectedFill f({gpu_class(1000, 1.0, 8000, 2)}, 1, params(0, 1.0, false));
  const Gpus two{1000, 1000};
  EXPECT_DOUBLE_EQ(f.stranded(0, 8000, kPlenty, two), 0.0);
  EXPECT_DOUBLE_EQ(f.stranded(0, 4000, kPlenty, two), 2000.0);
  // Model-constrained: a 2-GPU class for model 1 only (p = .5) beside 500 milli anywhere
  // (p = .5). Both models' programmes fill a whole GPU (model 0: 500 + 500; model 1: .5 x 1000
  // + .5 x 1000); only model 1 is charged for the 2-GPU class: .5 x 1000 idle milli.
  const ExpectedFill other({gpu_class(1000, 0.5, 0, 2, 0, 0b10), gpu_class(500, 0.5)}, 2,
                           params(0, 1.0));
  const Gpus one_free{1000, 0};
  EXPECT_DOUBLE_EQ(other.stranded(0, kPlenty, kPlenty, one_free), 0.0);
  EXPECT_DOUBLE_EQ(other.stranded(1, kPlenty, kPlenty, one_free), 500.0);
}

TEST(ExpectedFill, ResolveClassesAgainstTheCluster) {
  const cluster::Cluster c(
      {test::gpu_node("a", 64000, 2, "A"), test::gpu_node("b", 64000, 2, "B")});
  workload::TargetWorkload t;
  t.classes.push_back({4000, 500, 1, {"B"}, 3, 1024, 0.75});
  t.classes.push_back({2000, 0, 0, {}, 1, 512, 0.25});
  const std::vector<ShapeClass> classes = resolve_classes(t, c);
  ASSERT_EQ(classes.size(), 2U);
  EXPECT_EQ(classes[0].cpu_milli, 4000);
  EXPECT_EQ(classes[0].gpu_milli, 500);
  EXPECT_EQ(classes[0].gpu_count, 1);
  EXPECT_EQ(classes[0].model_mask, 0b10U);  // "B" is the cluster's second model
  EXPECT_DOUBLE_EQ(classes[0].memory_mib, 1024);
  EXPECT_DOUBLE_EQ(classes[0].weight, 0.75);
  EXPECT_EQ(classes[1].gpu_milli, 0);
  EXPECT_EQ(classes[1].gpu_count, 0);
  EXPECT_EQ(classes[1].model_mask, 0U);
  EXPECT_DOUBLE_EQ(classes[1].weight, 0.25);
}

}  // namespace
}  // namespace gpuorch::sched
