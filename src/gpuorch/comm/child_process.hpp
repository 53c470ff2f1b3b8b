#pragma once
// Runs one child process (argv[0] a path) with a few environment changes and captures its
// output, killing it after a timeout. `gpuorch tune nccl` measures each NCCL setting in a fresh
// child: NCCL reads NCCL_ALGO / NCCL_PROTO once, when the communicator is created.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace gpuorch::comm {

struct ChildResult {
  int code = -1;  // exit code, or 128 + signal
  bool timed_out = false;
  std::string out, err;
};

// `set`: variables to set; `unset`: variables to remove (an inherited NCCL_ALGO must not leak
// into the default setting). Throws std::runtime_error when the child cannot be started.
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& set,
                      const std::vector<std::string>& unset, std::chrono::milliseconds timeout);

}  // namespace gpuorch::comm
