#pragma once
// The log of gpuorch's long-running programs (scheduler, extender, node-labeller, launch agent,
// exporter, device plugin), in klog's text format, the one kube-scheduler and the kubelet print,
// so the tools that read Kubernetes component logs read ours:
//
//   I1202 10:00:00.123456   12345 scheduler_service.cpp:137] synced: 3 nodes, 12 pods
//
// severity (I info, W warning, E error), month and day, UTC time to the microsecond, process id,
// the source file and line that logged, then the message (docs/cli.md).
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace gpuorch::base {

// Where a line was logged: SourceLocation's file_name() and line(), through the compiler
// builtins both g++ and clang have; clang 14 with libstdc++ 12 (the fuzz build) lacks
// SourceLocation itself.
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          int line = __builtin_LINE()) noexcept {
    return SourceLocation(file, line);
  }
  [[nodiscard]] constexpr const char* file_name() const noexcept { return file_; }
  [[nodiscard]] constexpr unsigned line() const noexcept { return line_; }

 private:
  constexpr SourceLocation(const char* file, int line) noexcept
      : file_(file), line_(line > 0 ? static_cast<unsigned>(line) : 0) {}
  const char* file_;
  unsigned line_;
};

enum class Severity : char { kInfo = 'I', kWarning = 'W', kError = 'E' };

// One log line, newline included. `file` may be a path: only its last part is printed.
std::string klog_line(Severity severity, std::chrono::system_clock::time_point when, long pid,
                      std::string_view file, unsigned line, std::string_view message);

// Writes klog_line(now, this process, `where`) to stderr in one write, so lines of concurrent
// threads never interleave.
void log(Severity severity, std::string_view message,
         SourceLocation where = SourceLocation::current());

inline void log_info(std::string_view message, SourceLocation where = SourceLocation::current()) {
  log(Severity::kInfo, message, where);
}

// Where a library's component sends its lines (the program passes base::log; tests collect).
using LogSink = std::function<void(Severity, const std::string&, SourceLocation)>;

}  // namespace gpuorch::base
