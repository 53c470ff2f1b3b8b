#pragma once
// This process's command line as a shell would take it back (reports print it so a figure can
// be made again).
#include <string>

#include "gpuorch/report/html_page.hpp"

namespace gpuorch::cli {

// From /proc/self/cmdline; arguments quoted where a shell would split or expand them.
std::string command_line();

// The head of a run's HTML report: this command line, `seeds` as given, and this build's commit.
report::RunHeader report_header(std::string seeds);

}  // namespace gpuorch::cli
