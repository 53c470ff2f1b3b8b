#include "gpuorch/report/timeline_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <iterator>
#include <optional>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/printable.hpp"
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

std::string fraction_text(double v) { return fmt::format("{:.6g}", v); }

struct SeriesPoint {
  double time_h;
  std::vector<double> values;
};

// Samples merged `group` at a time into their mean weighted by how long each held;
// `values(sample)` gives the `width` values of a sample.
template <typename Values>
std::vector<SeriesPoint> merged_points(const std::vector<sim::TimelineSample>& s, std::size_t width,
                                       const Values& values) {
  const std::size_t group = (s.size() + kMaxCurvePoints - 1) / kMaxCurvePoints;
  std::vector<SeriesPoint> out;
  for (std::size_t first = 0; first < s.size(); first += group) {
    const std::size_t last = std::min(first + group, s.size());
    std::vector<double> sum(width), plain(width);
    double held = 0;
    for (std::size_t i = first; i < last; ++i) {
      const double d = i + 1 < s.size() ? double(s[i + 1].time - s[i].time) : 0;
      const std::vector<double> v = values(s[i]);
      for (std::size_t c = 0; c < width; ++c) {
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

// Allocated fraction, goodput fraction, queued jobs.
std::vector<SeriesPoint> series_points(const sim::TimelineResult& r) {
  const double gpus = std::max(1, r.total_gpus);
  return merged_points(r.samples, 3, [&](const sim::TimelineSample& x) {
    return std::vector<double>{x.allocated_gpus / gpus, x.goodput_gpus / gpus, double(x.queued)};
  });
}

// GPUs held by each of `queues` (a queue the result does not know holds none).
std::vector<SeriesPoint> queue_points(const sim::TimelineResult& r,
                                      const std::vector<std::string>& queues) {
  std::vector<std::optional<std::size_t>> column;
  for (const auto& q : queues) {
    const auto it = std::find(r.queues.begin(), r.queues.end(), q);
    column.push_back(it == r.queues.end()
                         ? std::nullopt
                         : std::optional<std::size_t>(std::size_t(it - r.queues.begin())));
  }
  return merged_points(r.samples, queues.size(), [&](const sim::TimelineSample& x) {
    std::vector<double> v(queues.size());
    for (std::size_t q = 0; q < queues.size(); ++q) {
      if (column[q] && *column[q] < x.gpus_by_queue.size()) v[q] = x.gpus_by_queue[*column[q]];
    }
    return v;
  });
}

// Each point's values again just before the next point: steps, not slopes.
std::string step_rows(const std::vector<SeriesPoint>& points) {
  std::string out;
  for (std::size_t k = 0; k < points.size(); ++k) {
    const auto row = [&](double time_h) {
      out += fraction_text(time_h);
      for (const double v : points[k].values) fmt::format_to(std::back_inserter(out), " {:.6g}", v);
      out += '\n';
    };
    row(points[k].time_h);
    if (k + 1 < points.size()) row(points[k + 1].time_h);
  }
  return out;
}

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
    out += step_rows(series_points(results[i]));
    out += "\n\n";
  }
  return out;
}

std::vector<std::string> timeline_queues(const std::vector<sim::TimelineResult>& results) {
  std::vector<std::string> out;
  for (const auto& r : results) out.insert(out.end(), r.queues.begin(), r.queues.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool shows_queues(const std::vector<sim::TimelineResult>& results, const QueueQuotas& quotas) {
  return timeline_queues(results).size() > 1 || !quotas.empty();
}

std::string timeline_queue_data(const std::vector<sim::TimelineResult>& results) {
  const auto labels = curve_labels(results);
  const auto queues = timeline_queues(results);
  std::string out = "# time_h";
  for (const auto& q : queues) fmt::format_to(std::back_inserter(out), " {}", base::printable(q));
  out += "\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    out += fmt::format("# {}\n", labels[i]);
    out += step_rows(queue_points(results[i], queues));
    out += "\n\n";
  }
  return out;
}

std::string timeline_queue_plot_script(const std::vector<sim::TimelineResult>& results,
                                       const QueueQuotas& quotas) {
  const auto labels = curve_labels(results);
  const auto queues = timeline_queues(results);
  // Small multiples: one panel per queue, its own scale, every policy's curve in it.
  const std::size_t cols = std::min<std::size_t>(4, std::max<std::size_t>(1, queues.size()));
  const std::size_t rows = (queues.size() + cols - 1) / cols;
  std::string s = fmt::format(
      "set terminal svg size 1200,{} dynamic noenhanced font 'sans,11' background '#ffffff'\n"
      "set output 'queue_gpus.svg'\nset multiplot layout {},{} title {}\n"
      "unset logscale\nset xrange [0:*]\nset yrange [0:*]\nset xlabel 'hours'\n"
      "set ylabel 'GPUs held'\n",
      std::max<std::size_t>(1, rows) * 280, std::max<std::size_t>(1, rows), cols,
      gnuplot_quote(quotas.empty() ? "GPUs held per queue"
                                   : "GPUs held per queue (dashed: the queue's quota)"));
  for (std::size_t q = 0; q < queues.size(); ++q) {
    const auto quota = quotas.find(queues[q]);
    const std::string name = base::printable(queues[q]);
    s += fmt::format(
        "set title {}\n",
        gnuplot_quote(quota == quotas.end() ? name
                                            : fmt::format("{} (quota {:g})", name, quota->second)));
    s += q == 0 ? "set key at screen 0.99,0.995 right top horizontal font ',9'\n" : "unset key\n";
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < results.size(); ++i) {
      parts.push_back(
          fmt::format("'queue_gpus.dat' index {} using 1:{} with lines {} lw 1.5 title {}", i,
                      q + 2, curve_colour(i), gnuplot_quote(labels[i])));
    }
    if (quota != quotas.end()) {
      parts.push_back(
          fmt::format("{:g} with lines dt 2 lw 1.5 lc rgb '#000000' title 'quota'", quota->second));
    }
    s += fmt::format("plot {}\n", fmt::join(parts, ", \\\n     "));
  }
  s += "unset multiplot\n";
  return s;
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

namespace {

// The per-queue table and the GPUs-per-queue plot.
std::string queue_section(const std::vector<sim::TimelineResult>& results,
                          const QueueQuotas& quotas) {
  const auto labels = curve_labels(results);
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < results.size(); ++i) {
    for (const auto& q : sim::summarize_queues(results[i])) {
      const auto quota = quotas.find(q.queue);
      rows.push_back(
          {labels[i], q.queue, fmt::format("{} / {}", q.finished, q.jobs),
           fmt::format("{:.3f}", q.avg_jct_s / kHour), fmt::format("{:.3f}", q.avg_wait_s / kHour),
           fmt::format("{:.1f}", q.gpu_hours), fmt::format("{:.1f} %", 100 * q.gpu_share),
           quota == quotas.end() ? "" : fmt::format("{:g}", quota->second)});
    }
  }
  return "<h2>Queues</h2>\n" +
         html_table({"policy", "queue", "finished", "avg JCT h", "avg wait h", "GPU-hours",
                     "share of GPU time", "quota GPUs"},
                    rows) +
         "<p>Wait: submission to first GPUs. Share: the queue's part of the GPU time all queues "
         "held.</p>\n<img src='queue_gpus.svg' width='1200'>\n";
}

}  // namespace

void write_timeline_html(const std::string& dir, const TimelineMeta& meta, const RunHeader& header,
                         const std::vector<sim::TimelineResult>& results) {
  const bool queues = shows_queues(results, meta.quota_gpus);
  base::write_folder_atomically(dir, [&](const fs::path& staging) {
    base::write_file_atomically((staging / "jct_cdf.dat").string(), timeline_cdf_data(results));
    base::write_file_atomically((staging / "series.dat").string(), timeline_series_data(results));
    std::string script = timeline_plot_script(results);
    if (queues) {
      base::write_file_atomically((staging / "queue_gpus.dat").string(),
                                  timeline_queue_data(results));
      script += timeline_queue_plot_script(results, meta.quota_gpus);
    }
    base::write_file_atomically((staging / "plots.gp").string(), script);
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
        "<h2>Queue length over time</h2>\n<img src='queue.svg' width='900'>\n";
    if (queues) html += queue_section(results, meta.quota_gpus);
    html += fmt::format(
        "<p>Data: <a href='jct_cdf.dat'>jct_cdf.dat</a>, <a href='series.dat'>series.dat</a>{}; "
        "plot script: <a href='plots.gp'>plots.gp</a>.</p>\n",
        queues ? ", <a href='queue_gpus.dat'>queue_gpus.dat</a>" : "");
    html += html_page_end();
    base::write_file_atomically((staging / "index.html").string(), html);
  });
}

}  // namespace gpuorch::report
