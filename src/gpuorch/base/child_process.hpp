#pragma once
// Runs one child process (argv[0] a path) with a few environment changes, optionally some text on
// its standard input, and captures its output, killing it after a timeout. `gpuorch tune nccl`
// measures each NCCL setting in a fresh child (NCCL reads NCCL_ALGO / NCCL_PROTO once, when the
// communicator is created); the DRA driver talks to nvidia-smi and to an MPS control daemon,
// whose command interface reads its commands on standard input.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuorch::base {

struct ChildResult {
  int code = -1;  // exit code, or 128 + signal
  bool timed_out = false;
  std::string out, err;
};

// `set`: variables to set; `unset`: variables to remove (an inherited NCCL_ALGO must not leak
// into the default setting). `input` is written to the child's standard input, which is then
// closed (empty: this process's standard input); at most 64 KiB, what a pipe holds, so writing it
// never waits on the child. Throws std::runtime_error when the child cannot be started.
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& set,
                      const std::vector<std::string>& unset, std::chrono::milliseconds timeout,
                      std::string_view input = {});

}  // namespace gpuorch::base
