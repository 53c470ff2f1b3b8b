// gpuorch tune nccl's arithmetic: the best setting per size against NCCL's default, "beyond noise"
// as non-overlapping repeat ranges, the env file, and the calibration figures from bench JSON.
#include "gpuorch/comm/tune.hpp"

#include <gtest/gtest.h>

#include "gpuorch/comm/bench.hpp"
#include "gpuorch/comm/calibration.hpp"

namespace gpuorch::comm {
namespace {

// settings: 0 default, 1 Ring/LL, 2 Tree/Simple; busbw[setting][size] = base, repeats +- spread
std::vector<TuneSample> samples(const std::vector<std::vector<double>>& base, double spread) {
  std::vector<TuneSample> out;
  const std::vector<std::size_t> sizes{1024, 1 << 20, 1 << 30};
  for (std::size_t s = 0; s < base.size(); ++s) {
    for (int rep = 0; rep < 3; ++rep) {
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        out.push_back({s, rep, sizes[i], base[s][i] + (rep - 1) * spread, 1.0});
      }
    }
  }
  return out;
}

const std::vector<NcclSetting> kSettings = settings_to_sweep({"Ring", "Tree"}, {"LL", "Simple"});

TEST(Tune, SettingsDefaultFirst) {
  ASSERT_EQ(kSettings.size(), 5u);
  EXPECT_EQ(kSettings[0].name(), "default");
  EXPECT_EQ(kSettings[1].name(), "Ring/LL");
  EXPECT_EQ(kSettings[4].name(), "Tree/Simple");
}

TEST(Tune, EachAloneAddsTheSettingsThatForceOnlyOneVariable) {
  const auto s = settings_to_sweep({"Ring", "Tree"}, {"LL", "Simple"}, true);
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s[4].name(), "Tree/Simple");
  EXPECT_EQ(s[5].name(), "Ring/*");
  EXPECT_EQ(s[6].name(), "Tree/*");
  EXPECT_EQ(s[7].name(), "*/LL");
  EXPECT_EQ(s[8].name(), "*/Simple");
  EXPECT_TRUE(s[7].algo.empty());
}

TEST(Tune, SettingCurvesAreTheMeansOverRepeatsOfTheSettingsThatRan) {
  // Three repeats with spread 2 around the base: the mean is the base; Ring/Simple failed.
  const auto curves = setting_curves(
      kSettings, {"", "", "exit code 1", "", ""},
      samples({{10, 100, 300}, {20, 100, 300}, {0, 0, 0}, {9, 90, 200}, {10, 130, 300}}, 2.0));
  ASSERT_EQ(curves.size(), 4u);
  EXPECT_EQ(curves[1].setting.name(), "Ring/LL");
  EXPECT_EQ(curves[2].setting.name(), "Tree/LL");
  ASSERT_EQ(curves[3].points.size(), 3u);
  EXPECT_DOUBLE_EQ(curves[3].points[0][0], 1024.0);
  EXPECT_DOUBLE_EQ(curves[3].points[1][1], 130.0);
  EXPECT_DOUBLE_EQ(curves[3].points[2][2], 1.0);
  Figures f;
  const auto j = calibration_json({"h", "NCCL", "t", "cmd"}, {}, {{"all_reduce", 2, f, curves}});
  const auto& ss = j["collectives"][0]["settings"];
  ASSERT_EQ(ss.size(), 4u);
  EXPECT_EQ(ss[0]["setting"], "default");
  EXPECT_EQ(ss[2]["NCCL_ALGO"], "Tree");
  EXPECT_EQ(ss[2]["NCCL_PROTO"], "LL");
  EXPECT_EQ(ss[3]["points"][1][1], 130.0);
}

TEST(Tune, WithinNoiseTheDefaultStays) {
  // Tree/LL is 1 GB/s better on average, but the repeats overlap (spread 2).
  const auto r = analyze_tuning(
      "all_reduce", kSettings, {},
      samples({{10, 100, 300}, {9, 90, 200}, {8, 80, 250}, {11, 101, 301}, {5, 50, 299}}, 2.0));
  ASSERT_EQ(r.sizes.size(), 3u);
  for (const auto& v : r.sizes) {
    EXPECT_FALSE(v.beats_default) << v.bytes;
  }
  EXPECT_EQ(r.recommended, 0u);
  ASSERT_EQ(r.ranges.size(), 1u);
  EXPECT_EQ(r.ranges[0].from, 1024u);
  EXPECT_EQ(r.ranges[0].to, 1u << 30);
  EXPECT_NEAR(r.noise, 4.0 / 10, 1e-9);  // (12 - 8) / 10 at 1 KiB
  const auto env = tune_env_file({r}, "test");
  EXPECT_NE(env.find("\nNCCL_NVLS_ENABLE=0\n"), std::string::npos);
  EXPECT_EQ(env.find("NCCL_ALGO="), std::string::npos);
  EXPECT_NE(tune_table(r).find("verdict: the default is already best"), std::string::npos);
  EXPECT_NE(env.find("default is best at the measured sizes"), std::string::npos);
}

TEST(Tune, ASettingThatWinsBeyondNoiseAndNeverLosesIsRecommended) {
  const auto r = analyze_tuning(
      "all_reduce", kSettings, {"", "", "", "exit code 1", ""},
      samples({{10, 100, 300}, {20, 100, 300}, {9, 90, 200}, {0, 0, 0}, {10, 130, 300}}, 1.0));
  EXPECT_TRUE(r.sizes[0].beats_default);  // Ring/LL at 1 KiB
  EXPECT_EQ(r.settings[r.sizes[0].best].name(), "Ring/LL");
  EXPECT_TRUE(r.sizes[1].beats_default);   // Tree/Simple at 1 MiB
  EXPECT_FALSE(r.sizes[2].beats_default);  // nobody at 1 GiB
  ASSERT_EQ(r.ranges.size(), 3u);
  // Both win once and never lose beyond noise; the first found is kept.
  EXPECT_EQ(r.settings[r.recommended].name(), "Ring/LL");
  const auto env = tune_env_file({r}, "test");
  EXPECT_NE(env.find("NCCL_ALGO=Ring\nNCCL_PROTO=LL\n"), std::string::npos) << env;
  const auto j = tune_json(r);
  EXPECT_EQ(j["recommended"], "Ring/LL");
  EXPECT_EQ(j["settings"][3]["failed"], "exit code 1");
  EXPECT_NE(tune_table(r).find("# Tree/LL did not run: exit code 1"), std::string::npos);
}

TEST(Tune, ASettingThatLosesSomewhereIsNotRecommended) {
  const auto r = analyze_tuning(
      "all_reduce", kSettings, {},
      samples({{10, 100, 300}, {20, 100, 200}, {9, 90, 200}, {10, 100, 300}, {10, 100, 300}}, 1.0));
  EXPECT_TRUE(r.sizes[0].beats_default);
  EXPECT_EQ(r.recommended, 0u);
  EXPECT_NE(tune_table(r).find("none beats the default at every size"), std::string::npos);
  const auto env = tune_env_file({r}, "test");
  EXPECT_NE(env.find("#   1024..1024 B: NCCL_ALGO=Ring NCCL_PROTO=LL\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("\nNCCL_ALGO="), std::string::npos);
}

TEST(Calibration, FiguresFromBenchJson) {
  Options o;
  o.collective = Collective::sendrecv;
  RunInfo info;
  info.nranks = 2;
  std::vector<Row> rows;
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{1} << 30}) {
    Row r;
    r.size = {bytes, bytes / 4};
    r.out_of_place = make_timing(o.collective, 2, bytes, bytes == 8 ? 10e-6 : 3e-3, -1);
    rows.push_back(r);
  }
  const auto f = figures_from_bench(to_json(o, info, rows));
  EXPECT_DOUBLE_EQ(f.latency_us, 10.0);
  EXPECT_EQ(f.latency_at, 8u);
  EXPECT_NEAR(f.bandwidth_gbps, (1ull << 30) / 3e-3 / 1e9, 1e-9);
  EXPECT_EQ(f.points.size(), 2u);
  const auto j = calibration_json({"h", "NCCL 2.28.9", "2026-11-30T00:00:00Z", "cmd"},
                                  {{"nvlink", "NV18", 0, 1, "", f}}, {{"all_reduce", 2, f, {}}});
  EXPECT_EQ(j["schema"], "gpuorch.calibration/1");
  EXPECT_EQ(j["paths"][0]["type"], "nvlink");
  EXPECT_EQ(j["paths"][0]["gpus"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["collectives"][0]["collective"], "all_reduce");
  EXPECT_EQ(path_type(topology::Path::kPhb), "pcie");
  EXPECT_EQ(path_type(topology::Path::kSys), "cross_socket");
  EXPECT_EQ(path_type(topology::Path::kNode), "same_numa");
  nlohmann::json empty{{"results", nlohmann::json::array()}};
  EXPECT_THROW(figures_from_bench(empty), std::runtime_error);
}

}  // namespace
}  // namespace gpuorch::comm
