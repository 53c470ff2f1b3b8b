// typical_pods() against ../shared/openb/typical_pods.csv: the study's target workload recomputed
// from every trace listed there.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/test_support.hpp"

namespace gpuorch::workload {
namespace {

struct Expected {
  std::size_t rank;
  std::int64_t cpu, milli, gpus;
  std::string spec;
  std::int64_t count;
  double weight;
};

TEST(TypicalPodsOpenb, MatchesTheRecomputedListForEveryWorkload) {
  GPUORCH_REQUIRE_OPENB(dir);
  const base::CsvTable table = base::read_csv((dir / "typical_pods.csv").string());
  ASSERT_EQ(table.header.size(), 8U);
  std::map<std::string, std::vector<Expected>> expected;
  for (const auto& row : table.rows) {
    const auto num = [&](std::size_t c) { return base::parse_nonnegative_int(table, row, c); };
    expected[row.fields[0]].push_back(Expected{static_cast<std::size_t>(num(1)), num(2), num(3),
                                               num(4), row.fields[5], num(6),
                                               std::stod(row.fields[7])});
  }
  ASSERT_FALSE(expected.empty());
  int checked = 0;
  for (auto& [workload, rows] : expected) {
    SCOPED_TRACE(workload);
    const auto path = dir / (workload + ".csv");
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " is listed in typical_pods.csv but absent";
      continue;
    }
    const io::PodTrace trace = io::load_openb_pods(path.string());
    const TargetWorkload t = typical_pods(trace.pods);
    std::sort(rows.begin(), rows.end(),
              [](const Expected& a, const Expected& b) { return a.rank < b.rank; });
    ASSERT_EQ(t.classes.size(), rows.size());
    double weights = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE(fmt::format("rank {}", i));
      const TaskClass& c = t.classes[i];
      EXPECT_EQ(rows[i].rank, i);
      EXPECT_EQ(c.cpu_milli, rows[i].cpu);
      EXPECT_EQ(c.gpu_milli, rows[i].milli);
      EXPECT_EQ(c.gpu_count, rows[i].gpus);
      EXPECT_EQ(join_models(c.allowed_models), rows[i].spec);
      EXPECT_EQ(c.count, rows[i].count);
      EXPECT_NEAR(c.weight, rows[i].weight, 1e-5);
      weights += c.weight;
    }
    EXPECT_NEAR(weights, 1.0, 1e-9);
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST(TypicalPodsOpenb, DefaultTraceHas35ClassesAndNoMultiGpuOne) {
  GPUORCH_REQUIRE_OPENB(dir);
  const io::PodTrace trace = io::load_openb_pods((dir / "openb_pod_list_default.csv").string());
  ASSERT_EQ(trace.pods.size(), 8152U);
  const TargetWorkload t = typical_pods(trace.pods);
  ASSERT_EQ(t.classes.size(), 35U);
  std::int64_t kept = 0;
  for (const auto& c : t.classes) {
    EXPECT_LE(c.gpu_count, 1);
    kept += c.count;
  }
  // 95.26 % of the pods (protocol §4).
  EXPECT_NEAR(100.0 * static_cast<double>(kept) / 8152.0, 95.26, 0.01);
  EXPECT_EQ(t.classes[0].cpu_milli, 3152);
  EXPECT_EQ(t.classes[0].gpu_milli, 810);
  EXPECT_EQ(t.classes[0].count, 1047);
  EXPECT_NEAR(t.classes[0].weight, 0.135, 0.001);  // 13.5 % of the kept pods
}

}  // namespace
}  // namespace gpuorch::workload
