// scripts/timeline-workload (docs/sim-timeline.md, "Loads nobody has"): new Pollux-format
// workloads from philly.csv, made as the artifact's generator made workload-N.csv, with the
// tuned configurations the shipped workloads use, for the simulator to run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sim/timeline_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using Triple = std::tuple<std::string, int, int>;  // application, num_replicas, batch_size

struct Job {
  std::string name;
  long time = -1;
  std::string application;
  int replicas = 0;
  int batch = 0;
};

test::CommandResult run_script(const test::TempDir& dir, const std::vector<std::string>& args) {
  const auto script =
      std::filesystem::path(::gpuorch::test::source_dir()) / "scripts" / "timeline-workload";
  std::vector<std::string> argv{"/usr/bin/python3", script.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_command(argv, dir, "workload");
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  for (const char c : line) {
    if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else {
      field.push_back(c);
    }
  }
  fields.push_back(field);
  return fields;
}

std::vector<Job> read_workload(const std::filesystem::path& path) {
  const auto lines = test::lines_of(test::read_text(path.string()));
  EXPECT_FALSE(lines.empty()) << path;
  if (lines.empty()) return {};
  EXPECT_EQ(lines[0], "name,time,application,num_replicas,batch_size") << path;
  std::vector<Job> jobs;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i]);
    EXPECT_EQ(f.size(), 5U) << path << ":" << i + 1;
    if (f.size() != 5) continue;
    jobs.push_back({f[0], std::stol(f[1]), f[2], std::stoi(f[3]), std::stoi(f[4])});
  }
  return jobs;
}

// The generator's table, as `--tuned` prints it.
std::set<Triple> tuned_table() {
  const test::TempDir tmp;
  const auto r = run_script(tmp, {"--tuned"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<Triple> table;
  for (const auto& line : test::lines_of(r.out)) {
    const auto f = split(line);
    EXPECT_EQ(f.size(), 3U) << line;
    if (f.size() == 3) table.emplace(f[0], std::stoi(f[1]), std::stoi(f[2]));
  }
  return table;
}

std::vector<std::filesystem::path> shipped_load_1(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> paths;
  for (int n = 1; n <= 8; ++n) paths.push_back(dir / fmt::format("workload-{}.csv", n));
  return paths;
}

TEST(TimelineWorkloadScript, TheTunedTableIsWhatTheShippedWorkloadsRequest) {
  GPUORCH_REQUIRE_POLLUX(dir);
  // All 16 shipped workloads (load 1.0 and 0.5, 1920 jobs): every triple is in the table and
  // every entry of the table occurs, so the table cannot drift from the artifact's.
  std::set<Triple> shipped;
  auto paths = shipped_load_1(dir);
  for (int n = 1; n <= 8; ++n)
    paths.push_back(dir / "workloads-0.5" / fmt::format("workload-{}.csv", n));
  for (const auto& path : paths) {
    for (const Job& j : read_workload(path)) shipped.emplace(j.application, j.replicas, j.batch);
  }
  EXPECT_EQ(tuned_table(), shipped);
  EXPECT_EQ(shipped.size(), 16U);
}

TEST(TimelineWorkloadScript, ASeedGivesTheSameFileAnotherSeedAnother) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const test::TempDir tmp;
  const std::string trace = (dir / "philly.csv").string();
  for (const auto& [seed, out] :
       {std::pair{"101", "a.csv"}, std::pair{"101", "b.csv"}, std::pair{"102", "c.csv"}}) {
    const auto r = run_script(
        tmp, {"--trace", trace, "--jobs", "160", "--seed", seed, "--out", tmp.file(out)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(test::read_text(tmp.file("a.csv")), test::read_text(tmp.file("b.csv")));
  EXPECT_NE(test::read_text(tmp.file("a.csv")), test::read_text(tmp.file("c.csv")));
  // The batch form writes the same file for the same seed.
  const auto r = run_script(
      tmp, {"--trace", trace, "--jobs", "160", "--seeds", "100-101", "--out", tmp.file("set")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_text(tmp.file("set/workload-101.csv")), test::read_text(tmp.file("a.csv")));
  EXPECT_TRUE(std::filesystem::exists(tmp.file("set/workload-100.csv")));
}

TEST(TimelineWorkloadScript, AWorkloadAsTheArtifactsThatTheSimulatorRuns) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const test::TempDir tmp;
  const std::string trace = (dir / "philly.csv").string();
  const std::set<Triple> table = tuned_table();
  // The defaults (start 2, 8 hours) at load 1.0, and --load 0.5 over a 4-hour window.
  for (const auto& [args, jobs, duration] :
       {std::tuple{std::vector<std::string>{"--jobs", "160"}, 160U, 8},
        std::tuple{std::vector<std::string>{"--load", "0.5", "--start", "0", "--duration", "4"},
                   80U, 4}}) {
    std::vector<std::string> argv{"--trace", trace, "--seed", "7", "--out", tmp.file("w.csv")};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_script(tmp, argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto w = read_workload(tmp.file("w.csv"));
    ASSERT_EQ(w.size(), jobs);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const Job& j = w[i];
      EXPECT_EQ(j.name, fmt::format("{}-{}", j.application, i));
      EXPECT_GE(j.time, 0) << j.name;
      EXPECT_LT(j.time, duration * 3600) << j.name;
      if (i > 0) {
        EXPECT_LE(w[i - 1].time, j.time) << j.name;
      }
      EXPECT_TRUE(table.contains({j.application, j.replicas, j.batch})) << j.name;
    }
    const auto sim = test::run_cli({"sim", "timeline", "--workload", tmp.file("w.csv"), "--apps",
                                    (dir / "apps").string(), "--policy", "fifo", "--json"},
                                   tmp);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_NE(sim.out.find(fmt::format("\"jobs\":{},\"finished\":{}", jobs, jobs)),
              std::string::npos)
        << sim.out;
  }
}

TEST(TimelineWorkloadScript, ApplicationSharesAreTheShippedWorkloads) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const test::TempDir tmp;
  const auto r = run_script(tmp, {"--trace", (dir / "philly.csv").string(), "--jobs", "160",
                                  "--seeds", "101-116", "--out", tmp.file("gen")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::filesystem::path> generated;
  for (int seed = 101; seed <= 116; ++seed) {
    generated.push_back(std::filesystem::path(tmp.file("gen")) /
                        fmt::format("workload-{}.csv", seed));
  }
  const auto shares = [](const std::vector<std::filesystem::path>& paths, double& total) {
    std::map<std::string, double> count;
    total = 0;
    for (const auto& path : paths) {
      for (const Job& j : read_workload(path)) {
        count[j.application] += 1;
        total += 1;
      }
    }
    for (auto& [app, c] : count) c /= total;
    return count;
  };
  double n_shipped = 0;
  double n_generated = 0;
  const auto shipped = shares(shipped_load_1(dir), n_shipped);  // 1280 jobs
  const auto made = shares(generated, n_generated);             // 2560 jobs
  ASSERT_EQ(n_shipped, 1280);
  ASSERT_EQ(n_generated, 2560);
  // Each job's application is (nearly) an independent draw from one distribution in both sets,
  // so a share's difference has the binomial standard error sqrt(p (1 - p) (1/n1 + 1/n2)) at the
  // shipped share p; allowed: 4 of them (about 0.07 at p = 0.5, 0.03 at p = 0.05).
  for (const auto& app : {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}) {
    const double p = shipped.contains(app) ? shipped.at(app) : 0.0;
    const double q = made.contains(app) ? made.at(app) : 0.0;
    const double se = std::sqrt(p * (1 - p) * (1 / n_shipped + 1 / n_generated));
    EXPECT_GT(p, 0) << app;
    EXPECT_LE(std::abs(q - p), 4 * se) << app << ": generated " << q << ", shipped " << p;
  }
}

TEST(TimelineWorkloadScript, ABadTraceRowIsOneLineAndNothingIsWritten) {
  // No ../shared needed: a trace made here.
  const test::TempDir tmp;
  const std::string header = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  const std::string good =
      "2017-10-09 03:01:55,66.0,1,66.0,c1\n2017-10-09 04:00:00,600,2,1200,c1\n";
  test::write_text(tmp.file("bad.csv"), header + good + "2017-10-09 05:00:00,abc,1,66.0,c1\n");
  test::write_text(tmp.file("short.csv"), header + good + "2017-10-09 05:00:00,66.0,1\n");
  test::write_text(tmp.file("date.csv"), header + "09/10/2017 05:00,66.0,1,66.0,c1\n" + good);
  test::write_text(tmp.file("good.csv"), header + good);
  struct Case {
    std::string trace;
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases{
      {"bad.csv", {"--jobs", "1"}, ":4: duration 'abc' is not a number"},
      {"short.csv", {"--jobs", "1"}, ":4: 3 fields, the header has 5"},
      {"date.csv", {"--jobs", "1"}, ":2: timestamp '09/10/2017 05:00' is not YYYY-MM-DD HH:MM:SS"},
      {"good.csv",
       {"--jobs", "3"},
       ": 3 jobs, but only 2 rows are eligible (duration >= 60 s, GPU time < 1000 GPU-hours, "
       "submitted in the 8 hours from 2:00)"},
  };
  for (const Case& c : cases) {
    for (const auto& form :
         {std::vector<std::string>{"--seed", "1", "--out", tmp.file("out.csv")},
          std::vector<std::string>{"--seeds", "1-2", "--out", tmp.file("dir")}}) {
      std::vector<std::string> argv{"--trace", tmp.file(c.trace)};
      argv.insert(argv.end(), c.args.begin(), c.args.end());
      argv.insert(argv.end(), form.begin(), form.end());
      const auto r = run_script(tmp, argv);
      EXPECT_EQ(r.exit_code, 2) << c.trace;
      EXPECT_EQ(r.err, "timeline-workload: " + tmp.file(c.trace) + c.error + "\n");
      EXPECT_FALSE(std::filesystem::exists(tmp.file("out.csv"))) << c.trace;
      EXPECT_FALSE(std::filesystem::exists(tmp.file("dir"))) << c.trace;
    }
  }
  // The good trace makes its 2 jobs: 01:01:55 and 02:00:00 after the 2-hour shift.
  const auto r = run_script(tmp, {"--trace", tmp.file("good.csv"), "--jobs", "2", "--seed", "1",
                                  "--out", tmp.file("out.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto w = read_workload(tmp.file("out.csv"));
  ASSERT_EQ(w.size(), 2U);
  EXPECT_EQ(w[0].time, 3715);
  EXPECT_TRUE(w[0].application == "cifar10" || w[0].application == "ncf") << w[0].application;
  EXPECT_EQ(w[1].time, 7200);
  EXPECT_TRUE(w[1].application == "cifar10" || w[1].application == "ncf") << w[1].application;
}

}  // namespace
}  // namespace gpuorch
