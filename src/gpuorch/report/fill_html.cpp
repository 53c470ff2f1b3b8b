#include "gpuorch/report/fill_html.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/report/fill_summary.hpp"

namespace gpuorch::report {
namespace fs = std::filesystem;
namespace {

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// One block per policy (gnuplot "index"): x mean min max frag_amount frag_ratio.
std::string curve_data(const std::vector<PolicySummary>& summaries) {
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

std::string plot_script(const std::vector<PolicySummary>& summaries) {
  std::string s =
      "set terminal svg size 900,520 dynamic enhanced font 'sans,12'\n"
      "set key left top\nset grid\nset xlabel 'arrived GPU workload (% of cluster GPU capacity)'\n"
      "set style fill transparent solid 0.2 noborder\n";
  auto plot = [&](const std::string& file, const std::string& ylabel, const std::string& yrange,
                  const std::string& xrange, bool band, int column) {
    s += fmt::format("set output '{}'\nset ylabel '{}'\nset yrange {}\nset xrange {}\n", file,
                     ylabel, yrange, xrange);
    std::vector<std::string> parts;
    for (std::size_t p = 0; p < summaries.size(); ++p) {
      const int color = static_cast<int>(p) + 1;
      if (band) {
        parts.push_back(
            fmt::format("'curves.dat' index {} using 1:3:4 with filledcurves lc {} "
                        "notitle",
                        p, color));
      }
      parts.push_back(
          fmt::format("'curves.dat' index {} using 1:{} with lines lw 2 lc {} title "
                      "'{}'",
                      p, column, color, summaries[p].policy));
    }
    s += fmt::format("plot {}\n", fmt::join(parts, ", \\\n     "));
  };
  plot("alloc.svg", "GPU allocation (% of capacity)", "[0:100]", "[0:130]", true, 2);
  plot("alloc_zoom.svg", "GPU allocation (% of capacity)", "[80:100]", "[80:130]", true, 2);
  plot("frag_amount.svg", "fragmented GPU (% of capacity)", "[0:*]", "[0:130]", false, 5);
  plot("frag_ratio.svg", "fragmented GPU (% of idle GPU)", "[0:100]", "[0:130]", false, 6);
  return s;
}

void run_gnuplot(const fs::path& dir) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start gnuplot (fork failed)");
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    ::execlp("gnuplot", "gnuplot", "plots.gp", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) {
    throw std::runtime_error("--report needs gnuplot (Debian package gnuplot-nox)");
  }
  if (WEXITSTATUS(status) != 0) throw std::runtime_error("gnuplot failed on the report's plots");
}

}  // namespace

void write_fill_html(const std::string& dir, const FillMeta& meta,
                     const std::vector<sim::FillRun>& runs) {
  const fs::path target(dir);
  if (fs::exists(target) && !fs::is_directory(target)) {
    base::fail_input(fmt::format("--report {}: exists and is not a folder", dir));
  }
  const fs::path staging = fs::path(target.string() + fmt::format(".tmp.{}", ::getpid()));
  fs::remove_all(staging);
  fs::create_directories(staging);
  try {
    const auto summaries = summarize(runs);
    base::write_file_atomically((staging / "curves.dat").string(), curve_data(summaries));
    base::write_file_atomically((staging / "plots.gp").string(), plot_script(summaries));
    run_gnuplot(staging);
    std::string html = fmt::format(
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>gpuorch sim fill: {0}</title>\n"
        "<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}"
        "pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style></head><body>\n"
        "<h1>gpuorch sim fill: {0}</h1>\n",
        html_escape(meta.workload));
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
        "<a href='plots.gp'>plots.gp</a>.</p>\n</body></html>\n";
    base::write_file_atomically((staging / "index.html").string(), html);
    if (fs::exists(target)) {
      const fs::path old = fs::path(target.string() + fmt::format(".old.{}", ::getpid()));
      fs::rename(target, old);
      fs::rename(staging, target);
      fs::remove_all(old);
    } else {
      fs::rename(staging, target);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
}

}  // namespace gpuorch::report
