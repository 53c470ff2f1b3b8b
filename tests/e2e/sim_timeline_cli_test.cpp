// gpuorch sim timeline end to end: the JSON contract scripts rely on, the per-job CSV, and bad
// input as one line with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "sim/timeline_support.hpp"
#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {
namespace {

TEST(SimTimelineCli, JsonHasOneObjectPerPolicyWithPerJobJcts) {
  GPUORCH_REQUIRE_POLLUX(dir);
  TempDir tmp;
  const auto r =
      run_cli({"sim", "timeline", "--workload", (dir / "workloads-0.5" / "workload-1.csv").string(),
               "--policy", "tiresias,fifo", "--json", "--csv", tmp.file("jobs.csv")},
              tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> objects = json_lines(r.out);
  ASSERT_EQ(objects.size(), 2U);
  EXPECT_EQ(objects[0]["policy"], "tiresias");
  EXPECT_EQ(objects[1]["policy"], "fifo");
  for (const auto& o : objects) {
    for (const char* key :
         {"jobs", "avg_jct_s", "p99_jct_s", "makespan_s", "gpu_hours", "per_job"}) {
      EXPECT_TRUE(o.contains(key)) << key;
    }
    EXPECT_EQ(o["jobs"], 80);
    EXPECT_EQ(o["gpus"], 64);
    ASSERT_EQ(o["per_job"].size(), 80U);
    double sum = 0;
    for (const auto& j : o["per_job"]) sum += j["jct_s"].get<double>();
    EXPECT_NEAR(sum / 80, o["avg_jct_s"].get<double>(), 0.01);
  }
  EXPECT_NEAR(objects[0]["avg_jct_s"].get<double>(), 1450.9375, 0.001);  // the shipped figure
  const std::string csv = read_text(tmp.file("jobs.csv"));
  EXPECT_EQ(csv.rfind("policy,name,submit_s,start_s,completion_s,jct_s,restarts,gpu_hours\n", 0),
            0U);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 161);
}

TEST(SimTimelineCli, BadInputIsOneLineAndExitTwo) {
  GPUORCH_REQUIRE_POLLUX(dir);
  TempDir tmp;
  const std::string apps = (dir / "apps").string();
  struct Case {
    std::string csv;
    std::string expect;
    std::vector<std::string> extra;
  };
  const std::vector<Case> cases = {
      {"name,time,application,num_replicas,batch_size\nx-0,10,resnet,1,128\n",
       "w.csv:2: job x-0:",
       {}},
      {"name,time,application,num_replicas,batch_size\nx-0,-5,cifar10,1,128\n",
       "w.csv:2: column 'time'",
       {}},
      {"name,time,application,num_replicas,batch_size\nx-0,nan,cifar10,1,128\n",
       "w.csv:2: column 'time'",
       {}},
      {"name,time,application,num_replicas,batch_size\nx-0,5,cifar10,1,99999\n",
       "w.csv:2: job x-0: batch_size 99999",
       {}},
      {"name,time,application,num_replicas,batch_size\nx-0,5,cifar10,80,2048\n",
       "w.csv:2: job x-0 asks for 80 GPUs, the cluster has 64: infeasible",
       {"--policy", "tiresias"}},
      {"name,time,application\nx-0,5,cifar10\n", "w.csv:1: no column 'num_replicas'", {}},
  };
  for (const auto& c : cases) {
    write_text(tmp.file("w.csv"), c.csv);
    std::vector<std::string> args = {"sim",    "timeline", "--workload", tmp.file("w.csv"),
                                     "--apps", apps};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const auto r = run_cli(args, tmp);
    EXPECT_EQ(r.exit_code, 2) << c.csv;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  // A missing profile file of a known application.
  const auto fake = tmp.file("apps");
  std::filesystem::create_directories(std::filesystem::path(fake) / "cifar10");
  write_text(std::filesystem::path(fake) / "cifar10" / "validation-128.csv",
             "progress,iteration,metric,grad_sqr,grad_var\n1,1,0,1,1\n");
  write_text(tmp.file("w.csv"),
             "name,time,application,num_replicas,batch_size\nx-0,5,cifar10,1,128\n");
  const auto r = run_cli({"sim", "timeline", "--workload", tmp.file("w.csv"), "--apps", fake}, tmp);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("placements.csv: missing profile file"), std::string::npos) << r.err;
}

TEST(SimTimelineCli, GpusSweepRunsEachClusterSize) {
  GPUORCH_REQUIRE_POLLUX(dir);
  TempDir tmp;
  const auto r =
      run_cli({"sim", "timeline", "--workload", (dir / "workloads-0.5" / "workload-1.csv").string(),
               "--policy", "tiresias", "--gpus", "48:64:16", "--json"},
              tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> objects = json_lines(r.out);
  ASSERT_EQ(objects.size(), 2U);
  EXPECT_EQ(objects[0]["gpus"], 48);
  EXPECT_EQ(objects[0]["nodes"], 12);
  EXPECT_EQ(objects[1]["gpus"], 64);
  // Fewer GPUs: jobs wait longer.
  EXPECT_GT(objects[0]["avg_jct_s"].get<double>(), objects[1]["avg_jct_s"].get<double>());
  const auto bad =
      run_cli({"sim", "timeline", "--workload", (dir / "workloads-0.5" / "workload-1.csv").string(),
               "--gpus", "30:64:4"},
              tmp);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--gpus: '30:64:4'"), std::string::npos) << bad.err;
}

// The small rigid-job workload (tests/fixtures/timeline): runs without ../shared.
std::vector<std::string> fixture_run(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"sim",
                                   "timeline",
                                   "--workload",
                                   fixture("timeline/philly_small.csv"),
                                   "--policy",
                                   "fifo,sjf,tiresias",
                                   "--nodes",
                                   "2",
                                   "--gpus-per-node",
                                   "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(SimTimelineCli, ReportFolderWithPlotsTableAndHeader) {
  if (!has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  TempDir tmp;
  const std::string report = tmp.file("report");
  const auto r = run_cli(fixture_run({"--report", report, "--csv", tmp.file("jobs.csv")}), tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("report: " + report + "/index.html"), std::string::npos) << r.out;
  for (const char* f : {"index.html", "jct_cdf.svg", "utilisation.svg", "goodput.svg", "queue.svg",
                        "jct_cdf.dat", "series.dat", "plots.gp"}) {
    const std::string content = read_text(report + "/" + f);
    EXPECT_FALSE(content.empty()) << f;
    if (std::string(f).ends_with(".svg")) {
      EXPECT_NE(content.find("<svg"), std::string::npos) << f;
    }
  }
  const std::string html = read_text(report + "/index.html");
  for (const char* says : {"--report", "philly_small.csv", "Seeds: 1", "gpuorch " GPUORCH_VERSION,
                           "<td>tiresias</td>", "avg JCT h", "p99 JCT h", "GPU-hours"}) {
    EXPECT_NE(html.find(says), std::string::npos) << says;
  }
  // 24 jobs, each on the CDF of each of the three policies.
  const std::string cdf = read_text(report + "/jct_cdf.dat");
  EXPECT_EQ(std::count(cdf.begin(), cdf.end(), '\n'), 3 * (1 + 24 + 2));
  EXPECT_EQ(folder_entries(tmp.path()), (std::vector<std::string>{"jobs.csv", "report"}));
}

// A --report folder that cannot be written, or no gnuplot: one line, before any work, and
// nothing written (not even --csv).
TEST(SimTimelineCli, BadReportFolderOrNoGnuplotIsOneLineAndNothingWritten) {
  TempDir tmp;
  write_text(tmp.file("file"), "x");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/proc/rep", "gpuorch: --report /proc/rep: cannot write there: "},
      {tmp.file("file"), "gpuorch: --report " + tmp.file("file") + ": exists and is not a folder"},
      {tmp.file("no/such/report"), "gpuorch: --report " + tmp.file("no/such/report") + ": "},
  };
  for (const auto& [dir, says] : cases) {
    const auto r = run_cli(fixture_run({"--csv", tmp.file("jobs.csv"), "--report", dir}), tmp);
    EXPECT_EQ(r.exit_code, 2) << dir << "\n" << r.err;
    ASSERT_EQ(lines_of(r.err).size(), 1U) << r.err;
    EXPECT_EQ(r.err.rfind(says, 0), 0U) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(folder_entries(tmp.path()), std::vector<std::string>{"file"}) << dir;
  }
  // gnuplot not in PATH (the binary and the shell are found by their absolute paths).
  const char* saved = std::getenv("PATH");
  const std::string path = saved ? saved : "";
  ::setenv("PATH", tmp.path().c_str(), 1);
  const auto r =
      run_cli(fixture_run({"--csv", tmp.file("jobs.csv"), "--report", tmp.file("r")}), tmp);
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_EQ(lines_of(r.err).size(), 1U) << r.err;
  EXPECT_EQ(r.err.rfind("gpuorch: error: --report needs gnuplot", 0), 0U) << r.err;
  EXPECT_EQ(folder_entries(tmp.path()), std::vector<std::string>{"file"});
}

TEST(SimTimelineCli, HelpShowsDefaultsAndAnExample) {
  TempDir tmp;
  const auto r = run_cli({"sim", "timeline", "--help"}, tmp);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Policies: fifo"), std::string::npos);
  EXPECT_NE(r.out.find("Examples:\n  gpuorch sim timeline --workload"), std::string::npos);
  EXPECT_NE(r.out.find("(default: 16)"), std::string::npos);
  EXPECT_NE(r.out.find("(default: default)"), std::string::npos);
}

}  // namespace
}  // namespace gpuorch::test
