#include "gpuorch/sched/pod_request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::pod;
using ::testing::ElementsAre;

class PodRequestTest : public ::testing::Test {
 protected:
  cluster::Cluster c{
      {gpu_node("a", 8000, 1, "T4"), gpu_node("b", 8000, 1, "G2"), gpu_node("c", 8000, 1, "P100")}};
};

TEST_F(PodRequestTest, ModelMaskHasOneBitPerAllowedModel) {
  EXPECT_EQ(model_mask(c, {}), kAnyModel);
  EXPECT_EQ(model_mask(c, {"T4"}), 0b001U);
  EXPECT_EQ(model_mask(c, {"P100", "T4"}), 0b101U);
  std::vector<std::string> unknown;
  EXPECT_EQ(model_mask(c, {"H100", "G2", "H100", "A10"}, &unknown), 0b010U);
  EXPECT_THAT(unknown, ElementsAre("H100", "A10"));
  EXPECT_EQ(model_mask(c, {"H100"}), 0U);  // allows nothing, not everything
}

TEST_F(PodRequestTest, ResolveCopiesResourcesAndInternsShapes) {
  RequestResolver r(c);
  const PodRequest a = r.resolve(pod("a", 3152, 1, 810, 5600, {"G2"}));
  EXPECT_EQ(a.cpu_milli, 3152);
  EXPECT_EQ(a.memory_mib, 5600);
  EXPECT_EQ(a.gpu_count, 1);
  EXPECT_EQ(a.gpu_milli, 810);
  EXPECT_TRUE(a.gpu_share());
  EXPECT_TRUE(a.allows(*c.find_model("G2")));
  EXPECT_FALSE(a.allows(*c.find_model("T4")));
  EXPECT_FALSE(a.allows(cluster::kNoModel));
  // Memory is not part of the shape; cpu, GPU request and model mask are.
  EXPECT_EQ(r.resolve(pod("b", 3152, 1, 810, 1, {"G2"})).shape, a.shape);
  EXPECT_NE(r.resolve(pod("c", 3152, 1, 810, 1)).shape, a.shape);
  EXPECT_NE(r.resolve(pod("d", 3152, 1, 800, 1, {"G2"})).shape, a.shape);
  EXPECT_NE(r.resolve(pod("e", 3000, 1, 810, 1, {"G2"})).shape, a.shape);
  EXPECT_EQ(r.shape_count(), 4U);
}

TEST_F(PodRequestTest, CpuOnlyPodHasNoGpuRequestOrModelConstraint) {
  RequestResolver r(c);
  const PodRequest p = r.resolve(pod("cpu", 4000, 0, 300, 0, {"H100"}));
  EXPECT_TRUE(p.cpu_only());
  EXPECT_FALSE(p.gpu_share());
  EXPECT_EQ(p.gpu_milli, 0);
  EXPECT_EQ(p.model_mask, kAnyModel);
  EXPECT_TRUE(r.unknown_models().empty());
}

TEST_F(PodRequestTest, UnknownModelsAreCollectedOnce) {
  RequestResolver r(c);
  r.resolve(pod("a", 1000, 1, 500, 0, {"H100"}));
  r.resolve(pod("b", 1000, 1, 500, 0, {"H100", "T4"}));
  r.resolve(pod("c", 1000, 2, 1000, 0, {"A100"}));
  EXPECT_THAT(r.unknown_models(), ElementsAre("H100", "A100"));
}

}  // namespace
}  // namespace gpuorch::sched
