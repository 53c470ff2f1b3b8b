#include "cli/progress.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace gpuorch::cli {

Progress::Progress(std::string what, bool enabled)
    : what_(std::move(what)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::size_t done, std::size_t total) {
  if (!enabled_ || total == 0) return;
  constexpr int kWidth = 30;
  const auto filled = static_cast<int>(kWidth * done / total);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
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
