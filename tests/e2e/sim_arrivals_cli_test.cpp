// `gpuorch sim arrivals` end to end: the sequence it prints is the one `sim fill` runs on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::fixture;
using test::run_cli;
using ::testing::HasSubstr;

struct Totals {
  std::size_t pods = 0;
  std::int64_t gpu_milli = 0;
  double last_pct = 0;
};

// Per seed: pods, their GPU demand, and the last arrived_pct.
std::map<std::string, Totals> totals(const std::string& csv) {
  std::map<std::string, Totals> out;
  const auto lines = test::lines_of(csv);
  EXPECT_FALSE(lines.empty());
  if (lines.empty()) return out;
  EXPECT_EQ(lines[0],
            "seed,position,pod,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,arrived_pct");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream row(lines[i]);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (lines[i].back() == ',') f.emplace_back();
    EXPECT_EQ(f.size(), 9U) << lines[i];
    if (f.size() != 9U) continue;
    Totals& t = out[f[0]];
    EXPECT_EQ(std::stoul(f[1]), t.pods) << "positions run 0, 1, 2, ... per seed";
    ++t.pods;
    t.gpu_milli += std::stoll(f[5]) * std::stoll(f[6]);
    const double pct = std::stod(f[8]);
    EXPECT_GE(pct, t.last_pct) << "arrived_pct never falls";
    t.last_pct = pct;
  }
  return out;
}

TEST(SimArrivalsCli, MatchesWhatSimFillRuns) {
  const test::TempDir dir;
  const auto arrivals = run_cli({"sim", "arrivals", "--nodes", fixture("openb_nodes.csv"), "--pods",
                                 fixture("openb_pods.csv"), "--seeds", "1-2", "--tune", "1.3"},
                                dir);
  ASSERT_EQ(arrivals.exit_code, 0) << arrivals.err;
  const auto seq = totals(arrivals.out);
  ASSERT_EQ(seq.size(), 2U);

  const auto fill = run_cli(
      {"sim", "fill", "--nodes", fixture("openb_nodes.csv"), "--pods", fixture("openb_pods.csv"),
       "--seeds", "1-2", "--tune", "1.3", "--policy", "fgd", "--json"},
      dir);
  ASSERT_EQ(fill.exit_code, 0) << fill.err;
  const auto j = nlohmann::json::parse(fill.out);
  for (const auto& run : j["runs"]) {
    const auto& t = seq.at(std::to_string(run["seed"].get<int>()));
    EXPECT_EQ(t.pods, run["arrived_pods"].get<std::size_t>());
    EXPECT_EQ(t.gpu_milli, run["arrived_gpu_milli"].get<std::int64_t>());
    EXPECT_NEAR(
        t.last_pct,
        100.0 * run["arrived_gpu_milli"].get<double>() / run["gpu_milli_capacity"].get<double>(),
        1e-3);
  }
  // Different seeds, different orders; the same seed, the same bytes.
  const auto again = run_cli(
      {"sim", "arrivals", "--nodes", fixture("openb_nodes.csv"), "--pods",
       fixture("openb_pods.csv"), "--seeds", "1-2", "--tune", "1.3", "-o", dir.file("a.csv")},
      dir);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(again.out.empty());
  EXPECT_EQ(test::read_text(dir.file("a.csv")), arrivals.out);
  const auto lines = test::lines_of(arrivals.out);
  const auto second = std::find_if(lines.begin(), lines.end(),
                                   [](const std::string& l) { return l.rfind("2,0,", 0) == 0; });
  ASSERT_NE(second, lines.end());
  EXPECT_NE(lines[1].substr(2), second->substr(2));
}

TEST(SimArrivalsCli, HelpAndBadInput) {
  const test::TempDir dir;
  const auto help = run_cli({"sim", "arrivals", "--help"}, dir);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--seeds"));
  const std::vector<std::vector<std::string>> cases{
      {"--seeds", "x"},
      {"--tune", "0"},
      {"--nodes", fixture("openb_nodes.csv")},
      {"-o", dir.path().string()},
      {"--pods", dir.file("none.csv"), "--nodes", fixture("openb_nodes.csv")},
  };
  for (const auto& flags : cases) {
    std::vector<std::string> args{"sim", "arrivals"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(flags);
    EXPECT_EQ(test::lines_of(r.err).size(), 1U) << r.err;
    EXPECT_TRUE(r.out.empty()) << testing::PrintToString(flags);
  }
}

}  // namespace
}  // namespace gpuorch
