// The shared gnuplot runner and curve styles: a failing script is one clear error, and the fill
// report draws every policy distinguishably (efd's curve used to hide under efd-online's).
#include "gpuorch/report/gnuplot.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "gpuorch/report/fill_html.hpp"
#include "support/outputs.hpp"
#include "support/test_support.hpp"

namespace gpuorch::report {
namespace {

using ::testing::HasSubstr;

TEST(Gnuplot, AFailingScriptIsOneErrorWithGnuplotsComplaint) {
  if (!test::has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const test::TempDir tmp;
  test::write_text(tmp.file("bad.gp"), "set terminal svg\nset output 'x.svg'\nplot nosuch(x)\n");
  try {
    run_gnuplot(tmp.path(), "bad.gp");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("gnuplot failed on the report's bad.gp"));
    EXPECT_THAT(what, HasSubstr("nosuch"));
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "gnuplot.log"));
}

TEST(Gnuplot, CurveStylesDifferInColourDashAndPoints) {
  std::set<std::string> colours, dashes, points;
  for (std::size_t i = 0; i < 5; ++i) {
    const std::string s = curve_style(i, 5, 131);
    colours.insert(s.substr(0, s.find(" dt")));
    dashes.insert(s.substr(s.find(" dt"), 5));
    points.insert(s.substr(s.find(" pt"), 6));
  }
  EXPECT_EQ(colours.size(), 5U);
  EXPECT_EQ(dashes.size(), 5U);
  EXPECT_EQ(points.size(), 5U);
  EXPECT_EQ(gnuplot_quote("efd's"), "'efd''s'");
}

TEST(FillReport, EveryPolicyDrawnDistinctlyBandsUnderLinesKeyOutside) {
  PolicySummary efd, online;
  efd.policy = "efd";
  online.policy = "efd-online";
  const std::string script = fill_plot_script({efd, online});
  EXPECT_THAT(script, HasSubstr("set key outside below"));
  // The style between "with linespoints" and the curve's title.
  const auto line_of = [&](const std::string& title) {
    const auto at = script.find(fmt::format("title '{}'", title));
    const auto from = script.rfind("with linespoints", at);
    return script.substr(from, at - from);
  };
  EXPECT_NE(line_of("efd"), line_of("efd-online"));
  EXPECT_THAT(line_of("efd"), HasSubstr(curve_style(0, 2, 131)));
  // In the allocation plot, both bands come before (under) every line.
  const auto start = script.find("set output 'alloc.svg'");
  const auto alloc = script.substr(start, script.find("set output", start + 1) - start);
  EXPECT_LT(alloc.rfind("filledcurves"), alloc.find("with linespoints"));
  EXPECT_NE(alloc.find("filledcurves"), alloc.rfind("filledcurves"));
}

TEST(FillReport, PageStartsWithHowTheRunWasMadeAndHasEveryPlot) {
  if (!test::has_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  std::vector<sim::FillRun> runs;
  for (const char* policy : {"efd", "efd-online"}) {
    sim::FillRun r;
    r.policy = policy;
    r.seed = 42;
    for (std::size_t x = 0; x < sim::kCurvePoints; ++x) {
      r.curves.alloc[x] = std::min(double(x), 95.0);
      r.curves.frag_amount[x] = 1.0;
      r.curves.frag_ratio[x] = 10.0;
    }
    runs.push_back(r);
  }
  FillMeta meta;
  meta.workload = "openb_pod_list_default";
  meta.gpu_count = 8;
  const test::TempDir tmp;
  const std::string dir = tmp.file("report");
  write_fill_html(dir, meta,
                  {"gpuorch sim fill --seeds 42 --report r", "42 (1 seeds)", "commit 0123456789ab"},
                  runs);
  const std::string html = test::read_text(dir + "/index.html");
  EXPECT_THAT(html, HasSubstr("<pre>gpuorch sim fill --seeds 42 --report r</pre>"));
  EXPECT_THAT(html, HasSubstr("Seeds: 42 (1 seeds)"));
  EXPECT_THAT(html, HasSubstr("gpuorch " GPUORCH_VERSION " (commit 0123456789ab)"));
  EXPECT_THAT(html, HasSubstr(" UTC"));
  EXPECT_LT(html.find("Seeds:"), html.find("<h2>"));  // at the top
  for (const char* svg : {"alloc.svg", "alloc_zoom.svg", "frag_amount.svg", "frag_ratio.svg"}) {
    EXPECT_THAT(test::read_text(dir + "/" + svg), HasSubstr("<svg")) << svg;
  }
  EXPECT_EQ(test::folder_entries(tmp.path()), std::vector<std::string>{"report"});
}

}  // namespace
}  // namespace gpuorch::report
