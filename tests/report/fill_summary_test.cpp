#include "gpuorch/report/fill_summary.hpp"

#include <gtest/gtest.h>

namespace gpuorch::report {
namespace {

sim::FillRun run(const std::string& policy, std::optional<double> a100, std::size_t failed) {
  sim::FillRun r;
  r.policy = policy;
  r.curves.alloc[100] = a100;
  r.curves.frag_ratio[100] = a100 ? std::optional<double>(*a100 / 2) : std::nullopt;
  r.failed_pods = failed;
  r.elapsed_s = 1.0;
  return r;
}

TEST(Summarize, GroupsByPolicyInOrderOfFirstRun) {
  const std::vector<sim::FillRun> runs{run("fgd", 95.0, 10), run("random", 80.0, 30),
                                       run("fgd", 96.0, 20), run("fgd", std::nullopt, 30)};
  const auto s = summarize(runs);
  ASSERT_EQ(s.size(), 2U);
  EXPECT_EQ(s[0].policy, "fgd");
  EXPECT_EQ(s[1].policy, "random");
  ASSERT_EQ(s[0].runs.size(), 3U);
  // Means over the runs that have the point; min and max likewise.
  EXPECT_DOUBLE_EQ(*s[0].alloc_mean[100], 95.5);
  EXPECT_DOUBLE_EQ(*s[0].alloc_min[100], 95.0);
  EXPECT_DOUBLE_EQ(*s[0].alloc_max[100], 96.0);
  EXPECT_DOUBLE_EQ(*s[0].frag_ratio_mean[100], 47.75);
  EXPECT_FALSE(s[0].alloc_mean[99].has_value());
  EXPECT_FALSE(s[0].frag_amount_mean[100].has_value());
  EXPECT_DOUBLE_EQ(s[0].failed_pods_mean, 20.0);
  EXPECT_DOUBLE_EQ(s[1].failed_pods_mean, 30.0);
  EXPECT_DOUBLE_EQ(s[1].elapsed_s_mean, 1.0);
}

}  // namespace
}  // namespace gpuorch::report
