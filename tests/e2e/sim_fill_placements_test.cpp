// `sim fill --placements`: every decision as CSV in arrival order (row k of a run is the k-th
// arrival of `sim arrivals`), and `--tie-break names`, whose ranking depends on node names only:
// listing the nodes in another order changes no decision (what a replay on Kubernetes needs).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(line.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string placements(const std::string& nodes, const std::string& pods,
                       const std::string& tie_break, const test::TempDir& dir) {
  const std::string out = dir.file("placements-" + tie_break + ".csv");
  const auto r =
      run_cli({"sim", "fill", "--nodes", nodes, "--pods", pods, "--policy", "efd,fgd", "--seeds",
               "42-43", "--tune", "1.0", "--tie-break", tie_break, "--placements", out, "--json"},
              dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return test::read_text(out);
}

// The node CSV with its rows reversed (header kept).
std::string reversed_nodes(const std::string& path, const test::TempDir& dir) {
  auto lines = test::lines_of(test::read_text(path));
  std::reverse(lines.begin() + 1, lines.end());
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  const std::string out = dir.file("nodes-reversed.csv");
  test::write_text(out, text);
  return out;
}

void check_trace(const std::string& nodes, const std::string& pods) {
  const test::TempDir dir;
  const std::string csv = placements(nodes, pods, "names", dir);
  const auto rows = test::lines_of(csv);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0], "seed,policy,pod,node,gpus");
  // Row k of each (seed, policy) is arrival k of that seed.
  const auto arrivals = run_cli(
      {"sim", "arrivals", "--nodes", nodes, "--pods", pods, "--seeds", "42-43", "--tune", "1.0"},
      dir);
  ASSERT_EQ(arrivals.exit_code, 0) << arrivals.err;
  const auto arrival_rows = test::lines_of(arrivals.out);
  std::map<std::string, std::vector<std::string>> pods_by_seed;  // seed -> pod names in order
  for (std::size_t i = 1; i < arrival_rows.size(); ++i) {
    const auto f = fields(arrival_rows[i]);
    pods_by_seed[f[0]].push_back(f[2]);
  }
  std::map<std::pair<std::string, std::string>, std::size_t> next;
  std::size_t placed = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto f = fields(rows[i]);
    ASSERT_EQ(f.size(), 5U) << rows[i];
    std::size_t& k = next[{f[0], f[1]}];
    ASSERT_LT(k, pods_by_seed[f[0]].size());
    EXPECT_EQ(f[2], pods_by_seed[f[0]][k]) << "row " << i;
    ++k;
    if (!f[3].empty()) ++placed;
    if (f[3].empty()) {
      EXPECT_TRUE(f[4].empty()) << "a failed pod has no GPUs: " << rows[i];
    }
  }
  for (const auto& [key, count] : next) EXPECT_EQ(count, pods_by_seed[key.first].size());
  EXPECT_GT(placed, 0U);
  // The name ranking does not care in which order the nodes are listed.
  EXPECT_EQ(placements(reversed_nodes(nodes, dir), pods, "names", dir), csv);
}

TEST(SimFillPlacements, FixtureTrace) {
  check_trace(test::fixture("openb_nodes.csv"), test::fixture("openb_pods.csv"));
}

TEST(SimFillPlacements, OpenbDefaultTrace) {
  GPUORCH_REQUIRE_OPENB(openb);
  check_trace((openb / "openb_node_list_gpu_node.csv").string(),
              (openb / "openb_pod_list_default.csv").string());
}

TEST(SimFillPlacements, BadValuesExitTwo) {
  const test::TempDir dir;
  auto r = run_cli({"sim", "fill", "--tie-break", "random"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli({"sim", "fill", "--placements", dir.path().string()}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuorch
