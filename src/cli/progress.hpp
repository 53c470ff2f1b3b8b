#pragma once
// A one-line progress bar on stderr for the long runs (sim fill, sim scale, sim timeline), drawn
// only when stderr is a terminal: piped or logged output stays free of carriage returns.
#include <chrono>
#include <cstddef>
#include <string>

namespace gpuorch::cli {

class Progress {
 public:
  Progress(std::string what, bool enabled);
  // Enabled when stderr is a terminal.
  explicit Progress(std::string what);
  bool enabled() const { return enabled_; }
  // Redraws at most ten times a second (and at the end), so callers may call it per item.
  void update(std::size_t done, std::size_t total);
  void finish();

 private:
  std::string what_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace gpuorch::cli
