#pragma once
// Each worker's shim: the process the agent forks for a worker, which forks the worker itself and
// stays its parent. It is a child subreaper (PR_SET_CHILD_SUBREAPER) in a session of its own, so
// everything the worker starts stays below it whatever it does (a double-forked `setsid` daemon
// is reparented to the shim, not to the agent or init), and no signal to the agent's process
// group or session reaches it. It reports the worker's pid and wait status to the agent through a
// pipe; it ends its subtree when the agent asks (SIGTERM; a second one: at once), and on its own
// when the agent's lifeline closes (the agent ended, even by SIGKILL). While it lives nothing of
// the worker's can escape, so no /proc snapshot can be out of date.
// docs/launch.md, "No orphans".
#include <sys/types.h>

#include <optional>

namespace gpuorch::launch {

// A pipe nobody writes to: its read end, held by the shims, reads end-of-file once the agent
// has ended, however it ended.
class Lifeline {
 public:
  Lifeline();  // throws std::runtime_error when no pipe can be made
  ~Lifeline();
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;
  [[nodiscard]] int read_fd() const { return read_; }

 private:
  int read_ = -1;
  int write_ = -1;
};

// One record on a shim's pipe (written whole: smaller than PIPE_BUF).
struct ShimEvent {
  enum Kind : int { kStarted = 1, kExited = 2, kEnded = 3 };
  int kind = 0;
  int a = 0;  // kStarted: the worker's pid; kExited: its wait status; kEnded: processes found
  int b = 0;  // kEnded: of them, killed after the grace period
};

struct ShimSetup {
  int lifeline_fd = -1;  // Lifeline::read_fd()
  int events_fd = -1;    // the write end of the shim's pipe
  int grace_ms = 0;      // SIGTERM to SIGKILL when ending its subtree
};

// In the child that base::spawn forked (its own session), after the worker's own setup steps:
// forks the worker, which returns (to exec, with default signals and its own process group);
// the shim never returns. Async-signal-safe.
void become_shim(const ShimSetup& setup);

// The agent's side: the next record on `fd` (non-blocking), nullopt when none is there yet;
// `closed` turns true at end-of-file (the shim has exited).
std::optional<ShimEvent> read_shim_event(int fd, bool& closed);

}  // namespace gpuorch::launch
