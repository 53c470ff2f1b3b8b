// `gpuorch sim fill` end to end: the built binary run in a shell, outputs in a temp folder.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::run_cli;
using ::testing::HasSubstr;
using ::testing::StartsWith;

nlohmann::json parse_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << text.substr(0, 500);
    return {};
  }
}

TEST(SimFillCli, HelpExitsZero) {
  const test::TempDir dir;
  const auto r = run_cli({"sim", "fill", "--help"}, dir);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--nodes"));
  EXPECT_THAT(r.out, HasSubstr("--policy"));
  EXPECT_THAT(r.out, HasSubstr("--seeds"));
}

TEST(SimFillCli, SyntheticDefaultJsonAndCsv) {
  const test::TempDir dir;
  const std::string csv = dir.file("curves.csv");
  const auto r =
      run_cli({"sim", "fill", "--policy", "fgd", "--seeds", "1", "--json", "--csv", csv}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_json(r.out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["synthetic"], true);
  EXPECT_EQ(j["nodes"], 1213);
  EXPECT_EQ(j["gpus"], 6212);
  ASSERT_EQ(j["runs"].size(), 1U);
  const auto& run = j["runs"][0];
  EXPECT_EQ(run["policy"], "fgd");
  EXPECT_EQ(run["seed"], 1);
  ASSERT_EQ(run["alloc"].size(), 131U);
  EXPECT_EQ(run["frag_amount"].size(), 131U);
  EXPECT_EQ(run["frag_ratio"].size(), 131U);
  EXPECT_GT(run["arrived_pods"].get<int>(), 0);
  ASSERT_TRUE(run["alloc"][130].is_number());
  EXPECT_GT(run["alloc"][130].get<double>(), 80.0);
  EXPECT_LE(run["alloc"][130].get<double>(), 100.0);

  const auto lines = test::lines_of(test::read_text(csv));
  ASSERT_EQ(lines.size(), 132U);
  EXPECT_EQ(lines[0], "policy,seed,x,alloc,frag_amount,frag_ratio");
  EXPECT_THAT(lines[1], StartsWith("fgd,1,0,"));
  EXPECT_THAT(lines[131], StartsWith("fgd,1,130,"));
  EXPECT_EQ(test::folder_entries(dir.path()),
            std::vector<std::string>{"curves.csv"});  // no temporaries
}

TEST(SimFillCli, TableWithoutJson) {
  const test::TempDir dir;
  const auto r = run_cli({"sim", "fill", "--nodes", fixture("openb_nodes.csv"), "--pods",
                          fixture("openb_pods.csv"), "--policy", "best-fit,fgd", "--seeds", "1-2"},
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("workload openb_pods: 5 nodes, 15 GPUs, 8 pods"));
  EXPECT_THAT(r.out, HasSubstr("best-fit"));
  EXPECT_THAT(r.out, HasSubstr("x=130"));
  EXPECT_LT(r.out.find("best-fit"), r.out.find("fgd  "));
}

TEST(SimFillCli, ReportFolderWithPlots) {
  if (!test::has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const test::TempDir dir;
  const std::string report = dir.file("report");
  const auto r = run_cli(
      {"sim", "fill", "--nodes", fixture("openb_nodes.csv"), "--pods", fixture("openb_pods.csv"),
       "--policy", "fgd,random", "--seeds", "1-3", "--report", report},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(report + "/index.html"));
  const std::string html = test::read_text(report + "/index.html");
  EXPECT_THAT(html, HasSubstr("alloc.svg"));
  EXPECT_THAT(html, HasSubstr("frag_amount.svg"));
  // How the run was made: command, seeds, version, date.
  EXPECT_THAT(html, HasSubstr("--policy fgd,random --seeds 1-3 --report"));
  EXPECT_THAT(html, HasSubstr("Seeds: 1-3 (3 seeds)"));
  EXPECT_THAT(html, HasSubstr("gpuorch " GPUORCH_VERSION " (commit "));
  EXPECT_THAT(html, HasSubstr(" UTC"));
  for (const char* svg : {"alloc.svg", "frag_amount.svg", "frag_ratio.svg"}) {
    const std::string content = test::read_text(report + "/" + svg);
    EXPECT_THAT(content, HasSubstr("<svg")) << svg;
  }
  EXPECT_EQ(test::folder_entries(dir.path()), std::vector<std::string>{"report"});
}

TEST(SimFillCli, YamlInventoryAsNodes) {
  const test::TempDir dir;
  const auto r =
      run_cli({"sim", "fill", "--nodes", fixture("inventory.yaml"), "--pods",
               fixture("openb_pods_5col.csv"), "--policy", "gpu-packing", "--seeds", "3", "--json"},
              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_json(r.out);
  EXPECT_EQ(j["nodes"], 6);
  EXPECT_EQ(j["gpus"], 22);
  EXPECT_EQ(j["synthetic"], false);
  ASSERT_EQ(j["runs"].size(), 1U);
  EXPECT_EQ(j["runs"][0]["alloc"].size(), 131U);
}

TEST(SimFillCli, UnknownGpuModelIsAWarningNotAnError) {
  const test::TempDir dir;
  const std::string pods = dir.file("pods.csv");
  test::write_text(pods,
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                   "creation_time,deletion_time,scheduled_time\n"
                   "a,1000,100,1,500,,LS,Running,0,1,2\n"
                   "b,1000,100,1,500,H100,LS,Running,0,1,2\n");
  const auto r = run_cli({"sim", "fill", "--nodes", fixture("openb_nodes.csv"), "--pods", pods,
                          "--policy", "fgd", "--seeds", "1", "--json"},
                         dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto err = test::lines_of(r.err);
  ASSERT_EQ(err.size(), 1U) << r.err;
  EXPECT_EQ(err[0], "gpuorch: " + pods +
                        ":3: warning: GPU model 'H100' is not in the cluster (1 pod names it)");
  EXPECT_EQ(parse_json(r.out)["runs"].size(), 1U);
}

// `sim fill ... --json --threads N`, without the run times (the only field that may differ).
nlohmann::json fill_json(std::vector<std::string> args, const char* threads,
                         const test::TempDir& dir) {
  args.insert(args.begin(), {"sim", "fill"});
  args.insert(args.end(), {"--json", "--threads", threads});
  const auto r = run_cli(args, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  for (auto& run_json : j["runs"]) run_json.erase("elapsed_s");
  return j;
}

TEST(SimFillCli, SameSeedSameJsonWithOneOrTwoThreads) {
  const test::TempDir dir;
  const std::vector<std::string> args{"--policy", test::kSanitized ? "fgd" : "fgd,random",
                                      "--seeds", "1-2"};
  const auto one = fill_json(args, "1", dir);
  const auto two = fill_json(args, "2", dir);
  EXPECT_EQ(one["runs"].size(), test::kSanitized ? 2U : 4U);
  EXPECT_EQ(one, two);
}

TEST(SimFillCli, ConsolidationIsReportedAndDeterministic) {
  const test::TempDir dir;
  const std::vector<std::string> args{"--policy", "efd", "--seeds", "1-2", "--consolidate", "2"};
  const auto one = fill_json(args, "1", dir);
  EXPECT_EQ(one["consolidate"], 2);
  ASSERT_EQ(one["runs"].size(), 2U);
  int rescued = 0;
  for (const auto& r : one["runs"]) {
    rescued += r["rescued_pods"].get<int>();
    // Moves re-place pods, they never drop one: the failed demand is still arrived minus used.
    std::int64_t failed_milli = 0;
    for (const auto& [kind, t] : r["failed_by_kind"].items()) {
      failed_milli += t["gpu_milli"].get<std::int64_t>();
    }
    EXPECT_EQ(failed_milli,
              r["arrived_gpu_milli"].get<std::int64_t>() - r["used_gpu_milli"].get<std::int64_t>());
    // Each rescued pod moved at least one and at most two others.
    EXPECT_LE(r["rescued_pods"].get<int>(), r["moved_pods"].get<int>());
    EXPECT_LE(r["moved_pods"].get<int>(), 2 * r["rescued_pods"].get<int>());
  }
  EXPECT_GT(rescued, 0);  // seeds 1-2 of the synthetic default: 3 pods placed by moves
  EXPECT_EQ(one, fill_json(args, "2", dir));
  const auto table =
      run_cli({"sim", "fill", "--policy", "efd", "--seeds", "1", "--consolidate", "2"}, dir);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("may move up to 2 bound pods"));
}

struct BadRun {
  std::string name;
  std::string file;  // written into the temp folder
  std::string text;
  bool as_nodes;
  std::size_t line;  // 0: the whole file
  std::string problem;
};

TEST(SimFillCli, BadInputExitsTwoWithOneLocatedLineAndNoOutputs) {
  const std::string pod_header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  const std::vector<BadRun> cases{
      {"not_a_number", "pods.csv", pod_header + "a,1000,1,1,500\nb,x,1,1,1\n", false, 3,
       "column 'cpu_milli': 'x' is not an integer"},
      {"missing_column", "pods.csv", pod_header + "a,1000,1,1\n", false, 2, "expected 5 columns"},
      {"extra_column", "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nx,1,1,1,T4,extra\n", true,
       2, "found 6"},
      {"negative", "pods.csv", pod_header + "a,1000,-1,1,500\n", false, 2, "is negative"},
      {"milli_above_1000", "pods.csv", pod_header + "a,1000,1,1,1500\n", false, 2,
       "gpu_milli 1500 is above 1000"},
      {"wrong_header", "nodes.csv", "name,cpu,memory,gpus,model\nx,1,1,1,T4\n", true, 1,
       "header is"},
      {"empty_file", "pods.csv", "", false, 0, "empty file"},
      {"binary_file", "nodes.csv", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), true, 0,
       "binary content"},
      {"yaml_unknown_key", "inv.yaml",
       "nodes:\n  - name: a\n    cpu_milli: 1000\n    memory_mib: 1000\n    gpus: 8\n", true, 5,
       "unknown key 'gpus'"},
      {"yaml_wrong_type", "inv.yaml",
       "nodes:\n  - name: a\n    cpu_milli: many\n    memory_mib: 1\n", true, 3,
       "'cpu_milli' must be a whole number"},
      {"yaml_syntax", "inv.yaml", "nodes:\n  - name: [a\n", true, 0, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const test::TempDir dir;
    const std::string input = dir.file(c.file);
    test::write_text(input, c.text);
    const std::string nodes = c.as_nodes ? input : fixture("openb_nodes.csv");
    const std::string pods = c.as_nodes ? fixture("openb_pods.csv") : input;
    const auto r =
        run_cli({"sim", "fill", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seeds", "1",
                 "--csv", dir.file("out.csv"), "--report", dir.file("report")},
                dir);
    EXPECT_EQ(r.exit_code, 2);
    const auto err = test::lines_of(r.err);
    ASSERT_EQ(err.size(), 1U) << r.err;
    if (c.problem.empty()) {
      EXPECT_THAT(err[0], ::testing::MatchesRegex("gpuorch: " + input + ":[0-9]+: .+"));
    } else {
      const std::string where =
          c.line == 0 ? input + ": " : input + ":" + std::to_string(c.line) + ": ";
      EXPECT_THAT(err[0], StartsWith("gpuorch: " + where));
      EXPECT_THAT(err[0], HasSubstr(c.problem));
    }
    EXPECT_TRUE(r.out.empty()) << r.out;
    // Nothing written: only the input is in the folder.
    EXPECT_EQ(test::folder_entries(dir.path()), std::vector<std::string>{c.file});
  }
}

// Every destination is checked before the simulation: one that cannot be written is exit 2 with
// one line, and no other output is written (--report /proc/rep used to fail with exit 1 after the
// run, leaving --csv written).
TEST(SimFillCli, UnwritableOutputFailsFirstAndWritesNothing) {
  const test::TempDir dir;
  const std::string csv = dir.file("out.csv"), placements = dir.file("placements.csv");
  const std::string report = dir.file("report");
  test::write_text(dir.file("file"), "x");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--csv", csv, "--placements", placements, "--report", "/proc/rep"},
       "gpuorch: --report /proc/rep: cannot write there: "},
      {{"--csv", csv, "--report", report, "--placements", "/proc/p.csv"},
       "gpuorch: --placements /proc/p.csv: cannot write there: "},
      {{"--placements", placements, "--csv", dir.file("no/such/dir/out.csv")},
       "gpuorch: --csv " + dir.file("no/such/dir/out.csv") + ": " + dir.file("no/such/dir") +
           " is not a folder"},
      {{"--csv", csv, "--report", dir.file("file")},
       "gpuorch: --report " + dir.file("file") + ": exists and is not a folder"},
      {{"--csv", dir.path().string()},
       "gpuorch: --csv " + dir.path().string() + ": is a directory"},
  };
  for (const auto& [flags, says] : cases) {
    std::vector<std::string> args{"sim", "fill", "--policy", "fgd", "--seeds", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(flags) << "\n" << r.err;
    ASSERT_EQ(test::lines_of(r.err).size(), 1U) << r.err;
    EXPECT_THAT(r.err, StartsWith(says));
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(test::folder_entries(dir.path()), std::vector<std::string>{"file"})
        << testing::PrintToString(flags);
  }
  const auto arrivals = run_cli({"sim", "arrivals", "--seeds", "1", "-o", "/proc/a.csv"}, dir);
  EXPECT_EQ(arrivals.exit_code, 2) << arrivals.err;
  EXPECT_THAT(arrivals.err, StartsWith("gpuorch: --output /proc/a.csv: cannot write there: "));
}

TEST(SimFillCli, BadFlagsExitTwo) {
  const test::TempDir dir;
  const std::vector<std::vector<std::string>> cases{
      {"--policy", "tetris"},
      {"--policy", "fgd,"},
      {"--seeds", "abc"},
      {"--seeds", "5-3"},
      {"--seeds", ""},
      {"--seeds", "1-x"},
      {"--tune", "0"},
      {"--tune", "-1"},
      {"--tune", "many"},
      {"--threads", "-1"},
      {"--consolidate", "-1"},
      {"--consolidate", "65"},
      {"--consolidate", "two"},
      {"--nodes", fixture("openb_nodes.csv")},
      {"--pods", fixture("openb_pods.csv")},
      {"--bogus"},
  };
  for (const auto& flags : cases) {
    std::vector<std::string> args{"sim", "fill"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--csv", dir.file("out.csv")});
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(flags) << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << testing::PrintToString(flags);
    EXPECT_FALSE(fs::exists(dir.file("out.csv"))) << testing::PrintToString(flags);
  }
  const auto unknown = run_cli({"sim", "fill", "--policy", "tetris"}, dir);
  EXPECT_EQ(test::lines_of(unknown.err).size(), 1U);
  EXPECT_THAT(unknown.err, HasSubstr("unknown policy 'tetris'"));
  const auto missing = run_cli(
      {"sim", "fill", "--nodes", dir.file("none.csv"), "--pods", fixture("openb_pods.csv")}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            fmt::format("gpuorch: {}: the CSV file cannot be opened: No such file or directory\n",
                        dir.file("none.csv")));
}

}  // namespace
}  // namespace gpuorch
