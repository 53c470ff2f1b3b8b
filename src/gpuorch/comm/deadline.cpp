#include "gpuorch/comm/deadline.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace gpuorch::comm {

Deadline::Deadline(double seconds)
    : limit_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds))),
      thread_([this] { watch(); }) {}

Deadline::~Deadline() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Deadline::arm(const std::string& what) {
  std::lock_guard lock(mu_);
  armed_ = true;
  what_ = what;
  since_ = std::chrono::steady_clock::now();
}

void Deadline::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
}

void Deadline::watch() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_ || !armed_ || std::chrono::steady_clock::now() - since_ < limit_) continue;
    const double s = std::chrono::duration<double>(limit_).count();
    fmt::print(stderr, "gpuorch bench: -T {:g}: {} did not finish within {:g} s\n", s, what_, s);
    std::fflush(stderr);
    ::_exit(1);
  }
}

}  // namespace gpuorch::comm
