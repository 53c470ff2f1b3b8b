#pragma once
// Checks on what a CLI run leaves behind: the files in a folder, and whether the HTML reports
// can be drawn here at all.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
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

}  // namespace gpuorch::test
