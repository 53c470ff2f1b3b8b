#pragma once
// A one-line progress bar on stderr, drawn only on a terminal.
#include <chrono>
#include <cstddef>
#include <string>

namespace gpuorch::cli {

class Progress {
 public:
  Progress(std::string what, bool enabled);
  void update(std::size_t done, std::size_t total);
  void finish();

 private:
  std::string what_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gpuorch::cli
