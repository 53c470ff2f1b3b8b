// The timeline report's data and script: what the plots show is in the data files (every
// finished job on the CDF, the per-tick series as steps), and every curve is drawn distinctly.
#include "gpuorch/report/timeline_html.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "gpuorch/report/gnuplot.hpp"
#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::report {
namespace {

using ::testing::HasSubstr;

sim::TimelineResult result(const std::string& policy) {
  sim::TimelineResult r;
  r.policy = policy;
  r.total_gpus = 4;
  // JCTs 1 h, 2 h, 3 h; the fourth job never finished.
  for (int k = 1; k <= 4; ++k) {
    sim::JobOutcome j;
    j.name = fmt::format("j{}", k);
    j.submit = 600;
    j.completion = k < 4 ? 600 + k * 3600 : -1;
    r.jobs.push_back(j);
  }
  // 0 h: 4 GPUs (half their worth), 1 queued; 1 h: 2 GPUs; 2 h: idle until 3 h.
  r.samples = {{0, 4, 2, 1, 2.0}, {3600, 2, 1, 0, 2.0}, {7200, 0, 0, 0, 0}, {10800, 4, 1, 0, 4}};
  return r;
}

// The rows of one data block: lines between "# label" and the blank lines after it.
std::vector<std::string> block(const std::string& data, const std::string& label) {
  std::istringstream in(data);
  std::vector<std::string> rows;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "# " + label) {
      inside = true;
    } else if (inside && line.empty()) {
      break;
    } else if (inside) {
      rows.push_back(line);
    }
  }
  return rows;
}

TEST(TimelineReport, CdfHasEveryFinishedJobAsAFractionOfAllJobs) {
  const auto data = timeline_cdf_data({result("fifo"), result("lasgo")});
  EXPECT_EQ(block(data, "fifo"), (std::vector<std::string>{"1 0.25", "2 0.5", "3 0.75"}));
  EXPECT_EQ(block(data, "lasgo").size(), 3U);
}

TEST(TimelineReport, SeriesAreStepsOfAllocatedGoodputAndQueue) {
  const auto data = timeline_series_data({result("fifo")});
  EXPECT_EQ(block(data, "fifo"),
            (std::vector<std::string>{"0 1 0.5 1", "1 1 0.5 1", "1 0.5 0.5 0", "2 0.5 0.5 0",
                                      "2 0 0 0", "3 0 0 0", "3 1 1 0"}));
}

TEST(TimelineReport, LongSeriesAreMergedIntoTimeWeightedMeans) {
  auto r = result("fifo");
  r.samples.clear();
  // 3000 ticks a minute apart alternating 4 and 0 GPUs: merged three at a time.
  for (int k = 0; k < 3000; ++k) r.samples.push_back({k * 60, k % 2 == 0 ? 4 : 0, 0, 0, 0});
  const auto rows = block(timeline_series_data({r}), "fifo");
  EXPECT_EQ(rows.size(), 2 * kMaxCurvePoints - 1);
  EXPECT_EQ(rows[0], "0 0.666667 0 0");  // 4, 0, 4 GPUs a minute each
  EXPECT_EQ(rows[2], "0.05 0.333333 0 0");
}

TEST(TimelineReport, LabelsNameTheClusterSizeOnlyWhenSizesDiffer) {
  auto big = result("fifo");
  big.total_gpus = 8;
  const auto data = timeline_cdf_data({result("fifo"), big});
  EXPECT_THAT(data, HasSubstr("# fifo, 4 GPUs\n"));
  EXPECT_THAT(data, HasSubstr("# fifo, 8 GPUs\n"));
}

TEST(TimelineReport, EveryCurveHasItsOwnColourDashAndPointsAndTheKeyIsOutside) {
  const auto script = timeline_plot_script({result("fifo"), result("sjf"), result("it's")});
  EXPECT_THAT(script, HasSubstr("set key outside below"));
  for (const char* svg : {"jct_cdf.svg", "utilisation.svg", "goodput.svg", "queue.svg"}) {
    EXPECT_THAT(script, HasSubstr(fmt::format("set output '{}'", svg)));
  }
  for (std::size_t i = 0; i < 3; ++i) EXPECT_THAT(script, HasSubstr(curve_style(i, 3, 3)));
  EXPECT_THAT(script, HasSubstr("title 'it''s'"));
  EXPECT_NE(curve_style(0, 2, 100), curve_style(1, 2, 100));
}

TEST(TimelineReport, WritesThePageThePlotsAndTheirData) {
  if (!test::has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const test::TempDir tmp;
  const std::string dir = tmp.file("report");
  write_timeline_html(dir, {"w.csv", 4, 60}, {"gpuorch sim timeline --workload w.csv", "1", ""},
                      {result("fifo"), result("lasgo")});
  for (const char* f : {"index.html", "jct_cdf.svg", "utilisation.svg", "goodput.svg", "queue.svg",
                        "jct_cdf.dat", "series.dat", "plots.gp"}) {
    EXPECT_GT(std::filesystem::file_size(std::filesystem::path(dir) / f), 0U) << f;
  }
  const std::string html = test::read_text(dir + "/index.html");
  EXPECT_THAT(html, HasSubstr("gpuorch sim timeline --workload w.csv"));
  EXPECT_THAT(html, HasSubstr("gpuorch " GPUORCH_VERSION));
  EXPECT_THAT(html, HasSubstr("<td>fifo</td>"));
  EXPECT_THAT(html, HasSubstr(" UTC"));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir) / "gnuplot.log"));
}

}  // namespace
}  // namespace gpuorch::report
