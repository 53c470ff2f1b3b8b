#pragma once
// The one way a loader reads a file it was given. A path can name anything: /dev/zero (endless),
// a FIFO with no writer (blocks forever), a mounted ConfigMap folder instead of its file (reads as
// empty), or a file far larger than its kind of data. So every loader reads through here: regular
// files only, refused at once otherwise (opened without blocking, then fstat), a size cap chosen
// by what the file is, and a line-length cap for the line-oriented readers. Every refusal names
// the file and the limit. docs/inputs.md ("Limits") lists the caps.
#include <cstddef>
#include <optional>
#include <string>

namespace gpuorch::base {

// The size caps, by kind of file, in one place.
// YAML and JSON configs: the device plugin's and labeller's config, kubeconfigs and the
// certificate, key and token files they name, the kubelet's config, inventories, topology JSON.
inline constexpr std::size_t kConfigFileMaxBytes = std::size_t{16} << 20;
// Data: CSV traces and workloads, application profiles, object lists, recordings.
inline constexpr std::size_t kTraceFileMaxBytes = std::size_t{256} << 20;
// Job output searched for NCCL's lines; read one line at a time, so memory stays a line's.
inline constexpr std::size_t kLogFileMaxBytes = std::size_t{1} << 30;
// One line of a CSV file or a log (openb's lines are under 200 bytes, NCCL's under 1 KiB).
inline constexpr std::size_t kLineMaxBytes = 64 * 1024;

// A limit as messages write it: "16 MiB", "1 GiB", "1000 bytes".
std::string size_text(std::size_t bytes);

// The file's whole text, or nullopt with `problem` set to what follows its name in a message:
// "is a FIFO, not a regular file", "is larger than 16 MiB (the limit)", "cannot be opened: No
// such file or directory". Never blocks, never reads more than max_bytes + 1 bytes.
std::optional<std::string> read_bounded(const std::string& path, std::size_t max_bytes,
                                        std::string& problem);

// As read_bounded, refusing with InputError "<path>: the <what> <problem>".
std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes);

// A file read one line at a time, for readers that keep no more than a line (CSV, logs).
class LineReader {
 public:
  // What to do with a line longer than max_line: refuse the file ("<path>:<N>: line longer than
  // <max_line> bytes"), or skip the line (a log's foreign lines may be anything).
  enum class LongLines { kRefuse, kSkip };

  // Opens the file: refused as read_input_file refuses it.
  LineReader(std::string path, std::string what, std::size_t max_bytes,
             std::size_t max_line = kLineMaxBytes, LongLines long_lines = LongLines::kRefuse);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line, without its "\n" or "\r\n"; false at the end of the file.
  bool next(std::string& line);
  // 1-based number of the line next() gave last.
  [[nodiscard]] std::size_t line_number() const { return line_no_; }
  // Lines skipped as too long (LongLines::kSkip).
  [[nodiscard]] std::size_t skipped() const { return skipped_; }

 private:
  bool fill();
  [[noreturn]] void fail(const std::string& problem) const;

  std::string path_, what_;
  std::size_t max_bytes_, max_line_;
  LongLines long_lines_;
  int fd_ = -1;
  std::string buffer_;
  std::size_t pos_ = 0, end_ = 0, total_ = 0;
  bool eof_ = false;
  std::size_t line_no_ = 0, skipped_ = 0;
};

}  // namespace gpuorch::base
