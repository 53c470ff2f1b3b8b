// sim scale's synthetic cluster: any size, a plausible fleet mix, fixed by its seed.
#include "gpuorch/sim/synthetic_cluster.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gpuorch/sim/scale.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

TEST(SyntheticCluster, EightGpuNodesDominateWithSeveralModels) {
  const auto nodes = synthetic_cluster(10000, 42);
  ASSERT_EQ(nodes.size(), 10000U);
  std::map<int, int> nodes_by_gpus;
  std::set<std::string> models;
  std::set<std::string> names;
  std::int64_t gpus = 0;
  for (const auto& n : nodes) {
    ++nodes_by_gpus[n.gpu_count];
    models.insert(n.gpu_model);
    names.insert(n.name);
    gpus += n.gpu_count;
    EXPECT_GT(n.gpu_count, 0);
    EXPECT_GE(n.cpu_milli, 32000);
    EXPECT_GE(n.memory_mib, 8 * 1024 * n.gpu_count);  // at least 8 GiB of host memory per GPU
  }
  EXPECT_EQ(names.size(), nodes.size());
  EXPECT_GE(models.size(), 5U);
  EXPECT_GT(nodes_by_gpus[8], 8800);  // 92 % expected
  EXPECT_GT(nodes_by_gpus[4], 0);
  EXPECT_GT(nodes_by_gpus[2], 0);
  EXPECT_GT(nodes_by_gpus[1], 0);
  EXPECT_NEAR(static_cast<double>(gpus) / 10000.0, 7.585, 0.05);  // about 76,000 GPUs
}

TEST(SyntheticCluster, SameSeedSameNodesOtherSeedOtherMix) {
  const auto a = synthetic_cluster(500, 7);
  const auto b = synthetic_cluster(500, 7);
  const auto c = synthetic_cluster(500, 8);
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].gpu_model, b[i].gpu_model);
    EXPECT_EQ(a[i].cpu_milli, b[i].cpu_milli);
    differs = differs || a[i].gpu_model != c[i].gpu_model;
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(synthetic_cluster(1, 7).size(), 1U);
}

TEST(RunScale, PlacesEveryPodOnceAndIsDeterministic) {
  ScaleOptions o;
  o.nodes = 120;
  o.pods = 1200;
  o.policy = "fgd";
  o.seed = 3;
  const ScaleResult a = run_scale(o);
  const ScaleResult b = run_scale(o);
  EXPECT_EQ(a.placed + a.failed, 1200U);
  EXPECT_GT(a.placed, 600U);
  EXPECT_EQ(a.placement_digest, b.placement_digest);
  EXPECT_GT(a.gpu_alloc_pct, 50);
  EXPECT_LE(a.p50_decision_us, a.p99_decision_us);
  EXPECT_LE(a.p99_decision_us, a.max_decision_us);
  o.full_scan = true;
  EXPECT_EQ(run_scale(o).placement_digest, a.placement_digest);
}

TEST(RunScale, RejectsBadArguments) {
  ScaleOptions o;
  o.nodes = 0;
  o.pods = 10;
  o.policy = "fgd";
  EXPECT_EQ(test::input_error([&] { run_scale(o); }), "--nodes must be between 1 and 1000000");
  o.nodes = 10;
  o.pods = kMaxScalePods + 1;
  EXPECT_EQ(test::input_error([&] { run_scale(o); }), "--pods must be between 1 and 5000000");
  o.pods = 10;
  o.policy = "nope";
  EXPECT_NE(test::input_error([&] { run_scale(o); }).find("unknown policy 'nope'"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuorch::sim
