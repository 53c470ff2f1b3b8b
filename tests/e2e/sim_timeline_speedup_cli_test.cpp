// gpuorch sim timeline --speedup-model: its default in --help, bad values as one line and
// exit 2, and both models running pollux and lasgo.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "sim/timeline_support.hpp"
#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {
namespace {

TEST(SimTimelineSpeedupCli, HelpShowsTheDefaultAndAnExample) {
  TempDir tmp;
  const auto r = run_cli({"sim", "timeline", "--help"}, tmp);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--speedup-model"), std::string::npos);
  EXPECT_NE(r.out.find("(default: fitted)"), std::string::npos);
  EXPECT_NE(r.out.find("--speedup-model oracle"), std::string::npos);
}

TEST(SimTimelineSpeedupCli, BadModelIsOneLineAndExitTwo) {
  TempDir tmp;
  for (const char* bad : {"learned", "", "Oracle"}) {
    const auto r = run_cli({"sim", "timeline", "--workload", fixture("timeline/philly_small.csv"),
                            "--speedup-model", bad},
                           tmp);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--speedup-model: '"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("' is not oracle or fitted"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(SimTimelineSpeedupCli, BothModelsRunPolluxAndLasgo) {
  GPUORCH_REQUIRE_POLLUX(dir);
  TempDir tmp;
  double avg[2][2] = {};
  int m = 0;
  for (const char* model : {"oracle", "fitted"}) {
    const auto r = run_cli(
        {"sim", "timeline", "--workload", (dir / "workloads-0.5" / "workload-1.csv").string(),
         "--policy", "pollux,lasgo", "--speedup-model", model, "--limit", "30", "--json"},
        tmp);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto objects = json_lines(r.out);
    ASSERT_EQ(objects.size(), 2U);
    for (int p = 0; p < 2; ++p) {
      EXPECT_EQ(objects[static_cast<std::size_t>(p)]["finished"], 30);
      avg[m][p] = objects[static_cast<std::size_t>(p)]["avg_jct_s"].get<double>();
    }
    ++m;
  }
  // The fitted model sees less than the profiles, so the runs differ.
  EXPECT_TRUE(avg[0][0] != avg[1][0] || avg[0][1] != avg[1][1]);
}

}  // namespace
}  // namespace gpuorch::test
