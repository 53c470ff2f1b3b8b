#include "gpuorch/report/fill_output.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuorch/sched/filter.hpp"
#include "support/test_support.hpp"

namespace gpuorch::report {
namespace {

using ::testing::HasSubstr;

sim::FillRun run(const std::string& policy, std::uint64_t seed, double alloc130) {
  sim::FillRun r;
  r.policy = policy;
  r.seed = seed;
  r.curves.alloc[0] = 0.25;
  r.curves.alloc[130] = alloc130;
  r.curves.frag_amount[130] = 4.5;
  r.curves.frag_ratio[130] = 99.5;
  r.arrived_pods = 100;
  r.failed_pods = 7;
  r.infeasible_pods = 1;
  r.failed_by_reason[sched::filter_index(sched::filter_id("gpu-milli"))] = 5;
  r.failed_by_reason[sched::filter_index(sched::filter_id("cpu"))] = 2;
  r.gpu_milli_capacity = 6212000;
  r.elapsed_s = 0.5;
  return r;
}

FillMeta meta() {
  FillMeta m;
  m.workload = "openb_pod_list_default";
  m.nodes = "nodes.csv";
  m.pods = "pods.csv";
  m.node_count = 1213;
  m.gpu_count = 6212;
  m.trace_pods = 8152;
  return m;
}

TEST(FillJson, OneObjectWithRunsOf131PointsAndNulls) {
  const auto j = fill_json(meta(), {run("fgd", 42, 95.3), run("random", 42, 87.5)});
  EXPECT_EQ(j["workload"], "openb_pod_list_default");
  EXPECT_EQ(j["nodes"], 1213);
  EXPECT_EQ(j["gpus"], 6212);
  EXPECT_EQ(j["synthetic"], false);
  ASSERT_EQ(j["runs"].size(), 2U);
  const auto& r = j["runs"][0];
  EXPECT_EQ(r["policy"], "fgd");
  EXPECT_EQ(r["seed"], 42);
  ASSERT_EQ(r["alloc"].size(), 131U);
  ASSERT_EQ(r["frag_amount"].size(), 131U);
  ASSERT_EQ(r["frag_ratio"].size(), 131U);
  EXPECT_DOUBLE_EQ(r["alloc"][0].get<double>(), 0.25);
  EXPECT_TRUE(r["alloc"][1].is_null());
  EXPECT_DOUBLE_EQ(r["alloc"][130].get<double>(), 95.3);
  EXPECT_TRUE(r["frag_amount"][0].is_null());
  EXPECT_EQ(r["arrived_pods"], 100);
  EXPECT_EQ(r["failed_pods"], 7);
  EXPECT_EQ(r["failures"], nlohmann::json({{"gpu-milli", 5}, {"cpu", 2}}));
  EXPECT_TRUE(r["elapsed_s"].is_number());
  EXPECT_EQ(j["runs"][1]["policy"], "random");
}

TEST(FillCsv, LongFormatWithEmptyCellsForMissingPoints) {
  const std::string csv = fill_csv({run("fgd", 42, 95.3)});
  const auto lines = test::lines_of(csv);
  ASSERT_EQ(lines.size(), 132U);
  EXPECT_EQ(lines[0], "policy,seed,x,alloc,frag_amount,frag_ratio");
  EXPECT_EQ(lines[1], "fgd,42,0,0.25,,");
  EXPECT_EQ(lines[2], "fgd,42,1,,,");
  EXPECT_EQ(lines[131], "fgd,42,130,95.3,4.5,99.5");
}

TEST(FillTable, MeansPerPolicyAndFailures) {
  FillMeta m = meta();
  m.synthetic = true;
  const std::string table =
      fill_table(m, {run("fgd", 1, 95.0), run("fgd", 2, 96.0), run("best-fit", 1, 93.0)});
  EXPECT_THAT(table, HasSubstr("SYNTHETIC"));
  EXPECT_THAT(table, HasSubstr("1213 nodes, 6212 GPUs, 8152 pods"));
  EXPECT_THAT(table, HasSubstr("95.50"));  // mean of the two fgd seeds at x = 130
  EXPECT_THAT(table, HasSubstr("93.00"));
  EXPECT_THAT(table, HasSubstr("gpu-milli 5, cpu 2"));
  EXPECT_LT(table.find("fgd"), table.find("best-fit"));  // order of first run
}

TEST(FillJson, ARegisteredFilterIsAFailureKeyAndAColumnOfTheTable) {
  const sched::FilterRegistration quota(sched::FilterPlugin{
      .name = "node-quota",
      .filter = [](const cluster::Cluster&, cluster::NodeIndex,
                   const sched::PodRequest&) { return true; },
      .phrase = [](const sched::PodRequest&) -> std::string { return "are over their quota"; },
      .fix = "raise the node's quota",
  });
  sim::FillRun r = run("fgd", 42, 95.3);
  r.failed_by_reason[sched::filter_index(quota.id())] = 3;
  const auto j = fill_json(meta(), {r});
  EXPECT_EQ(j["runs"][0]["failures"],
            nlohmann::json({{"gpu-milli", 5}, {"cpu", 2}, {"node-quota", 3}}));
  EXPECT_THAT(fill_table(meta(), {r}), HasSubstr("gpu-milli 5, cpu 2, node-quota 3"));
}

}  // namespace
}  // namespace gpuorch::report
