// gpuorch sim timeline with tenants: a trace with a queue column (Philly's `cluster`) gets
// per-queue results in --json (`queues`) and a per-queue table; scripts/philly-tenants derives
// the queues' quotas and runs the multi-tenant baselines (docs/sim-timeline.md, "Multi-tenant").
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {
namespace {

std::vector<std::string> tenants_run(const std::string& fixture_name,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"sim",     "timeline", "--workload",      fixture(fixture_name),
                                   "--nodes", "2",        "--gpus-per-node", "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(SimTimelineQueuesCli, JsonHasPerQueueResultsThatAddUp) {
  TempDir tmp;
  const auto r = run_cli(
      tenants_run("timeline/philly_tenants.csv", {"--policy", "fifo,tiresias", "--json"}), tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto objects = json_lines(r.out);
  ASSERT_EQ(objects.size(), 2U);
  for (const auto& o : objects) {
    ASSERT_TRUE(o.contains("queues")) << o.dump();
    const auto& q = o["queues"];
    ASSERT_EQ(q.size(), 3U);
    EXPECT_EQ(q.begin().key(), "vc-a");  // sorted by name
    // vc-a has every other row of the 24, vc-b and vc-c every fourth.
    EXPECT_EQ(q["vc-a"]["jobs"], 12);
    EXPECT_EQ(q["vc-b"]["jobs"], 6);
    EXPECT_EQ(q["vc-c"]["jobs"], 6);
    double jobs = 0, finished = 0, hours = 0, share = 0, jct = 0;
    for (const auto& [name, x] : q.items()) {
      for (const char* key :
           {"jobs", "finished", "avg_jct_s", "avg_wait_s", "gpu_hours", "gpu_share"}) {
        EXPECT_TRUE(x.contains(key)) << name << " " << key;
      }
      jobs += x["jobs"].get<double>();
      finished += x["finished"].get<double>();
      hours += x["gpu_hours"].get<double>();
      share += x["gpu_share"].get<double>();
      jct += x["avg_jct_s"].get<double>() * x["finished"].get<double>();
    }
    EXPECT_EQ(jobs, o["jobs"].get<double>());
    EXPECT_EQ(finished, o["finished"].get<double>());
    EXPECT_NEAR(hours, o["gpu_hours"].get<double>(), 0.01);
    EXPECT_NEAR(share, 1.0, 0.001);
    EXPECT_NEAR(jct / finished, o["avg_jct_s"].get<double>(), 0.01);
    // Utilisation in its windows (docs/sim-timeline.md, "Multi-tenant"): a fraction, and while
    // jobs wait at least as high as over the whole run on this loaded cluster.
    for (const char* key : {"utilisation_arrivals", "utilisation_waiting"}) {
      ASSERT_TRUE(o.contains(key)) << key;
      EXPECT_GT(o[key].get<double>(), 0) << key;
      EXPECT_LE(o[key].get<double>(), 1) << key;
    }
    EXPECT_GE(o["utilisation_waiting"].get<double>(), o["utilisation"].get<double>());
  }
}

TEST(SimTimelineQueuesCli, TableHasPerQueueRowsForTenantsOrWhenAsked) {
  TempDir tmp;
  const auto tenants =
      run_cli(tenants_run("timeline/philly_tenants.csv", {"--policy", "fifo"}), tmp);
  ASSERT_EQ(tenants.exit_code, 0) << tenants.err;
  EXPECT_NE(tenants.out.find("per queue"), std::string::npos) << tenants.out;
  EXPECT_NE(tenants.out.find(" fifo       vc-c "), std::string::npos) << tenants.out;
  // One queue: no per-queue table unless --per-queue.
  const auto one = run_cli(tenants_run("timeline/philly_small.csv", {"--policy", "fifo"}), tmp);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out.find("per queue"), std::string::npos) << one.out;
  const auto asked =
      run_cli(tenants_run("timeline/philly_small.csv", {"--policy", "fifo", "--per-queue"}), tmp);
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_NE(asked.out.find(" fifo       fixture "), std::string::npos) << asked.out;
}

TEST(SimTimelineQueuesCli, ReportHasTheQueuesSection) {
  if (!has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  TempDir tmp;
  const std::string report = tmp.file("report");
  const auto r = run_cli(
      tenants_run("timeline/philly_tenants.csv", {"--policy", "fifo,sjf", "--report", report}),
      tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_text(report + "/queue_gpus.svg").find("<svg"), std::string::npos);
  const std::string html = read_text(report + "/index.html");
  EXPECT_NE(html.find("<h2>Queues</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>vc-b</td>"), std::string::npos);
}

CommandResult philly_tenants(const TempDir& tmp, const std::string& trace,
                             const std::vector<std::string>& extra) {
  const auto script = std::filesystem::path(source_dir()) / "scripts" / "philly-tenants";
  write_text(tmp.file("t.csv"), trace);
  std::vector<std::string> args = {"/usr/bin/python3", script.string(), "--trace",
                                   tmp.file("t.csv"),  "--queues-out",  tmp.file("q.yaml"),
                                   "--yaml-only"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_command(args, tmp);
}

// GPU-time 600 : 190 : 10 on 8 GPUs is 6 : 1.9 : 0.1, rounded by largest remainder to 6 : 2 : 0.
constexpr const char* kTrace =
    "timestamp,duration,num_gpus,gpu_time,cluster\n"
    "2017-10-09 06:00:00,250.0,2,500.0,vc-a\n"
    "2017-10-09 06:01:00,190.0,1,190.0,vc-b\n"
    "2017-10-09 06:02:00,100.0,1,100.0,vc-a\n"
    "2017-10-09 06:03:00,10.0,1,10.0,103959\n"
    "\n";

TEST(PhillyTenantsScript, QuotasFollowGpuTimeAndSumToTheCluster) {
  const TempDir tmp;
  const auto r = philly_tenants(tmp, kTrace, {"--gpus", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| vc-a | 2 | 75.00 % | 6 | 2 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| vc-b | 1 | 23.75 % | 2 | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 103959 | 1 | 1.25 % | 0 | 1 |"), std::string::npos) << r.out;
  const std::string yaml = read_text(tmp.file("q.yaml"));
  const std::string parent =
      "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: \"philly\"\nspec:\n"
      "  resources:\n    gpu: {quota: 8, limit: -1, overQuotaWeight: 1}\n"
      "    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}\n"
      "    memory: {quota: -1, limit: -1, overQuotaWeight: 1}\n---\n";
  EXPECT_EQ(yaml.rfind(parent, 0), 0U) << yaml;
  EXPECT_NE(yaml.find("  name: \"vc-a\"\nspec:\n  parentQueue: \"philly\"\n  resources:\n"
                      "    gpu: {quota: 6, limit: -1, overQuotaWeight: 6}\n"),
            std::string::npos)
      << yaml;
  // A VC whose share rounds to no GPU still weighs 1 in the sharing of idle GPUs.
  EXPECT_NE(yaml.find("  name: \"103959\"\nspec:\n  parentQueue: \"philly\"\n  resources:\n"
                      "    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}\n"),
            std::string::npos)
      << yaml;
  // Four documents: the parent and one leaf per VC.
  std::size_t documents = 0;
  for (auto at = yaml.find("kind: Queue\n"); at != std::string::npos;
       at = yaml.find("kind: Queue\n", at + 1)) {
    ++documents;
  }
  EXPECT_EQ(documents, 4U);
  EXPECT_EQ(std::count(yaml.begin(), yaml.end(), '\n'), 9 + 3 * 10 + 3);
}

TEST(PhillyTenantsScript, BadInputIsOneLineAndExitTwo) {
  const TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 06:00:00,1,x,1,a\n",
       ":2: num_gpus 'x' or gpu_time '1' is not a number"},
      {"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 06:00:00,1,1,1,A b\n",
       ":2: cluster 'A b' is not a queue name"},
      {"timestamp,duration,num_gpus,gpu_time\n2017-10-09 06:00:00,1,1,1\n",
       ":1: no column 'cluster'"},
      {"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 06:00:00,1,16,16,a\n",
       "--gpus 8: the trace's largest job asks for 16 GPUs"},
  };
  for (const auto& [trace, says] : cases) {
    const auto r = philly_tenants(tmp, trace, {"--gpus", "8"});
    EXPECT_EQ(r.exit_code, 2) << trace;
    EXPECT_EQ(lines_of(r.err).size(), 1U) << r.err;
    EXPECT_EQ(r.err.rfind("philly-tenants: ", 0), 0U) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace gpuorch::test
