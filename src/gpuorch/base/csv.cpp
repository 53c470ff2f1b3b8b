#include "gpuorch/base/csv.hpp"

#include <fmt/format.h>

#include <charconv>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/text_check.hpp"

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

// Only the first bytes: a file that starts as text and turns binary later is caught field by
// field (require_no_control), with its line.
bool looks_binary(std::string_view text) {
  for (const char c : text.substr(0, 8192)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') return true;
  }
  return false;
}

// Builds the table one line at a time, for the in-memory and the streamed reader alike.
class TableBuilder {
 public:
  explicit TableBuilder(const std::string& path) { table_.path = path; }

  void add(std::string_view line) {
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kCsvMaxLineBytes) {
      fail_input(table_.path, line_no_, fmt::format("line longer than {} bytes", kCsvMaxLineBytes));
    }
    if (line.empty()) return;
    auto fields = split_fields(line);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (find_control(fields[i]) == std::string_view::npos) continue;
      const bool named = !table_.header.empty() && i < table_.header.size();
      require_no_control(fields[i], table_.path, line_no_,
                         named ? fmt::format("column '{}'", table_.header[i])
                               : fmt::format("field {}", i + 1));
    }
    if (table_.header.empty()) {
      table_.header = std::move(fields);
      return;
    }
    if (fields.size() != table_.header.size()) {
      fail_input(table_.path, line_no_,
                 fmt::format("expected {} columns ({}), found {}", table_.header.size(),
                             fmt::join(table_.header, ","), fields.size()));
    }
    table_.rows.push_back(CsvRow{line_no_, std::move(fields)});
  }

  CsvTable finish() {
    if (table_.header.empty()) fail_input(table_.path, 0, "empty file (no header line)");
    return std::move(table_);
  }

 private:
  CsvTable table_;
  std::size_t line_no_ = 0;
};

}  // namespace

CsvTable parse_csv(std::string_view text, const std::string& path) {
  if (looks_binary(text)) fail_input(path, 0, "not a text CSV file (binary content)");
  TableBuilder builder(path);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    builder.add(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return builder.finish();
}

CsvTable read_csv(const std::string& path) {
  LineReader in(path, "CSV file", kTraceFileMaxBytes, kCsvMaxLineBytes);
  TableBuilder builder(path);
  std::size_t seen = 0;  // bytes of the file's start checked for binary content
  for (std::string line; in.next(line);) {
    if (seen < 8192 && looks_binary(std::string_view(line).substr(0, 8192 - seen))) {
      fail_input(path, 0, "not a text CSV file (binary content)");
    }
    seen += line.size() + 1;
    builder.add(line);
  }
  return builder.finish();
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
