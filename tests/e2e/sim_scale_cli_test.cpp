// `gpuorch sim scale` end to end, and the determinism and stability of `sim fill`'s decisions:
// the same seed gives the same placements whatever the thread count, and the incremental
// scheduler core decides exactly as the full scan did (recorded figures of the synthetic default).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;
using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json parse_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << text.substr(0, 500);
    return {};
  }
}

TEST(SimScaleCli, JsonReportsTheRun) {
  const test::TempDir dir;
  const auto r = run_cli(
      {"sim", "scale", "--nodes", "300", "--pods", "2500", "--policy", "fgd", "--json"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_json(r.out);
  EXPECT_EQ(j["nodes"], 300);
  EXPECT_EQ(j["pods"], 2500);
  EXPECT_EQ(j["policy"], "fgd");
  EXPECT_EQ(j["seed"], 42);
  EXPECT_GT(j["gpus"].get<int>(), 300 * 6);  // mostly 8-GPU nodes
  EXPECT_EQ(j["placed"].get<int>() + j["failed"].get<int>(), 2500);
  EXPECT_GT(j["placed"].get<int>(), 1000);
  for (const char* key : {"placements_per_s", "p50_decision_us", "p99_decision_us",
                          "max_decision_us", "peak_rss_mb", "elapsed_s"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_LE(j["p50_decision_us"].get<double>(), j["p99_decision_us"].get<double>());
  EXPECT_LE(j["p99_decision_us"].get<double>(), j["max_decision_us"].get<double>());
}

TEST(SimScaleCli, SameSeedSamePlacementsAndFullScanAgrees) {
  const test::TempDir dir;
  for (const char* policy : {"fgd", "best-fit", "gpu-packing", "default"}) {
    const std::vector<std::string> args{"sim",    "scale", "--nodes",  "200",  "--pods", "1800",
                                        "--seed", "7",     "--policy", policy, "--json"};
    const auto a = run_cli(args, dir);
    const auto b = run_cli(args, dir);
    auto full_args = args;
    full_args.emplace_back("--full-scan");
    const auto c = run_cli(full_args, dir);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const auto ja = parse_json(a.out);
    const auto jb = parse_json(b.out);
    const auto jc = parse_json(c.out);
    EXPECT_EQ(ja["placement_digest"], jb["placement_digest"]) << policy;
    EXPECT_EQ(ja["placement_digest"], jc["placement_digest"]) << policy;
    EXPECT_EQ(ja["placed"], jc["placed"]) << policy;
    EXPECT_EQ(jc["scan"], "full");
  }
  // The default policy, whatever it resolves to, takes the same path.
  const auto dflt = run_cli(
      {"sim", "scale", "--nodes", "200", "--pods", "1800", "--policy", "default", "--json"}, dir);
  ASSERT_EQ(dflt.exit_code, 0) << dflt.err;
  EXPECT_EQ(parse_json(dflt.out)["policy"], "default");
  EXPECT_EQ(parse_json(dflt.out)["placed"].get<int>() + parse_json(dflt.out)["failed"].get<int>(),
            1800);
  // Another seed is another cluster, workload and ranking.
  const auto d =
      run_cli({"sim", "scale", "--nodes", "200", "--pods", "1800", "--seed", "8", "--json"}, dir);
  const auto e =
      run_cli({"sim", "scale", "--nodes", "200", "--pods", "1800", "--seed", "7", "--json"}, dir);
  EXPECT_NE(parse_json(d.out)["placement_digest"], parse_json(e.out)["placement_digest"]);
}

TEST(SimScaleCli, ReadableSummary) {
  const test::TempDir dir;
  const auto r = run_cli({"sim", "scale", "--nodes", "50", "--pods", "100"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sim scale: 50 nodes"));
  EXPECT_THAT(r.out, HasSubstr("placements/s"));
  EXPECT_THAT(r.out, HasSubstr("p99"));
  EXPECT_THAT(r.out, HasSubstr("peak RSS"));
}

TEST(SimScaleCli, BadArgumentsExitTwoWithOneLine) {
  const test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--nodes", "0", "--pods", "10"}, "--nodes must be between 1 and"},
      {{"--nodes", "2000000", "--pods", "10"}, "--nodes must be between 1 and"},
      {{"--nodes", "10", "--pods", "0"}, "--pods must be between 1 and"},
      {{"--nodes", "10", "--pods", "99999999"}, "--pods must be between 1 and"},
      {{"--nodes", "ten", "--pods", "10"}, "--nodes: 'ten' is not a whole number"},
      {{"--nodes", "-5", "--pods", "10"}, "--nodes: '-5' is not a whole number"},
      {{"--nodes", "10", "--pods", "10", "--seed", "x"}, "--seed: 'x' is not a whole number"},
      {{"--nodes", "10", "--pods", "10", "--policy", "nope"}, "unknown policy 'nope'"},
      {{"--pods", "10"}, "give --nodes N and --pods M"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args{"sim", "scale"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(test::lines_of(r.err).size(), 1U) << r.err;
    EXPECT_THAT(r.out, Not(HasSubstr("placements/s")));
  }
}

// sim fill's JSON without the wall-clock fields.
nlohmann::json without_elapsed(nlohmann::json j) {
  for (auto& run : j["runs"]) run.erase("elapsed_s");
  return j;
}

TEST(SimFillDeterminism, SameJsonWhateverTheThreadCount) {
  const test::TempDir dir;
  const std::vector<std::string> base{
      "sim", "fill", "--json", "--seeds", "42-44", "--policy", "random,best-fit,fgd,default"};
  nlohmann::json reference;
  for (const char* threads : {"1", "2", "3"}) {
    auto args = base;
    args.insert(args.end(), {"--threads", threads});
    const auto r = run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = without_elapsed(parse_json(r.out));
    EXPECT_EQ(j["runs"].size(), 12U);
    if (reference.is_null()) {
      reference = j;
    } else {
      EXPECT_EQ(j, reference) << "--threads " << threads;
    }
  }
}

// Figures of the synthetic default at seed 42 recorded with the full-scan scheduler core before
// the incremental path existed: the score index must not change a single decision.
TEST(SimFillDeterminism, SyntheticDefaultUnchangedByTheIncrementalCore) {
  struct Expected {
    const char* policy;
    std::int64_t used_gpu_milli;
    int failed_pods;
    double alloc_100;
    double alloc_130;
  };
  const std::vector<Expected> expected{
      {"random", 5412510, 2599, 85.81, 87.13},         {"dot-product", 5643990, 2701, 90.62, 90.86},
      {"gpu-clustering", 5646040, 2699, 90.66, 90.89}, {"gpu-packing", 5634970, 2714, 90.48, 90.71},
      {"best-fit", 5780160, 2556, 92.81, 93.05},       {"fgd", 5914380, 2392, 95.01, 95.21},
  };
  const test::TempDir dir;
  const auto r = run_cli({"sim", "fill", "--json", "--seeds", "42", "--policy", "all"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse_json(r.out);
  for (const Expected& e : expected) {
    bool found = false;
    for (const auto& run : j["runs"]) {
      if (run["policy"] != e.policy) continue;
      found = true;
      EXPECT_EQ(run["used_gpu_milli"].get<std::int64_t>(), e.used_gpu_milli) << e.policy;
      EXPECT_EQ(run["failed_pods"].get<int>(), e.failed_pods) << e.policy;
      EXPECT_DOUBLE_EQ(run["alloc"][100].get<double>(), e.alloc_100) << e.policy;
      EXPECT_DOUBLE_EQ(run["alloc"][130].get<double>(), e.alloc_130) << e.policy;
    }
    EXPECT_TRUE(found) << e.policy;
  }
}

}  // namespace
}  // namespace gpuorch
