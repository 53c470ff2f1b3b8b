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
  r.samples = {{0, 4, 2, 1, 2.0, {}},
               {3600, 2, 1, 0, 2.0, {}},
               {7200, 0, 0, 0, 0, {}},
               {10800, 4, 1, 0, 4, {}}};
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
  for (int k = 0; k < 3000; ++k) r.samples.push_back({k * 60, k % 2 == 0 ? 4 : 0, 0, 0, 0, {}});
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
  write_timeline_html(dir, {"w.csv", 4, 60, {}}, {"gpuorch sim timeline --workload w.csv", "1", ""},
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

// Two tenants on 4 GPUs: vc-a holds 3 then 1 GPU, vc-b 1 then 1, then the cluster is idle.
sim::TimelineResult tenants(const std::string& policy) {
  sim::TimelineResult r;
  r.policy = policy;
  r.total_gpus = 4;
  r.queues = {"vc-a", "vc-b"};
  for (int k = 0; k < 3; ++k) {
    sim::JobOutcome j;
    j.name = fmt::format("j{}", k);
    j.queue = k == 0 ? "vc-b" : "vc-a";
    j.submit = 0;
    j.start = 600 * k;
    j.completion = 3600 * (k + 1);
    j.gpu_seconds = 3600;
    r.jobs.push_back(j);
  }
  r.samples = {{0, 4, 2, 0, 4, {3, 1}}, {3600, 2, 2, 0, 2, {1, 1}}, {7200, 0, 0, 0, 0, {0, 0}}};
  return r;
}

TEST(TimelineReport, QueueDataHasTheGpusOfEachQueueAsSteps) {
  const auto data = timeline_queue_data({tenants("fifo"), tenants("tiresias")});
  EXPECT_EQ(data.rfind("# time_h vc-a vc-b\n# fifo\n", 0), 0U) << data;
  EXPECT_EQ(block(data, "fifo"),
            (std::vector<std::string>{"0 3 1", "1 3 1", "1 1 1", "2 1 1", "2 0 0"}));
  EXPECT_EQ(block(data, "tiresias").size(), 5U);
  // A result without a queue the others have holds none of it.
  auto single = result("sjf");
  single.queues = {"vc-a"};
  for (auto& x : single.samples) x.gpus_by_queue = {x.allocated_gpus};
  EXPECT_EQ(block(timeline_queue_data({tenants("fifo"), single}), "sjf")[0], "0 4 0");
}

TEST(TimelineReport, QueuePlotHasAPanelPerQueueAndTheQuotaDashed) {
  EXPECT_TRUE(shows_queues({tenants("fifo")}, {}));
  EXPECT_FALSE(shows_queues({result("fifo")}, {}));
  EXPECT_TRUE(shows_queues({result("fifo")}, {{"default", 4}}));
  const auto script = timeline_queue_plot_script({tenants("fifo"), tenants("lasgo")},
                                                 {{"vc-b", 1.5}, {"elsewhere", 2}});
  EXPECT_THAT(script, HasSubstr("set output 'queue_gpus.svg'"));
  EXPECT_THAT(script, HasSubstr("set multiplot layout 1,2"));
  EXPECT_THAT(script, HasSubstr("set title 'vc-a'\n"));
  EXPECT_THAT(script, HasSubstr("set title 'vc-b (quota 1.5)'\n"));
  EXPECT_THAT(script, HasSubstr("'queue_gpus.dat' index 1 using 1:3 with lines"));
  EXPECT_THAT(script, HasSubstr("1.5 with lines dt 2"));
  EXPECT_EQ(script.find("quota 2"), std::string::npos);  // no panel for a queue without jobs
  EXPECT_THAT(script, HasSubstr("unset multiplot"));
}

TEST(TimelineReport, ThePageHasTheQueuesOnlyWhenThereAreTenants) {
  if (!test::has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const test::TempDir tmp;
  const std::filesystem::path dir = tmp.file("report");
  TimelineMeta meta{"w.csv", 3, 60, {{"vc-a", 3}}};
  write_timeline_html(dir.string(), meta, {"gpuorch sim timeline", "1", ""},
                      {tenants("fifo"), tenants("tiresias")});
  EXPECT_NE(test::read_text((dir / "queue_gpus.svg").string()).find("<svg"), std::string::npos);
  const std::string html = test::read_text((dir / "index.html").string());
  EXPECT_THAT(html, HasSubstr("<h2>Queues</h2>"));
  EXPECT_THAT(html, HasSubstr("<td>vc-b</td>"));
  EXPECT_THAT(html, HasSubstr("queue_gpus.dat"));
  const std::filesystem::path plain = tmp.file("plain");
  write_timeline_html(plain.string(), {"w.csv", 4, 60, {}}, {"gpuorch sim timeline", "1", ""},
                      {result("fifo")});
  EXPECT_FALSE(std::filesystem::exists(plain / "queue_gpus.svg"));
  EXPECT_EQ(test::read_text((plain / "index.html").string()).find("Queues"), std::string::npos);
}

}  // namespace
}  // namespace gpuorch::report
