#include "gpuorch/report/fill_html.hpp"

#include <fmt/format.h>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/report/gnuplot.hpp"

namespace gpuorch::report {
namespace fs = std::filesystem;

std::string fill_curve_data(const std::vector<PolicySummary>& summaries) {
  std::string out;
  for (const auto& s : summaries) {
    out += fmt::format("# {}\n", s.policy);
    for (int x = 0; x < sim::kCurvePoints; ++x) {
      const auto i = static_cast<std::size_t>(x);
      if (!s.alloc_mean[i]) continue;
      out +=
          fmt::format("{} {} {} {} {} {}\n", x, *s.alloc_mean[i], *s.alloc_min[i], *s.alloc_max[i],
                      s.frag_amount_mean[i].value_or(0), s.frag_ratio_mean[i].value_or(0));
    }
    out += "\n\n";
  }
  return out;
}

std::string fill_plot_script(const std::vector<PolicySummary>& summaries) {
  std::string s = plot_preamble() +
                  "set xlabel 'arrived GPU workload (% of cluster GPU capacity)'\n"
                  "set style fill transparent solid 0.15 noborder\n";
  const std::size_t n = summaries.size();
  auto plot = [&](const std::string& file, const std::string& ylabel, const std::string& yrange,
                  const std::string& xrange, bool band, int column) {
    s += fmt::format("set output '{}'\nset ylabel '{}'\nset yrange {}\nset xrange {}\n", file,
                     ylabel, yrange, xrange);
    std::vector<std::string> parts;
    // Bands first, all under every line; then the lines in policy order (curve_style: the
    // earlier a line, the wider, so none hides another).
    if (band) {
      for (std::size_t p = 0; p < n; ++p) {
        parts.push_back(fmt::format(
            "'curves.dat' index {} using 1:3:4 with filledcurves {} notitle", p, curve_colour(p)));
      }
    }
    for (std::size_t p = 0; p < n; ++p) {
      parts.push_back(fmt::format("'curves.dat' index {} using 1:{} with linespoints {} title {}",
                                  p, column, curve_style(p, n, sim::kCurvePoints),
                                  gnuplot_quote(summaries[p].policy)));
    }
    s += fmt::format("plot {}\n", fmt::join(parts, ", \\\n     "));
  };
  plot("alloc.svg", "GPU allocation (% of capacity)", "[0:100]", "[0:130]", true, 2);
  plot("alloc_zoom.svg", "GPU allocation (% of capacity)", "[80:100]", "[80:130]", true, 2);
  plot("frag_amount.svg", "fragmented GPU (% of capacity)", "[0:*]", "[0:130]", false, 5);
  plot("frag_ratio.svg", "fragmented GPU (% of idle GPU)", "[0:100]", "[0:130]", false, 6);
  return s;
}

void write_fill_html(const std::string& dir, const FillMeta& meta, const RunHeader& header,
                     const std::vector<sim::FillRun>& runs) {
  base::write_folder_atomically(dir, [&](const fs::path& staging) {
    const auto summaries = summarize(runs);
    base::write_file_atomically((staging / "curves.dat").string(), fill_curve_data(summaries));
    base::write_file_atomically((staging / "plots.gp").string(), fill_plot_script(summaries));
    run_gnuplot(staging, "plots.gp");
    std::string html = html_page_start("gpuorch sim fill: " + meta.workload, header);
    if (meta.synthetic) {
      html +=
          "<p><strong>SYNTHETIC workload</strong>: the embedded openb-like cluster and pod mix, "
          "not a real trace.</p>\n";
    }
    html += fmt::format(
        "<p>nodes: {}<br>pods: {}<br>{} runs; the band around each line spans "
        "the seeds' minimum to maximum.</p>\n",
        html_escape(meta.nodes), html_escape(meta.pods), runs.size());
    html +=
        "<h2>GPU allocation</h2>\n<img src='alloc.svg' width='900'>\n"
        "<img src='alloc_zoom.svg' width='900'>\n"
        "<h2>Fragmentation</h2>\n<img src='frag_amount.svg' width='900'>\n"
        "<img src='frag_ratio.svg' width='900'>\n";
    html += fmt::format("<h2>Summary</h2>\n<pre>{}</pre>\n", html_escape(fill_table(meta, runs)));
    html +=
        "<p>Data: <a href='curves.dat'>curves.dat</a>, plot script: "
        "<a href='plots.gp'>plots.gp</a>.</p>\n" +
        html_page_end();
    base::write_file_atomically((staging / "index.html").string(), html);
  });
}

}  // namespace gpuorch::report
