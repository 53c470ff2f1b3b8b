#pragma once
// Worker output: each line of a worker on the agent's stdout/stderr with a prefix ("[rank<N>]:",
// or torchrun's "[<role><local rank>]:" for the streams named by --tee), and (with a log folder)
// written unprefixed to that rank's stdout.log / stderr.log. torchrun's --redirects/--tee
// values (0 none, 1 stdout, 2 stderr, 3 both; one for every local rank or "LR:V,LR:V") choose
// per stream. One thread polls every worker pipe of the current attempt.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpuorch::launch {

// A --redirects / --tee value: "3" (every local rank) or "0:1,1:2" (local rank: streams, the
// others none). Bit 1 is stdout, bit 2 stderr.
struct StdSpec {
  std::optional<int> all;
  std::map<int, int> by_local_rank;

  [[nodiscard]] int at(int local_rank) const;
};

// Throws base::InputError "FLAG TEXT: ..." on anything else.
StdSpec parse_std_spec(const std::string& flag, const std::string& text);

// --local-ranks-filter: "0,1,2" (empty: every rank). Throws base::InputError.
std::vector<int> parse_local_ranks(const std::string& flag, const std::string& text);

// torchrun's console prefix of a tee'd line: "[<role><local rank>]:", or `line_template`
// (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) with ${role_name}, ${rank} and ${local_rank} replaced.
std::string torchrun_line_prefix(const std::string& line_template, const std::string& role,
                                 int rank, int local_rank);

// Where one stream of a worker goes: the console (with `prefix`) or not; the log file is
// written whenever the worker has a log folder.
struct StreamRoute {
  bool console = true;
  std::string prefix;
};

class OutputRelay {
 public:
  struct WorkerPipes {
    int stdout_write = -1;
    int stderr_write = -1;
  };

  OutputRelay();
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Pipes for one worker (close-on-exec; the child dup2s them onto 1 and 2). `log_dir` empty:
  // no files. Call before start().
  WorkerPipes add_worker(const std::string& log_dir, const StreamRoute& out,
                         const StreamRoute& err);
  // The parent's copies of the write ends, closed once every worker has been started.
  void close_write_ends();
  void start();
  // After the workers are gone: read what is left (at most `wait`), then stop.
  void finish(std::chrono::milliseconds wait);

 private:
  struct Stream;
  void run();

  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<int> write_ends_;
  std::thread thread_;
  int wake_[2] = {-1, -1};
  std::chrono::steady_clock::time_point deadline_{};
  bool stopping_ = false;
};

}  // namespace gpuorch::launch
