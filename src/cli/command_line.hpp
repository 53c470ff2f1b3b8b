#pragma once
// This process's command line as a shell would take it back (reports print it so a figure can
// be made again).
#include <string>

namespace gpuorch::cli {

// From /proc/self/cmdline; arguments quoted where a shell would split or expand them.
std::string command_line();

}  // namespace gpuorch::cli
