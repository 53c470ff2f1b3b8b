#pragma once
// The one way gpuorch starts a program: fork, set the child up (process group or session, death
// with the parent, standard streams, working directory, a caller's own steps), exec; and the
// waits and signals that go with it. The launcher's workers, `tune nccl`'s measuring children
// and `bench --np`'s ranks all start here.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuorch::base {

// A step of the child's setup that failed; the child still execs (a binding the kernel refused
// leaves the program running unbound, which the caller reports).
struct ChildStepFailure {
  int step = 0;   // the caller's own number
  int error = 0;  // errno
};

// Given to SpawnOptions::in_child: how the child reports a failed step. Async-signal-safe.
class ChildSteps {
 public:
  explicit ChildSteps(int fd) : fd_(fd) {}
  void failed(int step, int error) const;

 private:
  int fd_;
};

enum class ProcessGroup {
  kInherit,     // the parent's group: terminal signals reach the child with the parent
  kNewGroup,    // its own group (pgid = pid), so the whole group can be signalled
  kNewSession,  // its own session and group (no controlling terminal)
};

struct SpawnOptions {
  std::string path;               // the executable; no PATH lookup
  std::vector<std::string> argv;  // argv[0] first; empty: {path}
  // The whole environment ("KEY=VALUE"); nullopt: this process's.
  std::optional<std::vector<std::string>> env;
  std::string cwd;  // empty: this process's
  // dup2'ed onto 0, 1, 2; -1 keeps this process's; kDevNull opens /dev/null.
  static constexpr int kDevNull = -2;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  ProcessGroup group = ProcessGroup::kInherit;
  int death_signal = 0;  // PR_SET_PDEATHSIG; 0: none. Fires when the spawning *thread* ends.
  // Default dispositions and an empty signal mask in the child (the parent's handlers and its
  // blocked signals must not reach the program).
  bool reset_signals = true;
  // Runs in the child after the steps above, before exec: async-signal-safe calls only (another
  // thread may hold the allocator's lock at the moment of fork). Everything it needs is
  // prepared before spawn.
  std::function<void(const ChildSteps&)> in_child;
};

struct Spawned {
  pid_t pid = -1;  // also the group id with kNewGroup / kNewSession
  std::vector<ChildStepFailure> failed_steps;
};

// The program could not be executed (`in_child`: exec's or chdir's errno), or no child could be
// made (pipe or fork failed: this process is short of resources).
class SpawnError : public std::runtime_error {
 public:
  SpawnError(const std::string& message, int error_number, bool failed_in_child)
      : std::runtime_error(message), error(error_number), in_child(failed_in_child) {}
  int error;
  bool in_child;
};

// PATH lookup as execvp does it (an empty entry is the current folder), done before spawn, which
// takes a path: the first executable regular file named `program`; nullopt when there is none.
// `program` without a '/'.
std::optional<std::string> find_in_path(const std::string& program);

// Returns once the child has exec'ed (or failed to: the child is then reaped and SpawnError
// thrown, naming the path and exec's error).
Spawned spawn(const SpawnOptions& options);

// Runs `body` in a forked child that does not exec (a helper that must outlive or watch this
// process) and returns its pid; the child ends with _exit(body()). Async-signal-safe calls only
// in `body` when other threads may exist. Throws SpawnError when fork fails.
pid_t fork_function(ProcessGroup group, const std::function<int()>& body);

// A wait status: exit code, or 128 + signal for a killed child.
int exit_code_of_status(int status);

// Waits for `pid` (a child) up to `timeout`; the raw wait status, nullopt when it is still
// running. Restarts on EINTR.
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout);
// Waits without a limit.
int wait(pid_t pid);
// The child's status if it has ended, without waiting.
std::optional<int> try_wait(pid_t pid);

// Sends `sig` to the process group `pgid`; false when no such group is left (ESRCH).
bool signal_group(pid_t pgid, int sig);

// SIGTERM to the group, up to `grace` for `pid` to end, then SIGKILL to the group; returns the
// wait status of `pid`.
int stop_group(pid_t pid, std::chrono::milliseconds grace);

}  // namespace gpuorch::base
