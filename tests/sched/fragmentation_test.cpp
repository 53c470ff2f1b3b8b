#include "gpuorch/sched/fragmentation.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/policy.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using workload::TargetWorkload;
using workload::TaskClass;

TaskClass task(std::int64_t cpu, std::int64_t milli, int gpus, double weight,
               std::vector<std::string> models = {}) {
  TaskClass c;
  c.cpu_milli = cpu;
  c.gpu_milli = milli;
  c.gpu_count = gpus;
  c.weight = weight;
  c.allowed_models = std::move(models);
  return c;
}

// The 35 typical pod classes of the study's own fragmentation test (pkg/utils/frag_test.go,
// TestingGenerateGetTypicalPods): cpu milli, per-GPU milli, GPU count, GPU type, percentage.
// Transcribed as data; the percentages sum to 95.06, as in the study's test.
TargetWorkload study_test_classes() {
  struct Row {
    std::int64_t cpu, milli;
    int gpus;
    const char* type;
    double percent;
  };
  const Row rows[] = {
      {6000, 465, 1, "", 9.33},          {8000, 440, 1, "2080", 9.15},
      {8000, 475, 1, "T4", 8.76},        {8000, 440, 1, "P100", 8.72},
      {2000, 465, 1, "", 8.68},          {12000, 900, 1, "", 8.65},
      {4000, 900, 1, "", 8.43},          {16000, 678, 1, "T4", 8.36},
      {8000, 500, 1, "", 8.29},          {6000, 511, 1, "", 8.11},
      {14000, 1000, 2, "2080", 0.54},    {4000, 1000, 1, "2080", 0.43},
      {32000, 1000, 2, "T4", 0.43},      {16000, 1000, 1, "V100M16", 0.40},
      {64000, 1000, 2, "", 0.40},        {10000, 1000, 2, "", 0.40},
      {11400, 1000, 1, "T4", 0.36},      {16000, 1000, 1, "T4", 0.36},
      {4000, 1000, 2, "", 0.36},         {14000, 1000, 2, "V100M16", 0.36},
      {8000, 1000, 4, "", 0.36},         {16000, 1000, 2, "", 0.32},
      {2000, 1000, 1, "T4", 0.32},       {6000, 1000, 1, "", 0.32},
      {4000, 1000, 1, "", 0.32},         {5000, 1000, 1, "", 0.32},
      {32000, 1000, 4, "V100M16", 0.32}, {32000, 1000, 2, "", 0.32},
      {24000, 1000, 8, "2080", 0.32},    {40000, 1000, 4, "", 0.29},
      {32000, 1000, 8, "", 0.29},        {32000, 1000, 1, "T4", 0.29},
      {16000, 1000, 1, "", 0.25},        {7000, 1000, 1, "V100M16", 0.25},
      {24000, 1000, 1, "T4", 0.25},
  };
  TargetWorkload t;
  for (const Row& r : rows) {
    std::vector<std::string> models;
    if (r.type[0] != '\0') models.emplace_back(r.type);
    t.classes.push_back(task(r.cpu, r.milli, r.gpus, r.percent / 100, models));
  }
  return t;
}

// TestingGenerateGetTypicalPodsWithNonGpu: 31 classes (three CPU-only); percentages sum to 100.
TargetWorkload study_test_classes_with_non_gpu() {
  struct Row {
    std::int64_t cpu, milli;
    int gpus;
    double percent;
  };
  const Row rows[] = {
      {15700, 1000, 1, 28.69}, {11900, 1000, 1, 18.93}, {11400, 1000, 1, 12.27},
      {1000, 0, 0, 7.36},      {18710, 1000, 1, 4.85},  {8200, 1000, 1, 3.79},
      {16400, 1000, 1, 3.31},  {9810, 1000, 1, 1.97},   {15200, 1000, 1, 1.87},
      {11200, 1000, 1, 1.81},  {14200, 1000, 1, 1.76},  {12000, 0, 0, 1.65},
      {14900, 1000, 1, 1.39},  {60200, 1000, 4, 1.23},  {64200, 1000, 8, 1.07},
      {32200, 1000, 4, 1.01},  {17400, 1000, 2, 0.91},  {30200, 1000, 2, 0.69},
      {16000, 1000, 1, 0.64},  {15000, 1000, 1, 0.59},  {64000, 1000, 8, 0.53},
      {15000, 0, 0, 0.53},     {11910, 1000, 1, 0.53},  {120200, 1000, 8, 0.48},
      {11300, 1000, 1, 0.37},  {30000, 1000, 2, 0.32},  {9800, 1000, 1, 0.32},
      {8000, 1000, 1, 0.32},   {2000, 1000, 1, 0.27},   {2000, 80, 1, 0.27},
      {1000, 1000, 1, 0.27},
  };
  TargetWorkload t;
  for (const Row& r : rows) t.classes.push_back(task(r.cpu, r.milli, r.gpus, r.percent / 100));
  return t;
}

// A cluster that knows every model the study's test classes name, plus the test nodes' "1080".
cluster::Cluster study_models_cluster() {
  return cluster::Cluster({gpu_node("n1080", 64000, 4, "1080"), gpu_node("n2080", 64000, 4, "2080"),
                           gpu_node("nt4", 64000, 4, "T4"), gpu_node("np100", 64000, 8, "P100"),
                           gpu_node("nv100", 64000, 4, "V100M16")});
}

TEST(FragmentationMeasure, StudyCheckValues) {
  const cluster::Cluster c = study_models_cluster();
  const FragmentationMeasure m(study_test_classes(), c);
  const cluster::ModelId gtx1080 = *c.find_model("1080");
  const std::vector<std::int32_t> used{200, 1000, 1000, 500};
  const std::vector<std::int32_t> four(4, 1000);
  const std::vector<std::int32_t> eight(8, 1000);
  EXPECT_NEAR(m.node_amount(gtx1080, 1000, used), 2566.62, 0.01);
  EXPECT_NEAR(m.node_amount(gtx1080, 1000, four), 3802.40, 0.01);
  EXPECT_NEAR(m.node_amount(gtx1080, 1000, eight), 7604.80, 0.01);

  TargetWorkload one;
  one.classes.push_back(task(6000, 465, 1, 0.0933));
  const FragmentationMeasure single(one, c);
  EXPECT_NEAR(single.node_amount(gtx1080, 1000, used), 251.91, 0.01);
}

TEST(FragmentationMeasure, StudyCheckValuesWithNonGpuPods) {
  const cluster::Cluster c = study_models_cluster();
  const FragmentationMeasure m(study_test_classes_with_non_gpu(), c);
  const cluster::ModelId p100 = *c.find_model("P100");
  const std::vector<std::int32_t> empty(8, 1000);
  const std::vector<std::int32_t> halved{1000, 1000, 1000, 1000, 0, 0, 0, 0};
  EXPECT_NEAR(m.node_amount(p100, 64000, empty), 887.20, 0.01);
  EXPECT_NEAR(m.node_amount(p100, 32000, halved), 554.4, 0.01);
  EXPECT_NEAR(m.node_amount(p100, 0, halved), 4000, 0.01);
}

TEST(FragmentationMeasure, SingleClassChecksOfTheStudy) {
  // TestGetGpuFragMilliByNodeResAndPodRes: one class, weight 1.
  const cluster::Cluster c = study_models_cluster();
  const cluster::ModelId gtx1080 = *c.find_model("1080");
  const std::vector<std::int32_t> used{200, 1000, 1000, 500};
  TargetWorkload two_whole;
  two_whole.classes.push_back(task(100, 1000, 2, 1.0, {"1080"}));
  const FragmentationMeasure whole(two_whole, c);
  EXPECT_DOUBLE_EQ(whole.node_amount(gtx1080, 1000, used), 700);
  EXPECT_DOUBLE_EQ(whole.node_amount(gtx1080, 1000, std::vector<std::int32_t>(4, 1000)), 0);
  EXPECT_DOUBLE_EQ(whole.node_amount(gtx1080, 1000, std::vector<std::int32_t>(8, 1000)), 0);
  TargetWorkload two_small;
  two_small.classes.push_back(task(100, 200, 2, 1.0, {"1080"}));
  EXPECT_DOUBLE_EQ(FragmentationMeasure(two_small, c).node_amount(gtx1080, 1000, used), 0);
}

TEST(FragmentationMeasure, EachCaseOfTheRule) {
  const cluster::Cluster c({gpu_node("g", 8000, 4, "G2"), gpu_node("t", 8000, 4, "T4")});
  TargetWorkload t;
  t.classes.push_back(task(1000, 0, 0, 0.2));             // CPU-only: every idle milli
  t.classes.push_back(task(2000, 500, 1, 0.5));           // any model
  t.classes.push_back(task(2000, 1000, 1, 0.3, {"T4"}));  // T4 only
  const FragmentationMeasure m(t, c);
  const std::vector<std::int32_t> left{1000, 300, 600, 0};  // idle 1900
  const cluster::ModelId g2 = *c.find_model("G2");
  const cluster::ModelId t4 = *c.find_model("T4");
  // G2, CPU fits: 0.2*1900 + 0.5*(300+0) + 0.3*1900 (no access).
  EXPECT_NEAR(m.node_amount(g2, 4000, left), 380 + 150 + 570, 1e-9);
  // G2, CPU short for the GPU classes: everything idle counts for them too.
  EXPECT_NEAR(m.node_amount(g2, 1000, left), 1900, 1e-9);
  // T4: the whole-GPU class fits on GPU 0 and sees 300+600+0 as too small.
  EXPECT_NEAR(m.node_amount(t4, 4000, left), 380 + 150 + 270, 1e-9);
  // Not enough GPUs with the class's milli: all idle milli.
  const std::vector<std::int32_t> small{400, 300, 0, 0};  // idle 700, nothing >= 500
  EXPECT_NEAR(m.node_amount(t4, 4000, small), 700, 1e-9);
  // A node with nothing idle has no fragment.
  EXPECT_DOUBLE_EQ(m.node_amount(t4, 4000, std::vector<std::int32_t>(4, 0)), 0);
  // The cluster overload reads the node's state.
  EXPECT_DOUBLE_EQ(m.node_amount(c, 0),
                   m.node_amount(g2, 8000, std::vector<std::int32_t>(4, 1000)));
  EXPECT_NEAR(m.node_amount(c, 0), 0.2 * 4000 + 0.3 * 4000, 1e-9);
}

TEST(FragmentationMeasure, ClassNamingOnlyUnknownModelsHasNoAccessAnywhere) {
  const cluster::Cluster c({gpu_node("g", 8000, 2, "G2")});
  TargetWorkload t;
  t.classes.push_back(task(1000, 500, 1, 1.0, {"H100"}));
  const FragmentationMeasure m(t, c);
  EXPECT_DOUBLE_EQ(m.node_amount(c, 0), 2000);
}

// Random placements and releases: the incrementally kept totals equal a full recomputation.
TEST(FragmentationTracker, IncrementalEqualsFullRecomputation) {
  std::vector<cluster::NodeSpec> nodes;
  const char* models[] = {"G2", "T4", "P100", "V100M16"};
  const int gpus[] = {8, 2, 4, 1};
  for (int i = 0; i < 24; ++i) {
    nodes.push_back(
        gpu_node(fmt::format("n{:02}", i), 16000 + 8000 * (i % 5), gpus[i % 4], models[i % 4]));
  }
  cluster::Cluster c(nodes);
  TargetWorkload t;
  t.classes.push_back(task(4000, 0, 0, 0.1));
  t.classes.push_back(task(3152, 810, 1, 0.3));
  t.classes.push_back(task(11300, 1000, 1, 0.25));
  t.classes.push_back(task(8000, 470, 1, 0.15, {"T4", "P100"}));
  t.classes.push_back(task(30000, 1000, 4, 0.2));
  const FragmentationMeasure m(t, c);
  FragmentationTracker tracker(m, c);
  auto full = [&] {
    double sum = 0;
    for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) sum += m.node_amount(c, n);
    return sum;
  };
  EXPECT_NEAR(tracker.cluster_amount(), full(), 1e-6);

  const std::vector<workload::PodSpec> shapes{
      test::pod("a", 3152, 1, 810),   test::pod("b", 2000, 1, 250), test::pod("c", 8000, 1, 1000),
      test::pod("d", 12000, 2, 1000), test::pod("e", 4000, 0, 0),   test::pod("f", 1000, 1, 470)};
  RequestResolver resolver(c);
  base::Rng rng(2024);
  std::vector<cluster::Placement> live;
  int placed = 0;
  for (int step = 0; step < 600; ++step) {
    if (!live.empty() && rng.below(3) == 0) {
      const auto k = rng.below(live.size());
      c.release(live[k]);
      tracker.refresh(c, live[k].node);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const PodRequest r = resolver.resolve(shapes[rng.below(shapes.size())]);
      const auto n = static_cast<cluster::NodeIndex>(rng.below(c.node_count()));
      if (check_node(c, n, r) != kFits) continue;
      cluster::Placement p = test::placement(n, r.cpu_milli, r.gpu_milli, {});
      if (r.gpu_share()) {
        p.gpus = {best_fit_gpu(c.gpu_milli_left(n), r.gpu_milli)};
      } else if (!r.cpu_only()) {
        p.gpus = lowest_free_gpus(c.gpu_milli_left(n), r.gpu_count);
      }
      c.apply(p);
      tracker.refresh(c, n);
      live.push_back(p);
      ++placed;
    }
    ASSERT_NEAR(tracker.cluster_amount(), full(), 1e-6) << "after step " << step;
  }
  EXPECT_GT(placed, 100);
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
    EXPECT_NEAR(tracker.node_amount(n), m.node_amount(c, n), 1e-9);
  }
  // Refreshing an unchanged node changes nothing.
  const double before = tracker.cluster_amount();
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) tracker.refresh(c, n);
  EXPECT_DOUBLE_EQ(tracker.cluster_amount(), before);
}

}  // namespace
}  // namespace gpuorch::sched
