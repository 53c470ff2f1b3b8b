#include "gpuorch/launch/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "gpuorch/base/error.hpp"

namespace gpuorch::launch {
namespace {

constexpr int kMpolBind = 2;     // <linux/mempolicy.h> MPOL_BIND
constexpr int kMaxNodes = 1024;  // bits in the node mask we pass
constexpr unsigned long kLongBits = sizeof(unsigned long) * 8;

enum Stage : int { kAffinity = 1, kMempolicy = 2, kExec = 3 };

// Records the child writes to the status pipe; the pipe closes on a successful exec.
struct Report {
  int stage;
  int error;
};

void report(int fd, int stage, int error) {
  const Report r{stage, error};
  [[maybe_unused]] const auto n = ::write(fd, &r, sizeof r);
}

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.empty())
    base::fail_input("no program given (gpuorch launch [options] -- PROGRAM ARGS)");
  if (program.find('/') != std::string::npos) {
    if (!executable(program)) {
      base::fail_input(fmt::format(
          "{}: {}", program,
          ::access(program.c_str(), F_OK) == 0 ? "not executable" : "program not found"));
    }
    return program;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string_view rest = path;
  for (;;) {
    const auto end = rest.find(':');
    const std::string_view dir = rest.substr(0, end);
    // An empty PATH entry means the current directory, as for execvp.
    const std::string candidate =
        fmt::format("{}/{}", dir.empty() ? std::string_view(".") : dir, program);
    if (executable(candidate)) return candidate;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  base::fail_input(fmt::format("{}: program not found in PATH", program));
}

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

Spawned spawn_worker(const SpawnSpec& spec) {
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (const int c : spec.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  unsigned long nodemask[kMaxNodes / kLongBits] = {};
  if (spec.memory_node >= 0 && spec.memory_node < kMaxNodes) {
    const auto n = static_cast<unsigned long>(spec.memory_node);
    nodemask[n / kLongBits] |= 1UL << (n % kLongBits);
  }
  int status[2];
  if (::pipe2(status, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(status[0]);
    ::close(status[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(status[0]);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(137);  // the agent died between fork and prctl
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
    if (spec.stdout_fd >= 0) ::dup2(spec.stdout_fd, STDOUT_FILENO);
    if (spec.stderr_fd >= 0) ::dup2(spec.stderr_fd, STDERR_FILENO);
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      report(status[1], kAffinity, errno);
    }
    if (spec.memory_node >= 0 &&
        ::syscall(SYS_set_mempolicy, kMpolBind, nodemask, kMaxNodes + 1) != 0) {
      report(status[1], kMempolicy, errno);
    }
    ::execve(spec.path.c_str(), argv.data(), envp.data());
    report(status[1], kExec, errno);
    ::_exit(127);
  }
  ::close(status[1]);
  Spawned s;
  s.pid = pid;
  // Also set from the parent: no signal to the group can race the child's own setpgid.
  ::setpgid(pid, pid);
  Report r{};
  int exec_error = 0;
  for (;;) {
    const auto n = ::read(status[0], &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof r)) break;
    if (r.stage == kAffinity) {
      s.warnings.push_back(
          fmt::format("sched_setaffinity: {} (CPUs not bound)", std::strerror(r.error)));
    } else if (r.stage == kMempolicy) {
      s.warnings.push_back(
          fmt::format("set_mempolicy: {} (memory not bound)", std::strerror(r.error)));
    } else {
      exec_error = r.error;
    }
  }
  ::close(status[0]);
  if (exec_error != 0) {
    int ignored = 0;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    base::fail_input(fmt::format("{}: cannot execute: {}", spec.path, std::strerror(exec_error)));
  }
  return s;
}

}  // namespace gpuorch::launch
