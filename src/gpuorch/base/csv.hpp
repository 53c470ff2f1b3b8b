#pragma once
// A strict reader for the comma-separated files the field exchanges (openb traces, our own
// outputs): header checked by name, every field validated, every error located to file:line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/base/read_file.hpp"

namespace gpuorch::base {

struct CsvRow {
  std::size_t line = 0;  // 1-based line number in the file
  std::vector<std::string> fields;
};

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
};

// The longest line taken, in bytes (without its line break): openb's lines are under 200 bytes,
// and a longer one is refused as it is read, so a file of one huge line costs no more memory
// than this.
inline constexpr std::size_t kCsvMaxLineBytes = kLineMaxBytes;

// Reads the file line by line (base/read_file.hpp: a regular file of at most kTraceFileMaxBytes).
// Rejects an unreadable, empty or binary file, a line longer than
// kCsvMaxLineBytes, a field holding a control character (tab included; base/text_check.hpp) and a
// row whose field count differs from the header's, each as "path:line: ...".
CsvTable read_csv(const std::string& path);
CsvTable parse_csv(std::string_view text, const std::string& path);

// One field as the reader above takes it back: quoted (quotes doubled) when it holds a comma, a
// quote or a line break, as is otherwise.
std::string csv_field(std::string_view text);

// Field parsers that fail with "path:line: column 'name': ..." on bad values.
std::int64_t parse_nonnegative_int(const CsvTable& table, const CsvRow& row, std::size_t column);

}  // namespace gpuorch::base
