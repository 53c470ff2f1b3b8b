#include "gpuorch/base/subprocess.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>

extern char** environ;

namespace gpuorch::base {
namespace {

// Records on the status pipe, written by the child; the pipe closes (O_CLOEXEC) on exec.
enum Kind : int { kStepFailed = 1, kChdirFailed = 2, kExecFailed = 3 };
struct Record {
  int kind;
  int step;
  int error;
};

void put(int fd, const Record& r) {
  for (;;) {
    const auto n = ::write(fd, &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

// dup2 that also works when `fd` already is `target` (dup2 then leaves O_CLOEXEC set).
void redirect(int fd, int target) {
  if (fd < 0) return;
  if (fd == target) {
    ::fcntl(fd, F_SETFD, 0);
  } else {
    ::dup2(fd, target);
  }
}

[[noreturn]] void run_child(const SpawnOptions& o, int status_fd, pid_t parent, char* const* argv,
                            char* const* envp) {
  if (o.group == ProcessGroup::kNewGroup) ::setpgid(0, 0);
  if (o.group == ProcessGroup::kNewSession) ::setsid();
  if (o.death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, o.death_signal, 0, 0, 0);
    if (::getppid() != parent) ::_exit(128 + o.death_signal);  // it died before prctl
  }
  if (o.reset_signals) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) {
      ::signal(sig, SIG_DFL);
    }
  }
  const bool null_wanted = o.stdin_fd == SpawnOptions::kDevNull ||
                           o.stdout_fd == SpawnOptions::kDevNull ||
                           o.stderr_fd == SpawnOptions::kDevNull;
  const int null_fd = null_wanted ? ::open("/dev/null", O_RDWR) : -1;
  const auto fd_for = [null_fd](int fd) { return fd == SpawnOptions::kDevNull ? null_fd : fd; };
  redirect(fd_for(o.stdin_fd), STDIN_FILENO);
  redirect(fd_for(o.stdout_fd), STDOUT_FILENO);
  redirect(fd_for(o.stderr_fd), STDERR_FILENO);
  if (null_fd > STDERR_FILENO) ::close(null_fd);
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
    put(status_fd, {kChdirFailed, 0, errno});
    ::_exit(127);
  }
  if (o.in_child) o.in_child(ChildSteps(status_fd));
  ::execve(o.path.c_str(), argv, envp);
  put(status_fd, {kExecFailed, 0, errno});
  ::_exit(127);
}

}  // namespace

void ChildSteps::failed(int step, int error) const { put(fd_, {kStepFailed, step, error}); }

Spawned spawn(const SpawnOptions& o) {
  // Everything the child reads is built before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  if (o.argv.empty()) argv.push_back(const_cast<char*>(o.path.c_str()));
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (o.env) {
    for (const auto& e : *o.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  int status[2];
  if (::pipe2(status, O_CLOEXEC) != 0) {
    const int e = errno;
    throw SpawnError(fmt::format("{}: pipe: {}", o.path, std::strerror(e)), e, false);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(status[0]);
    ::close(status[1]);
    throw SpawnError(fmt::format("{}: fork: {}", o.path, std::strerror(e)), e, false);
  }
  if (pid == 0) {
    ::close(status[0]);
    run_child(o, status[1], parent, argv.data(), o.env ? envp.data() : environ);
  }
  ::close(status[1]);
  // Also from the parent: a signal to the group cannot race the child's own setpgid. (Not for
  // a new session: setsid fails in a process that already leads a group.)
  if (o.group == ProcessGroup::kNewGroup) ::setpgid(pid, pid);
  Spawned s;
  s.pid = pid;
  Record r{};
  std::optional<Record> fatal;
  for (;;) {
    const auto n = ::read(status[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    if (r.kind == kStepFailed) {
      s.failed_steps.push_back({r.step, r.error});
    } else {
      fatal = r;
    }
  }
  ::close(status[0]);
  if (fatal) {
    wait(pid);
    const std::string what = fatal->kind == kChdirFailed
                                 ? fmt::format("{}: cannot change directory", o.cwd)
                                 : fmt::format("{}: cannot execute", o.path);
    throw SpawnError(fmt::format("{}: {}", what, std::strerror(fatal->error)), fatal->error, true);
  }
  return s;
}

pid_t fork_function(ProcessGroup group, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    throw SpawnError(fmt::format("fork: {}", std::strerror(e)), e, false);
  }
  if (pid == 0) {
    if (group == ProcessGroup::kNewGroup) ::setpgid(0, 0);
    if (group == ProcessGroup::kNewSession) ::setsid();
    ::_exit(body());
  }
  if (group == ProcessGroup::kNewGroup) ::setpgid(pid, pid);
  return pid;
}

int exit_code_of_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::optional<int> try_wait(pid_t pid) {
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got == 0) return std::nullopt;
    if (errno == EINTR) continue;
    throw std::system_error(errno, std::generic_category(), fmt::format("waitpid {}", pid));
  }
}

int wait(pid_t pid) {
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, 0) == pid) return status;
    if (errno == EINTR) continue;
    throw std::system_error(errno, std::generic_category(), fmt::format("waitpid {}", pid));
  }
}

std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  // A pidfd turns readable when the process ends: no polling loop where the kernel has one.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  for (;;) {
    std::optional<int> status;
    try {
      status = try_wait(pid);
    } catch (...) {
      if (pidfd >= 0) ::close(pidfd);
      throw;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (status || left.count() <= 0) {
      if (pidfd >= 0) ::close(pidfd);
      return status;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
    }
  }
}

bool signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return false;  // -0 and -(-1) would reach far more than one group
  return ::kill(-pgid, sig) == 0 || errno != ESRCH;
}

int stop_group(pid_t pid, std::chrono::milliseconds grace) {
  signal_group(pid, SIGTERM);
  const auto status = wait_for(pid, grace);
  signal_group(pid, SIGKILL);  // the group's other members, or the leader itself
  return status ? *status : wait(pid);
}

std::optional<std::string> find_in_path(const std::string& program) {
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string_view rest = path;
  for (;;) {
    const auto end = rest.find(':');
    const std::string_view dir = rest.substr(0, end);
    const std::string candidate =
        fmt::format("{}/{}", dir.empty() ? std::string_view(".") : dir, program);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (end == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(end + 1);
  }
}

}  // namespace gpuorch::base
