// gpuorch sim timeline --queues with quotas per GPU model (spec.resources.gpuModels) on a node
// list of two models: the per-queue results say what each queue held of each model, and each
// queue is held to its quota and limit per model: vc-b, first, borrows the A100s vc-a is
// guaranteed and gives them back (reclaim on the A100s) when vc-a's jobs come. The sized policies
// (lasgo, pollux) the same on a Pollux-format workload of the same shape.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/timeline_support.hpp"
#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {
namespace {

// One object per policy of `policies`.
std::vector<nlohmann::json> run_policies(const std::string& queues, const TempDir& tmp,
                                         const std::string& workload, const std::string& policies,
                                         std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"sim",        "timeline",
                                   "--workload", fixture(workload),
                                   "--nodes",    fixture("timeline/two_models_nodes.csv"),
                                   "--queues",   queues,
                                   "--policy",   policies,
                                   "--json"};
  args.insert(args.end(), more.begin(), more.end());
  const auto r = run_cli(args, tmp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json_lines(r.out);
}

nlohmann::json run_two_models(const std::string& queues, const TempDir& tmp) {
  const auto objects = run_policies(queues, tmp, "timeline/philly_two_models.csv", "fifo");
  if (objects.size() != 1U) {
    ADD_FAILURE() << "one object expected";
    return {};
  }
  return objects.front();
}

int peak(const nlohmann::json& o, const char* queue, const char* model) {
  return o["queues"][queue]["gpu_models"][model]["peak_gpus"].get<int>();
}

// GPU-hours per model add up to the queue's, within `share` of them (they count whole ticks, a
// job's own hours end when it completes: more so where jobs finish at a resize's speed).
void expect_model_hours_add_up(const nlohmann::json& o, double share) {
  for (const char* q : {"vc-a", "vc-b"}) {
    const auto& x = o["queues"][q];
    const double models = x["gpu_models"]["A100"]["gpu_hours"].get<double>() +
                          x["gpu_models"]["H100"]["gpu_hours"].get<double>();
    const double all = x["gpu_hours"].get<double>();
    EXPECT_GE(models, all - 1e-9) << o["policy"] << " " << q;
    EXPECT_LE(models, all * (1 + share)) << o["policy"] << " " << q;
  }
}

TEST(SimTimelineModelQuotasCli, EachQueueIsHeldToItsQuotaAndLimitPerModel) {
  TempDir tmp;
  const auto o = run_two_models(fixture("timeline/model_queues.yaml"), tmp);
  ASSERT_TRUE(o.contains("queues")) << o.dump();
  EXPECT_EQ(o["finished"], 22);
  // vc-a gets exactly its quota of each model, never more (its limits).
  EXPECT_EQ(peak(o, "vc-a", "A100"), 6);
  EXPECT_EQ(peak(o, "vc-a", "H100"), 2);
  // vc-b came first and borrowed the A100s nobody wanted yet, over its quota of 2.
  EXPECT_EQ(peak(o, "vc-b", "H100"), 8);
  EXPECT_EQ(peak(o, "vc-b", "A100"), 4);
  // It gave two A100s back, and two H100s: its jobs there were preempted and ran again.
  int restarted = 0;
  for (const auto& j : o["per_job"]) restarted += j["restarts"].get<int>() > 0 ? 1 : 0;
  EXPECT_EQ(restarted, 4);
  expect_model_hours_add_up(o, 0.01);
}

// pollux_two_models.csv: vc-b's 12 elastic jobs at t = 0..110 s, vc-a's 10 from 30 minutes on.
TEST(SimTimelineModelQuotasCli, SizedPoliciesHoldEachQueueToItsQuotaAndLimitPerModel) {
  GPUORCH_REQUIRE_POLLUX(dir);
  TempDir tmp;
  const auto objects =
      run_policies(fixture("timeline/model_queues.yaml"), tmp, "timeline/pollux_two_models.csv",
                   "lasgo,pollux", {"--apps", (dir / "apps").string()});
  ASSERT_EQ(objects.size(), 2U);
  for (const auto& o : objects) {
    ASSERT_TRUE(o.contains("queues")) << o.dump();
    EXPECT_EQ(o["finished"], 22) << o["policy"];
    // vc-a gets exactly its quota of each model, never more (its limits).
    EXPECT_EQ(peak(o, "vc-a", "A100"), 6) << o["policy"];
    EXPECT_EQ(peak(o, "vc-a", "H100"), 2) << o["policy"];
    // vc-b came first and borrowed the A100s nobody wanted yet, over its quota of 2; it gave
    // them back, since vc-a got its 6.
    EXPECT_EQ(peak(o, "vc-b", "H100"), 8) << o["policy"];
    EXPECT_EQ(peak(o, "vc-b", "A100"), 8) << o["policy"];
    expect_model_hours_add_up(o, 0.02);
  }
}

TEST(SimTimelineModelQuotasCli, WithoutQuotasPerModelAQueueTakesAnyModel) {
  TempDir tmp;
  // The same queues with their overall GPU quota only.
  const std::string plain = tmp.file("plain.yaml");
  std::ofstream(plain) << "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: vc-a}\n"
                          "spec: {resources: {gpu: {quota: 8}}}\n---\n"
                          "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: vc-b}\n"
                          "spec: {resources: {gpu: {quota: 8}}}\n";
  const auto o = run_two_models(plain, tmp);
  ASSERT_TRUE(o.contains("queues")) << o.dump();
  EXPECT_EQ(o["finished"], 22);
  // vc-b keeps the A100s it took first; vc-a runs on whatever is left, H100s too.
  EXPECT_GT(peak(o, "vc-a", "H100"), 2);
  EXPECT_LT(peak(o, "vc-a", "A100"), 6);
}

TEST(SimTimelineModelQuotasCli, ABadModelQuotaIsOneLineWithExitCode2) {
  TempDir tmp;
  const std::string bad = tmp.file("bad.yaml");
  std::ofstream(bad) << "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: vc-a}\n"
                        "spec:\n  resources:\n    gpuModels:\n    - {model: A100, quota: -2}\n";
  const auto r =
      run_cli({"sim", "timeline", "--workload", fixture("timeline/philly_two_models.csv"),
               "--nodes", fixture("timeline/two_models_nodes.csv"), "--queues", bad},
              tmp);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad + ":7: spec.resources.gpuModels[A100].quota is -2"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace gpuorch::test
