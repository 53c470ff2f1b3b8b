#pragma once
// Worker output, as torchrun --tee shows it: each line of a worker on the agent's stdout/stderr
// prefixed with "[rank<N>]:", and (with --log-dir) written unprefixed to that rank's
// stdout.log / stderr.log. One thread polls every worker pipe of the current attempt.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace gpuorch::launch {

class OutputRelay {
 public:
  struct WorkerPipes {
    int stdout_write = -1;
    int stderr_write = -1;
  };

  explicit OutputRelay(bool to_console = true);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Pipes for one worker (close-on-exec; the child dup2s them onto 1 and 2). `log_dir` empty:
  // no files. Call before start().
  WorkerPipes add_worker(int global_rank, const std::string& log_dir);
  // The parent's copies of the write ends, closed once every worker has been started.
  void close_write_ends();
  void start();
  // After the workers are gone: read what is left (at most `wait`), then stop.
  void finish(std::chrono::milliseconds wait);

 private:
  struct Stream;
  void run();

  bool to_console_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<int> write_ends_;
  std::thread thread_;
  int wake_[2] = {-1, -1};
  std::chrono::steady_clock::time_point deadline_{};
  bool stopping_ = false;
};

}  // namespace gpuorch::launch
