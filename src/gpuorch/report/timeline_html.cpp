#include "gpuorch/report/timeline_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/report/gnuplot.hpp"
#include "gpuorch/sim/timeline_metrics.hpp"

namespace gpuorch::report {
namespace fs = std::filesystem;
namespace {

constexpr double kHour = 3600.0;

// The policy, and the cluster size when the results span several (`--gpus` what-if).
std::vector<std::string> curve_labels(const std::vector<sim::TimelineResult>& results) {
  const bool sizes = std::any_of(results.begin(), results.end(), [&](const auto& r) {
    return r.total_gpus != results.front().total_gpus;
  });
  std::vector<std::string> out;
  for (const auto& r : results) {
    out.push_back(sizes ? fmt::format("{}, {} GPUs", r.policy, r.total_gpus) : r.policy);
  }
  return out;
}

struct CdfPoint {
  double jct_h;
  double fraction;
};

std::vector<CdfPoint> cdf_points(const sim::TimelineResult& r) {
  std::vector<double> jct;
  for (const auto& j : r.jobs) {
    if (j.completion >= 0) jct.push_back(double(j.completion - j.submit) / kHour);
  }
  std::sort(jct.begin(), jct.end());
  const double all = double(r.jobs.size());
  std::vector<CdfPoint> out;
  const std::size_t n = jct.size();
  const std::size_t keep = std::min(n, kMaxCurvePoints);
  for (std::size_t k = 0; k < keep; ++k) {
    // Evenly spaced ranks, the first and the last always among them.
    const std::size_t rank = keep == 1 ? n - 1 : k * (n - 1) / (keep - 1);
    out.push_back({jct[rank], double(rank + 1) / all});
  }
  return out;
}

struct SeriesPoint {
  double time_h;
  std::array<double, 3> values;  // allocated fraction, goodput fraction, queued jobs
};

// Samples merged `group` at a time into their mean weighted by how long each held.
std::vector<SeriesPoint> series_points(const sim::TimelineResult& r) {
  const auto& s = r.samples;
  const std::size_t group = (s.size() + kMaxCurvePoints - 1) / kMaxCurvePoints;
  const double gpus = std::max(1, r.total_gpus);
  std::vector<SeriesPoint> out;
  for (std::size_t first = 0; first < s.size(); first += group) {
    const std::size_t last = std::min(first + group, s.size());
    std::array<double, 3> sum{}, plain{};
    double held = 0;
    for (std::size_t i = first; i < last; ++i) {
      const double d = i + 1 < s.size() ? double(s[i + 1].time - s[i].time) : 0;
      const std::array<double, 3> v{s[i].allocated_gpus / gpus, s[i].goodput_gpus / gpus,
                                    double(s[i].queued)};
      for (std::size_t c = 0; c < 3; ++c) {
        sum[c] += d * v[c];
        plain[c] += v[c] / double(last - first);
      }
      held += d;
    }
    if (held > 0) {
      for (double& x : sum) x /= held;
    }
    out.push_back({double(s[first].time) / kHour, held > 0 ? sum : plain});
  }
  return out;
}

std::string fraction_text(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::string timeline_cdf_data(const std::vector<sim::TimelineResult>& results) {
  const auto labels = curve_labels(results);
  std::string out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    out += fmt::format("# {}\n", labels[i]);
    for (const auto& p : cdf_points(results[i])) {
      out += fmt::format("{} {}\n", fraction_text(p.jct_h), fraction_text(p.fraction));
    }
    out += "\n\n";
  }
  return out;
}

std::string timeline_series_data(const std::vector<sim::TimelineResult>& results) {
  const auto labels = curve_labels(results);
  std::string out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    out += fmt::format("# {}\n", labels[i]);
    const auto points = series_points(results[i]);
    for (std::size_t k = 0; k < points.size(); ++k) {
      const auto row = [&](double time_h) {
        const auto& v = points[k].values;
        out += fmt::format("{} {} {} {}\n", fraction_text(time_h), fraction_text(v[0]),
                           fraction_text(v[1]), fraction_text(v[2]));
      };
      row(points[k].time_h);
      if (k + 1 < points.size()) row(points[k + 1].time_h);
    }
    out += "\n\n";
  }
  return out;
}

std::string timeline_plot_script(const std::vector<sim::TimelineResult>& results) {
  const auto labels = curve_labels(results);
  const std::size_t n = results.size();
  std::string s = plot_preamble();
  auto plot = [&](const std::string& file, const std::string& data, int column,
                  const std::vector<std::size_t>& points) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < n; ++i) {
      parts.push_back(fmt::format("'{}' index {} using 1:{} with linespoints {} title {}", data, i,
                                  column, curve_style(i, n, points[i]), gnuplot_quote(labels[i])));
    }
    s += fmt::format("set output '{}'\nplot {}\n", file, fmt::join(parts, ", \\\n     "));
  };
  std::vector<std::size_t> cdf, series;
  for (const auto& r : results) {
    cdf.push_back(cdf_points(r).size());
    series.push_back(2 * series_points(r).size());
  }
  s += "set logscale x\nset xlabel 'job completion time (hours, log scale)'\n"
       "set ylabel 'fraction of jobs finished'\nset yrange [0:1]\n";
  plot("jct_cdf.svg", "jct_cdf.dat", 2, cdf);
  s += "unset logscale x\nset xlabel 'time since the first submission (hours)'\n"
       "set xrange [0:*]\nset ylabel 'allocated GPUs (fraction of the cluster)'\n"
       "set yrange [0:1.05]\n";
  plot("utilisation.svg", "series.dat", 2, series);
  s += "set ylabel 'goodput-weighted GPUs (fraction of the cluster)'\n";
  plot("goodput.svg", "series.dat", 3, series);
  s += "set ylabel 'jobs waiting (submitted, no GPUs)'\nset yrange [0:*]\n";
  plot("queue.svg", "series.dat", 4, series);
  return s;
}

void write_timeline_html(const std::string& dir, const TimelineMeta& meta, const RunHeader& header,
                         const std::vector<sim::TimelineResult>& results) {
  base::write_folder_atomically(dir, [&](const fs::path& staging) {
    base::write_file_atomically((staging / "jct_cdf.dat").string(), timeline_cdf_data(results));
    base::write_file_atomically((staging / "series.dat").string(), timeline_series_data(results));
    base::write_file_atomically((staging / "plots.gp").string(), timeline_plot_script(results));
    run_gnuplot(staging, "plots.gp");
    const auto labels = curve_labels(results);
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto s = sim::summarize(results[i]);
      rows.push_back(
          {labels[i], fmt::format("{}", results[i].total_gpus),
           fmt::format("{} / {}", s.finished, s.jobs), fmt::format("{:.3f}", s.avg_jct_s / kHour),
           fmt::format("{:.3f}", s.median_jct_s / kHour),
           fmt::format("{:.3f}", s.p99_jct_s / kHour), fmt::format("{:.3f}", s.avg_queue_s / kHour),
           fmt::format("{:.2f}", s.makespan_s / kHour), fmt::format("{:.1f}", s.gpu_hours),
           fmt::format("{:.1f} %", 100 * s.utilisation),
           fmt::format("{:.1f} %", 100 * s.goodput_utilisation)});
    }
    std::string html = html_page_start(
        "gpuorch sim timeline: " + fs::path(meta.workload).filename().string(), header);
    html += fmt::format("<p>workload: {}<br>{} jobs; scheduling interval {} s</p>\n",
                        html_escape(meta.workload), meta.jobs, meta.interval);
    html += "<h2>Summary</h2>\n" +
            html_table({"policy", "GPUs", "finished", "avg JCT h", "median JCT h", "p99 JCT h",
                        "avg queue h", "makespan h", "GPU-hours", "utilisation", "goodput"},
                       rows);
    html +=
        "<p>Queue: submission to first GPUs. Utilisation: GPU time held / (GPUs x makespan); "
        "goodput: the same weighted by statistical efficiency.</p>\n"
        "<h2>Job completion times</h2>\n<img src='jct_cdf.svg' width='900'>\n"
        "<h2>Cluster utilisation over time</h2>\n<img src='utilisation.svg' width='900'>\n"
        "<img src='goodput.svg' width='900'>\n"
        "<h2>Queue length over time</h2>\n<img src='queue.svg' width='900'>\n"
        "<p>Data: <a href='jct_cdf.dat'>jct_cdf.dat</a>, <a href='series.dat'>series.dat</a>; "
        "plot script: <a href='plots.gp'>plots.gp</a>.</p>\n" +
        html_page_end();
    base::write_file_atomically((staging / "index.html").string(), html);
  });
}

}  // namespace gpuorch::report
