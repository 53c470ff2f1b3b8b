#include "gpuorch/base/log.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace gpuorch::base {

std::string klog_line(Severity severity, std::chrono::system_clock::time_point when, long pid,
                      std::string_view file, unsigned line, std::string_view message) {
  const auto slash = file.rfind('/');
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  const auto seconds = std::chrono::floor<std::chrono::seconds>(when);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(when - seconds).count();
  const std::time_t t = std::chrono::system_clock::to_time_t(seconds);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  // klog: Lmmdd hh:mm:ss.uuuuuu, the id right-aligned in 7, then file:line].
  return fmt::format("{}{:%m%d %H:%M:%S}.{:06d} {:>7} {}:{}] {}\n", static_cast<char>(severity),
                     utc, micros, pid, file, line, message);
}

void log(Severity severity, std::string_view message, SourceLocation where) {
  const std::string text = klog_line(severity, std::chrono::system_clock::now(), ::getpid(),
                                     where.file_name(), where.line(), message);
  // One write(2) per line: stderr is unbuffered, and fmt::print would not promise one call.
  std::string_view rest = text;
  while (!rest.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr closed: nowhere to say it
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace gpuorch::base
