#include "gpuorch/report/gnuplot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "gpuorch/base/subprocess.hpp"

namespace gpuorch::report {
namespace {

// Okabe and Ito's palette: distinguishable with the common colour-vision deficiencies.
constexpr std::array<const char*, 7> kColours = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                                 "#e69f00", "#56b4e9", "#000000"};
// Open circle, open square, open triangle, open diamond, open inverted triangle, plus, cross.
constexpr std::array<int, 7> kPoints = {6, 4, 8, 12, 10, 1, 2};
// Solid, dashed, dash-dot, dash-dot-dot, dotted (gnuplot's dash types; dotted, the faintest,
// last).
constexpr std::array<int, 5> kDashes = {1, 2, 4, 5, 3};

// The last line gnuplot wrote that says something.
std::string last_complaint(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t^") != std::string::npos) last = line;
  }
  return last;
}

}  // namespace

std::string find_gnuplot() {
  auto path = base::find_in_path("gnuplot");
  if (!path) {
    throw std::runtime_error(
        "--report needs gnuplot, which is not in PATH (Debian package gnuplot-nox)");
  }
  return *path;
}

void run_gnuplot(const std::filesystem::path& dir, const std::string& script) {
  base::SpawnOptions o;
  o.path = find_gnuplot();
  o.argv = {"gnuplot", script};
  o.cwd = dir.string();
  o.stdin_fd = base::SpawnOptions::kDevNull;
  o.stdout_fd = base::SpawnOptions::kDevNull;
  // Its complaints go to a log beside the script, read back when it fails.
  const std::filesystem::path log = dir / "gnuplot.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot write: {}", log.string(), std::strerror(errno)));
  }
  o.stderr_fd = fd;
  int code = 0;
  try {
    code = base::exit_code_of_status(base::wait(base::spawn(o).pid));
  } catch (const base::SpawnError& e) {
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot start gnuplot: {}", e.what()));
  }
  ::close(fd);
  const std::string complaint = last_complaint(log);
  std::filesystem::remove(log);
  if (code != 0) {
    throw std::runtime_error(fmt::format("gnuplot failed on the report's {} (exit code {}){}{}",
                                         script, code, complaint.empty() ? "" : ": ", complaint));
  }
}

std::string plot_preamble() {
  return "set terminal svg size 900,600 dynamic noenhanced font 'sans,12' background '#ffffff'\n"
         "set encoding utf8\nset grid\nset key outside below center horizontal\n";
}

std::string curve_colour(std::size_t index) {
  return fmt::format("lc rgb '{}'", kColours[index % kColours.size()]);
}

std::string curve_style(std::size_t index, std::size_t count, std::size_t points) {
  const double wider = count > 1 ? double(count - 1 - index) / double(count - 1) : 0.5;
  // Point marks about every eighth of the curve, shifted per curve so marks of curves that
  // coincide do not land on one another.
  const std::size_t every = std::max<std::size_t>(1, points / 8) + index;
  return fmt::format("{} dt {} lw {:.2f} pt {} ps 0.9 pi {}", curve_colour(index),
                     kDashes[index % kDashes.size()], 2.0 + 2.0 * wider,
                     kPoints[index % kPoints.size()], every);
}

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    out.push_back(c);
    if (c == '\'') out.push_back('\'');
  }
  return out + "'";
}

}  // namespace gpuorch::report
