#pragma once
// The reports' plots come from gnuplot: one runner (started through base::spawn, the project's
// one way to start a program) and one set of curve styles, so every report draws its policies
// the same way and none hides another.
#include <cstddef>
#include <filesystem>
#include <string>

namespace gpuorch::report {

// gnuplot's path; throws std::runtime_error "--report needs gnuplot ..." when it is not in PATH.
// Called before a run's work, so a missing gnuplot costs nothing.
std::string find_gnuplot();

// Runs gnuplot on `script` (a file in `dir`) with `dir` as its working folder. Throws
// std::runtime_error with gnuplot's last complaint when it fails.
void run_gnuplot(const std::filesystem::path& dir, const std::string& script);

// The lines every report's script starts with: SVG output, grid, and the key outside the plot
// area (below it), where it never covers a curve.
std::string plot_preamble();

// Colour, dash type, point type and width of curve `index` of `count`. Curves are drawn in index
// order, each on top of the previous: earlier curves are wider, so a curve that lies exactly on
// another still shows at both edges of the later one, and its dashes and points differ too.
// `points` is how many data points the curve has (for spacing its point marks).
std::string curve_style(std::size_t index, std::size_t count, std::size_t points);

// Only the colour of curve `index` (`lc rgb '#...'`), for what goes with the curve (a band).
std::string curve_colour(std::size_t index);

// `text` as a gnuplot single-quoted string (a quote inside is doubled).
std::string gnuplot_quote(const std::string& text);

}  // namespace gpuorch::report
