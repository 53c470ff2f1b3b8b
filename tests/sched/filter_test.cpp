#include "gpuorch/sched/filter.hpp"

#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using test::placement;

class FilterTest : public ::testing::Test {
 protected:
  // 0: 4 x T4, 16 cores, 64 GiB; 1: CPU-only; 2: 2 x G2, 8 cores, 1 GiB.
  cluster::Cluster c{{gpu_node("t4", 16000, 4, "T4", 65536), gpu_node("cpu", 64000, 0),
                      gpu_node("g2", 8000, 2, "G2", 1024)}};
  RequestResolver resolver{c};
  PodRequest req(std::int64_t cpu, int gpus, std::int64_t milli, std::int64_t mem = 0,
                 std::vector<std::string> models = {}) {
    return resolver.resolve(test::pod("p", cpu, gpus, milli, mem, std::move(models)));
  }
};

TEST_F(FilterTest, FitsOnAnEmptyMatchingNode) {
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 500)), kFits);
  EXPECT_EQ(check_node(c, 0, req(16000, 4, 1000, 65536)), kFits);
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 1000, 0, {"T4"})), kFits);
}

TEST_F(FilterTest, CpuOnlyPodPassesTheGpuFilterEverywhere) {
  EXPECT_EQ(check_node(c, 1, req(1000, 0, 0)), kFits);
  EXPECT_EQ(check_node(c, 2, req(1000, 0, 0)), kFits);
}

TEST_F(FilterTest, EachReason) {
  EXPECT_EQ(check_node(c, 1, req(1000, 1, 500)), filter_id("no-gpu"));
  EXPECT_EQ(check_node(c, 2, req(1000, 1, 500, 0, {"T4"})), filter_id("gpu-model"));
  EXPECT_EQ(check_node(c, 2, req(1000, 4, 1000)), filter_id("gpu-count"));
  EXPECT_EQ(check_node(c, 0, req(17000, 1, 500)), filter_id("cpu"));
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 500, 65537)), filter_id("memory"));
  c.apply(placement(0, 0, 700, {0, 1, 2, 3}));  // every GPU has 300 left
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 400)), filter_id("gpu-milli"));
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 300)), kFits);
  EXPECT_EQ(check_node(c, 0, req(1000, 1, 1000)), filter_id("gpu-count"));
}

TEST_F(FilterTest, GpuReasonsComeBeforeCpuAndMemory) {
  // Wrong model, too little CPU and memory: the model is reported.
  EXPECT_EQ(check_node(c, 2, req(99000, 1, 500, 99999, {"T4"})), filter_id("gpu-model"));
  // GPU count and CPU both short: GPU count.
  EXPECT_EQ(check_node(c, 2, req(99000, 3, 1000)), filter_id("gpu-count"));
  // CPU and memory short: CPU.
  EXPECT_EQ(check_node(c, 2, req(99000, 1, 1000, 99999)), filter_id("cpu"));
}

TEST_F(FilterTest, EmptyNodeCheckIgnoresCurrentUse) {
  c.apply(placement(0, 16000, 1000, {0, 1, 2, 3}, 65536));
  const PodRequest p = req(8000, 2, 1000, 100);
  EXPECT_EQ(check_node(c, 0, p), filter_id("gpu-count"));
  EXPECT_EQ(check_empty_node(c, 0, p), kFits);
  EXPECT_EQ(check_empty_node(c, 0, req(1000, 8, 1000)), filter_id("gpu-count"));
  EXPECT_EQ(check_empty_node(c, 1, req(1000, 1, 500)), filter_id("no-gpu"));
  EXPECT_EQ(check_empty_node(c, 2, req(1000, 1, 500, 0, {"T4"})), filter_id("gpu-model"));
  EXPECT_EQ(check_empty_node(c, 2, req(9000, 1, 500)), filter_id("cpu"));
  EXPECT_EQ(check_empty_node(c, 2, req(1000, 1, 500, 2048)), filter_id("memory"));
}

TEST_F(FilterTest, ReasonKeysAndPhrases) {
  const PodRequest share = req(3152, 1, 810, 5600);
  const PodRequest whole = req(1000, 2, 1000);
  EXPECT_EQ(filter_name(kFits), "fits");
  EXPECT_EQ(filter_name(filter_id("no-gpu")), "no-gpu");
  EXPECT_EQ(filter_name(filter_id("gpu-model")), "gpu-model");
  EXPECT_EQ(filter_name(filter_id("gpu-count")), "gpu-count");
  EXPECT_EQ(filter_name(filter_id("gpu-milli")), "gpu-milli");
  EXPECT_EQ(filter_name(filter_id("cpu")), "cpu");
  EXPECT_EQ(filter_name(filter_id("memory")), "memory");
  EXPECT_EQ(filter_phrase(filter_id("gpu-milli"), share), "lack a GPU with >= 810 free milli");
  EXPECT_EQ(filter_phrase(filter_id("gpu-count"), whole), "lack 2 free whole GPUs");
  EXPECT_EQ(filter_phrase(filter_id("gpu-count"), req(1000, 1, 1000)), "lack 1 free whole GPU");
  EXPECT_EQ(filter_phrase(filter_id("cpu"), share), "lack 3152 free CPU milli");
  EXPECT_EQ(filter_phrase(filter_id("memory"), share), "lack 5600 MiB free memory");
  EXPECT_EQ(filter_phrase(filter_id("gpu-model"), share), "have the wrong GPU model");
  EXPECT_EQ(filter_phrase(filter_id("no-gpu"), share), "have no GPU");
}

TEST_F(FilterTest, DiagnosisExplainsMostCommonReasonFirst) {
  const PodRequest share = req(3152, 1, 810);
  FilterDiagnosis d;
  for (int i = 0; i < 900; ++i) d.add(filter_id("gpu-milli"));
  for (int i = 0; i < 313; ++i) d.add(filter_id("gpu-model"));
  EXPECT_EQ(d.nodes_checked, 1213U);
  EXPECT_EQ(d.explain(share),
            "1213 nodes: 900 lack a GPU with >= 810 free milli, 313 have the wrong GPU model");
}

TEST_F(FilterTest, DiagnosisTiesKeepFilterOrderAndSkipZeroes) {
  const PodRequest p = req(2000, 1, 500, 64);
  FilterDiagnosis d;
  d.add(filter_id("memory"));
  d.add(filter_id("cpu"));
  d.add(filter_id("no-gpu"));
  d.add(filter_id("cpu"));
  EXPECT_EQ(d.explain(p),
            "4 nodes: 2 lack 2000 free CPU milli, 1 have no GPU, 1 lack 64 MiB free memory");
  EXPECT_EQ(FilterDiagnosis{}.explain(p), "0 nodes");
}

}  // namespace
}  // namespace gpuorch::sched
