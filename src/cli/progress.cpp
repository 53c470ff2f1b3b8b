#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace gpuorch::cli {

Progress::Progress(std::string what, bool enabled)
    : what_(std::move(what)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

Progress::Progress(std::string what) : Progress(std::move(what), ::isatty(STDERR_FILENO) != 0) {}

void Progress::update(std::size_t done, std::size_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const auto filled = static_cast<int>(kWidth * done / total);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  fmt::print(stderr, "\r{} [{:=<{}}{:<{}}] {}/{} {:.1f}s", what_, "", filled, "", kWidth - filled,
             done, total, elapsed);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) fmt::print(stderr, "\n");
  drawn_ = false;
}

}  // namespace gpuorch::cli
