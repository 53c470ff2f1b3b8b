#pragma once
// What every HTML report shares: escaping, and the page's head, which says how the run was made
// (command line, seeds, gpuorch version, date), so a figure can always be made again.
#include <string>
#include <vector>

namespace gpuorch::report {

// How the run was made, as the reader would type it again.
struct RunHeader {
  std::string command;  // the command line, shell-quoted
  std::string seeds;    // e.g. "42-51 (10 seeds)"
  std::string build;    // which build made it, e.g. "commit 96e53de0a1b2"; may be empty
};

std::string html_escape(const std::string& s);

// From <!doctype> to the header paragraph: title, command, seeds, gpuorch version (and build) and
// the date (UTC) the report was written.
std::string html_page_start(const std::string& title, const RunHeader& header);
std::string html_page_end();

// An HTML table; cells are escaped.
std::string html_table(const std::vector<std::string>& columns,
                       const std::vector<std::vector<std::string>>& rows);

}  // namespace gpuorch::report
