#include "gpuorch/base/csv.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "gpuorch/base/error.hpp"

namespace gpuorch::base {
namespace {

std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> fields;
  std::string current;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        current.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        current.push_back(c);
      }
    } else if (c == '"' && current.empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  fields.push_back(std::move(current));
  return fields;
}

bool looks_binary(std::string_view text) {
  std::size_t control = 0;
  for (const char c : text.substr(0, 8192)) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0) return true;
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') ++control;
  }
  return control > 0;
}

}  // namespace

CsvTable parse_csv(std::string_view text, const std::string& path) {
  if (looks_binary(text)) fail_input(path, 0, "not a text CSV file (binary content)");
  CsvTable table;
  table.path = path;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto fields = split_fields(line);
    if (table.header.empty()) {
      table.header = std::move(fields);
      continue;
    }
    if (fields.size() != table.header.size()) {
      fail_input(path, line_no,
                 fmt::format("expected {} columns ({}), found {}", table.header.size(),
                             fmt::join(table.header, ","), fields.size()));
    }
    table.rows.push_back(CsvRow{line_no, std::move(fields)});
  }
  if (table.header.empty()) fail_input(path, 0, "empty file (no header line)");
  return table;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input(path, 0, "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_csv(buffer.str(), path);
}

std::int64_t parse_nonnegative_int(const CsvTable& table, const CsvRow& row, std::size_t column) {
  const std::string& text = row.fields.at(column);
  const std::string& name = table.header.at(column);
  std::int64_t value = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (text.empty()) fail_input(table.path, row.line, fmt::format("column '{}' is empty", name));
  if (ec == std::errc::result_out_of_range) {
    fail_input(table.path, row.line, fmt::format("column '{}': '{}' is out of range", name, text));
  }
  if (ec != std::errc() || ptr != last) {
    fail_input(table.path, row.line,
               fmt::format("column '{}': '{}' is not an integer", name, text));
  }
  if (value < 0) {
    fail_input(table.path, row.line, fmt::format("column '{}': {} is negative", name, value));
  }
  return value;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace gpuorch::base
