#include "cli/command_line.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <string_view>

#include "cli/build_info.hpp"

namespace gpuorch::cli {
namespace {

bool plain(const std::string& arg) {
  if (arg.empty()) return false;
  for (const char c : arg) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("_-./:=,@%+").find(c) != std::string_view::npos;
    if (!safe) return false;
  }
  return true;
}

std::string shell_quoted(const std::string& arg) {
  if (plain(arg)) return arg;
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out += ' ';
    out += shell_quoted(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

report::RunHeader report_header(std::string seeds) {
  const BuildInfo& b = build_info();
  return {command_line(), std::move(seeds),
          fmt::format("commit {}{}", b.commit, b.dirty ? "-dirty" : "")};
}

}  // namespace gpuorch::cli
