#pragma once
// -T in a single process: nccl-tests aborts a test whose GPUs do not finish within T seconds.
// A thread watches the armed section (one size point) and ends the process with one line when it
// overruns: a thread blocked inside NCCL or the driver cannot be unwound.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace gpuorch::comm {

class Deadline {
 public:
  explicit Deadline(double seconds);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  void arm(const std::string& what);
  void disarm();

 private:
  void watch();

  const std::chrono::steady_clock::duration limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;
};

}  // namespace gpuorch::comm
