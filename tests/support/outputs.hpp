#pragma once
// Checks on what a CLI run leaves behind: the files in a folder, the cells of a markdown table
// row, the objects of a `--json` output, and whether the HTML reports can be drawn here at all.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace gpuorch::test {

// Every entry of `dir`, sorted: to check that a failed run left nothing behind.
inline std::vector<std::string> folder_entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The HTML reports need gnuplot; their tests skip without it.
inline bool has_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

// The cells of a markdown table row ("| a | b |" -> {"a", "b"}), trimmed.
inline std::vector<std::string> markdown_cells(const std::string& row) {
  std::vector<std::string> out;
  std::size_t at = 1;
  for (std::size_t bar; (bar = row.find('|', at)) != std::string::npos; at = bar + 1) {
    std::string c = row.substr(at, bar - at);
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
    out.push_back(c);
  }
  return out;
}

// A `--json` output of one object per line.
inline std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::istringstream lines(out);
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(nlohmann::json::parse(line));
  return objects;
}

}  // namespace gpuorch::test
