// scripts/compare-efd on a made openb folder and a made family: issue 16's criterion gets a row per
// trace (published, unpublished, generated), asks +1.0 exactly where the ceiling's room is over
// 1.5, and the verdict and the exit code follow the rows; a family folder without its node list is
// one line and exit 2, before any run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/made_openb.hpp"
#include "support/outputs.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

bool have_scipy() {
  return std::system("/usr/bin/python3 -c 'import numpy, scipy.optimize' >/dev/null 2>&1") == 0;
}

std::string script() {
  return (std::filesystem::path(test::source_dir()) / "scripts" / "compare-efd").string();
}

// The traces compare-efd reads besides the published ones (scripts/openb_fill.py).
const std::vector<std::string> kExtraTraces{"cpu0",   "cpu037",     "cpu072",   "cpu235",
                                            "cpu300", "gpushare20", "gpuspec05"};

void write_made_openb(const test::TempDir& dir) {
  test::write_made_nodes(dir);
  test::write_made_trace(dir, "tiny");
  for (const auto& t : kExtraTraces) test::write_made_trace(dir, t);
  test::write_text(dir.file("expected_alloc.csv"),
                   "workload,policy,n_seeds,alloc90_mean,alloc100_mean,alloc110_mean,"
                   "alloc120_mean,alloc130_mean,alloc130_min,alloc130_max\n"
                   "openb_pod_list_tiny,06-FGD,10,50,60,65,70,75,70,80\n");
}

TEST(CompareEfdScript, Issue16sCriterionHasARowPerTraceAndDecidesTheExitCode) {
  if (!have_scipy()) GTEST_SKIP() << "/usr/bin/python3 has no scipy (scripts/setup installs it)";
  const test::TempDir openb;
  const test::TempDir family;
  write_made_openb(openb);
  test::write_made_nodes(family);
  test::write_made_trace(family, "gpuspec99");
  const std::string out = openb.file("efd-results.md");
  const auto r = test::run_command(
      {"/usr/bin/python3", script(), "--gpuorch", test::binary_path(), "--openb",
       openb.path().string(), "--family", family.path().string(), "--seeds", "42-43", "--out", out},
      openb);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  const auto lines = test::lines_of(test::read_text(out));
  // The ablation is a second run's (--ablation): without it, no such section.
  EXPECT_EQ(std::find(lines.begin(), lines.end(), "## Ablation"), lines.end());
  std::size_t at = 0;
  while (at < lines.size() && lines[at] != "## Issue 16's criterion") ++at;
  ASSERT_LT(at, lines.size()) << test::read_text(out);
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = at + 1; i < lines.size() && lines[i].rfind("## ", 0) != 0; ++i) {
    if (lines[i].rfind("| ", 0) == 0 && lines[i].rfind("| trace", 0) != 0) {
      rows.push_back(test::markdown_cells(lines[i]));
    }
  }
  ASSERT_EQ(rows.size(), 9U) << test::read_text(out);
  EXPECT_EQ(rows.front()[0], "tiny");
  EXPECT_EQ(rows.back()[0], "gpuspec99 (generated)");
  bool all_met = true;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 14U) << row[0];
    for (const std::size_t point : {2U, 8U}) {  // ceiling, room, asked, efd, efd-online, met
      const double room = std::stod(row[point + 1]);
      EXPECT_EQ(row[point + 2], room > 1.5 ? "+1.0" : "+0.5") << row[0];
      const bool met = std::stod(row[point + 3]) >= std::stod(row[point + 2]) - 0.005 &&
                       std::stod(row[point + 4]) >= -0.005;
      EXPECT_EQ(row[point + 5], met ? "yes" : "**no**") << row[0];
      all_met = all_met && row[point + 5] == "yes";
    }
  }
  const char* verdict =
      all_met ? "**Criterion of issue 16: PASS**" : "**Criterion of issue 16: FAIL**";
  EXPECT_NE(test::read_text(out).find(verdict), std::string::npos);
  EXPECT_EQ(r.exit_code, all_met ? 0 : 1);
}

TEST(CompareEfdScript, AFamilyFolderWithoutItsNodeListIsOneLineAndExitTwo) {
  const test::TempDir openb;
  const test::TempDir family;
  write_made_openb(openb);
  const auto r = test::run_command(
      {"/usr/bin/python3", script(), "--gpuorch", test::binary_path(), "--openb",
       openb.path().string(), "--family", family.path().string(), "--out", openb.file("out.md")},
      openb);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "compare-efd: " + family.file("openb_node_list_gpu_node.csv") + ": not found\n");
  EXPECT_FALSE(std::filesystem::exists(openb.file("out.md")));
}

}  // namespace
}  // namespace gpuorch
