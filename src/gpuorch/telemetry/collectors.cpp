#include "gpuorch/telemetry/collectors.hpp"

#include <fmt/format.h>

#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"

namespace gpuorch::telemetry {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::vector<Collector> parse_collectors(const std::string& text, const std::string& file) {
  std::vector<Collector> out;
  std::istringstream in(text);
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    // The help text is the rest of the line: it may hold commas of its own.
    const auto c1 = t.find(',');
    const auto c2 = c1 == std::string::npos ? c1 : t.find(',', c1 + 1);
    if (c2 == std::string::npos) base::fail_input(file, n, "expected 'FIELD, TYPE, HELP'");
    const std::string name = trim(t.substr(0, c1));
    const std::string type = trim(t.substr(c1 + 1, c2 - c1 - 1));
    const std::string help = trim(t.substr(c2 + 1));
    const DcgmField* field = find_dcgm_field(name);
    if (field == nullptr) {
      base::fail_input(file, n,
                       fmt::format("unknown DCGM field '{}' (the fields gpuorch knows are listed "
                                   "in docs/telemetry.md)",
                                   name));
    }
    if (type != "gauge" && type != "counter" && type != "label") {
      base::fail_input(file, n,
                       fmt::format("type '{}' of {} is not gauge, counter or label", type, name));
    }
    if ((type == "label") != (field->type == "label")) {
      base::fail_input(file, n,
                       type == "label"
                           ? fmt::format("{} is a value, not a label", name)
                           : fmt::format("{} is a label: write '{}, label, …'", name, name));
    }
    Collector c{field, type, help};
    bool replaced = false;  // a field listed twice: the later line wins
    for (auto& o : out) {
      if (o.field == field) {
        o = c;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(std::move(c));
  }
  return out;
}

std::vector<Collector> read_collectors(const std::string& path) {
  return parse_collectors(base::read_input_file(path, "collectors file", base::kConfigFileMaxBytes),
                          path);
}

}  // namespace gpuorch::telemetry
