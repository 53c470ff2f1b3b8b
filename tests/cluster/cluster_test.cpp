#include "gpuorch/cluster/cluster.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::cluster {
namespace {

using test::gpu_left;
using test::gpu_node;
using test::placement;
using ::testing::ElementsAre;

Cluster three_nodes() {
  return Cluster({gpu_node("a", 64000, 4, "T4", 1000), gpu_node("b", 32000, 0),
                  gpu_node("c", 96000, 8, "G2", 4000)});
}

TEST(Cluster, StartsEmptyWithModelsInOrderOfFirstAppearance) {
  const Cluster c = three_nodes();
  EXPECT_EQ(c.node_count(), 3U);
  EXPECT_THAT(c.models(), ElementsAre("T4", "G2"));
  EXPECT_EQ(c.model(0), 0);
  EXPECT_EQ(c.model(1), kNoModel);
  EXPECT_EQ(c.model(2), 1);
  EXPECT_EQ(c.find_model("G2"), std::optional<ModelId>(1));
  EXPECT_EQ(c.find_model("A100"), std::nullopt);
  EXPECT_EQ(c.gpu_total(), 12);
  EXPECT_EQ(c.gpu_milli_capacity(), 12000);
  EXPECT_EQ(c.gpu_milli_used(), 0);
  EXPECT_EQ(c.cpu_free(2), 96000);
  EXPECT_EQ(c.memory_free(0), 1000);
  EXPECT_EQ(c.gpu_count(1), 0);
  EXPECT_TRUE(c.gpu_milli_left(1).empty());
  EXPECT_THAT(gpu_left(c, 0), ElementsAre(1000, 1000, 1000, 1000));
  EXPECT_EQ(c.fully_free_gpus(2), 8);
  EXPECT_EQ(c.fully_free_gpus_total(), 12);
  EXPECT_EQ(c.max_gpu_milli_left(2), 1000);
  EXPECT_EQ(c.gpu_milli_left_total(2), 8000);
  EXPECT_EQ(c.max_gpu_milli_left(1), 0);
  EXPECT_TRUE(c.gpu_pod_kinds(0).empty());
  EXPECT_EQ(c.spec(2).name, "c");
}

TEST(Cluster, ApplyUpdatesEverySummaryAndTheVersion) {
  Cluster c = three_nodes();
  const auto v0 = c.version(0);
  const auto v2 = c.version(2);
  c.apply(placement(0, 8000, 300, {2}, 100));
  EXPECT_EQ(c.cpu_free(0), 56000);
  EXPECT_EQ(c.memory_free(0), 900);
  EXPECT_THAT(gpu_left(c, 0), ElementsAre(1000, 1000, 700, 1000));
  EXPECT_EQ(c.fully_free_gpus(0), 3);
  EXPECT_EQ(c.fully_free_gpus_total(), 11);
  EXPECT_EQ(c.max_gpu_milli_left(0), 1000);
  EXPECT_EQ(c.gpu_milli_left_total(0), 3700);
  EXPECT_EQ(c.gpu_milli_used(), 300);
  EXPECT_NE(c.version(0), v0);
  EXPECT_EQ(c.version(2), v2);  // untouched node keeps its version
  ASSERT_EQ(c.gpu_pod_kinds(0).size(), 1U);
  EXPECT_EQ(c.gpu_pod_kinds(0)[0].kind, 0);
  EXPECT_EQ(c.gpu_pod_kinds(0)[0].count, 1);

  c.apply(placement(0, 1000, 1000, {0, 1, 3}));
  EXPECT_THAT(gpu_left(c, 0), ElementsAre(0, 0, 700, 0));
  EXPECT_EQ(c.fully_free_gpus(0), 0);
  EXPECT_EQ(c.fully_free_gpus_total(), 8);
  EXPECT_EQ(c.max_gpu_milli_left(0), 700);
  EXPECT_EQ(c.gpu_milli_used(), 3300);
  ASSERT_EQ(c.gpu_pod_kinds(0).size(), 2U);
  EXPECT_EQ(c.gpu_pod_kinds(0)[1].kind, 3);
}

TEST(Cluster, CpuOnlyPlacementDoesNotCountAsAGpuPodKind) {
  Cluster c = three_nodes();
  c.apply(placement(1, 4000, 0, {}, 0));
  EXPECT_EQ(c.cpu_free(1), 28000);
  EXPECT_TRUE(c.gpu_pod_kinds(1).empty());
  c.apply(placement(2, 4000, 0, {}, 0));
  EXPECT_TRUE(c.gpu_pod_kinds(2).empty());
  EXPECT_EQ(c.gpu_milli_used(), 0);
  EXPECT_EQ(c.fully_free_gpus_total(), 12);  // CPU-only placements take no GPU
}

TEST(Cluster, ApplyThenReleaseRestoresTheState) {
  Cluster c = three_nodes();
  const std::vector<Placement> ps{placement(2, 16000, 250, {5}, 512),
                                  placement(2, 2000, 1000, {0, 1}, 1024),
                                  placement(2, 1000, 500, {5}, 8), placement(0, 500, 0, {}, 1),
                                  placement(0, 3000, 1000, {3}, 2)};
  for (const auto& p : ps) c.apply(p);
  EXPECT_THAT(gpu_left(c, 2), ElementsAre(0, 0, 1000, 1000, 1000, 250, 1000, 1000));
  EXPECT_EQ(c.gpu_milli_used(), 3750);
  EXPECT_EQ(c.gpu_pod_kinds(2).size(), 2U);  // share x2, 2-gpu x1
  // Release in a different order than applied.
  const auto before = c.version(2);
  c.release(ps[1]);
  c.release(ps[4]);
  c.release(ps[0]);
  c.release(ps[3]);
  c.release(ps[2]);
  EXPECT_GT(c.version(2), before);
  const Cluster fresh = three_nodes();
  for (NodeIndex n = 0; n < 3; ++n) {
    SCOPED_TRACE(fmt::format("node {}", n));
    EXPECT_EQ(c.cpu_free(n), fresh.cpu_free(n));
    EXPECT_EQ(c.memory_free(n), fresh.memory_free(n));
    EXPECT_EQ(gpu_left(c, n), gpu_left(fresh, n));
    EXPECT_EQ(c.fully_free_gpus(n), fresh.fully_free_gpus(n));
    EXPECT_EQ(c.max_gpu_milli_left(n), fresh.max_gpu_milli_left(n));
    EXPECT_EQ(c.gpu_milli_left_total(n), fresh.gpu_milli_left_total(n));
    EXPECT_TRUE(c.gpu_pod_kinds(n).empty());
  }
  EXPECT_EQ(c.gpu_milli_used(), 0);
  EXPECT_EQ(c.fully_free_gpus_total(), fresh.fully_free_gpus_total());
}

TEST(Cluster, MoreThan64ModelsIsAnInputError) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 65; ++i)
    nodes.push_back(gpu_node(fmt::format("n{}", i), 1000, 1, fmt::format("M{}", i)));
  EXPECT_EQ(test::input_error([&] { Cluster c(nodes); }), "cluster has more than 64 GPU models");
  nodes.pop_back();
  EXPECT_EQ(Cluster(nodes).models().size(), 64U);
}

TEST(GpuPodKind, SharedIsZeroWholeIsTheCount) {
  EXPECT_EQ(gpu_pod_kind(500, 1), 0);
  EXPECT_EQ(gpu_pod_kind(999, 1), 0);
  EXPECT_EQ(gpu_pod_kind(1000, 1), 1);
  EXPECT_EQ(gpu_pod_kind(1000, 2), 2);
  EXPECT_EQ(gpu_pod_kind(1000, 8), 8);
}

}  // namespace
}  // namespace gpuorch::cluster
