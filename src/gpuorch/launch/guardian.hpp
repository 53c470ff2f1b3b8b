#pragma once
// The guardian: a process forked by the agent (a session of its own) that outlives it only to
// clean up. It holds the read end of a pipe whose write end only the agent has; when the pipe
// closes (the agent ended, however: even SIGKILL) it kills the run's cgroup and every process it
// last saw below the agent, together with what those started since (stopped first, so none forks
// away while being killed). While the agent lives it only watches /proc, every 100 ms. The
// workers' shims (shim.hpp) end what is below them on their own; the guardian is the back-up for
// what escaped a shim, and the one that removes the cgroup.
// docs/launch.md, "No orphans".
#include <sys/types.h>

#include <string>

namespace gpuorch::launch {

class Guardian {
 public:
  // `cgroup_kill_fd`: the run's cgroup.kill (-1: none); `cgroup_path`: removed once empty.
  // Throws std::runtime_error when it cannot be started.
  Guardian(int cgroup_kill_fd, const std::string& cgroup_path);
  // Closes the pipe and waits for the guardian's sweep (the agent's own sweep ran first).
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int pipe_ = -1;  // the write end
};

}  // namespace gpuorch::launch
