// `sim timeline --queues`: every policy on the job layer's queues, end to end, with bad queue
// files and jobs of unknown queues refused as one line and exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {
namespace {

const std::string kTenants = fixture("timeline/philly_tenants.csv");
const std::string kQueues = fixture("timeline/tenant_queues.yaml");

TEST(SimTimelineJobLayerCli, RunsEveryRigidOrderOnQueuesAndFinishesEveryJob) {
  TempDir tmp;
  const auto r =
      run_cli({"sim", "timeline", "--workload", kTenants, "--queues", kQueues, "--policy",
               "fifo,sjf,tiresias", "--nodes", "2", "--gpus-per-node", "4", "--json"},
              tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto objects = json_lines(r.out);
  ASSERT_EQ(objects.size(), 3U);
  for (const auto& o : objects) {
    EXPECT_EQ(o["finished"], 24) << o["policy"];
    EXPECT_EQ(o["per_job"].size(), 24U);
  }
}

TEST(SimTimelineJobLayerCli, RefusesBadQueuesAsOneLine) {
  TempDir tmp;
  const auto bad = tmp.file("q.yaml");
  write_text(bad,
             "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: vc-a}\n"
             "spec:\n  resources:\n    gpu: {quota: -3}\n");
  auto r = run_cli({"sim", "timeline", "--workload", kTenants, "--queues", bad, "--policy", "fifo",
                    "--nodes", "2", "--gpus-per-node", "4"},
                   tmp);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpuorch: " + bad +
                       ":6: spec.resources.gpu.quota is -3: it must be -1 (none) or 0..1000000\n");
  // vc-b and vc-c are not in this file: the first job of vc-b is refused at its line.
  const auto only_a = tmp.file("a.yaml");
  write_text(only_a, "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: vc-a}\n");
  r = run_cli({"sim", "timeline", "--workload", kTenants, "--queues", only_a, "--policy", "fifo",
               "--nodes", "2", "--gpus-per-node", "4"},
              tmp);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpuorch: " + kTenants +
                       ":3: job philly-2: queue 'vc-b' is not a queue of the queue file\n");
}

TEST(SimTimelineJobLayerCli, RunsTheElasticPoliciesOnQueues) {
  const auto apps = std::filesystem::path(shared_dir()) / "traces" / "pollux_philly" / "apps";
  if (!std::filesystem::is_directory(apps)) {
    GTEST_SKIP() << "../shared/traces/pollux_philly is absent: no application profiles";
  }
  TempDir tmp;
  const auto r =
      run_cli({"sim", "timeline", "--workload", fixture("timeline/pollux_tenants.csv"), "--apps",
               apps.string(), "--queues", fixture("timeline/elastic_queues.yaml"), "--policy",
               "optimus,pollux,lasgo", "--nodes", "2", "--gpus-per-node", "4", "--json"},
              tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto objects = json_lines(r.out);
  ASSERT_EQ(objects.size(), 3U);
  for (const auto& o : objects) {
    EXPECT_EQ(o["finished"], 13) << o["policy"];
    EXPECT_EQ(o["queues"]["vc-a"]["jobs"], 8) << o["policy"];
    EXPECT_EQ(o["queues"]["vc-b"]["jobs"], 5) << o["policy"];
  }
  // A Philly trace stays refused by the policies that need profiles, queues or not.
  const auto philly = run_cli({"sim", "timeline", "--workload", kTenants, "--queues", kQueues,
                               "--policy", "pollux", "--nodes", "2", "--gpus-per-node", "4"},
                              tmp);
  EXPECT_EQ(philly.exit_code, 2);
  EXPECT_NE(philly.err.find("needs application profiles"), std::string::npos) << philly.err;
  EXPECT_TRUE(philly.out.empty());
}

}  // namespace
}  // namespace gpuorch::test
