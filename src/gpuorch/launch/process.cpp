#include "gpuorch/launch/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/subprocess.hpp"
#include "gpuorch/launch/shim.hpp"

namespace gpuorch::launch {
namespace {

constexpr int kMpolBind = 2;     // <linux/mempolicy.h> MPOL_BIND
constexpr int kMaxNodes = 1024;  // bits in the node mask we pass
constexpr unsigned long kLongBits = sizeof(unsigned long) * 8;

enum Step : int { kAffinity = 1, kMempolicy = 2, kCgroup = 3 };

// The worker's pid, the shim's first record: written before spawn returns (the shim closes the
// status pipe after it).
pid_t read_started(int fd) {
  bool closed = false;
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  for (;;) {
    if (const auto e = read_shim_event(fd, closed); e && e->kind == ShimEvent::kStarted)
      return e->a;
    if (closed) {
      ::close(fd);
      throw std::runtime_error("worker shim: ended before starting the worker");
    }
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 1000);
  }
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
  if (auto found = base::find_in_path(program)) return *found;
  base::fail_input(fmt::format("{}: program not found in PATH", program));
}

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

Spawned spawn_worker(const SpawnSpec& spec) {
  // What the child's own steps need is built here: after fork only async-signal-safe calls.
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
  int events[2];
  if (::pipe2(events, O_CLOEXEC) != 0) {
    throw std::runtime_error(fmt::format("worker shim: pipe: {}", std::strerror(errno)));
  }
  const ShimSetup shim{spec.lifeline_fd, events[1], spec.stop_grace_ms};
  base::SpawnOptions o;
  o.path = spec.path;
  o.argv = spec.argv;
  o.env = spec.env;
  o.stdout_fd = spec.stdout_fd;
  o.stderr_fd = spec.stderr_fd;
  // The shim's session; it outlives the agent to end what the worker left (no death signal).
  o.group = base::ProcessGroup::kNewSession;
  o.in_child = [&](const base::ChildSteps& steps) {
    // First: whatever the worker starts from here on is in the run's cgroup.
    if (spec.cgroup_procs_fd >= 0 && ::write(spec.cgroup_procs_fd, "0", 1) != 1) {
      steps.failed(kCgroup, errno);
    }
    if (!spec.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      steps.failed(kAffinity, errno);
    }
    if (spec.memory_node >= 0 &&
        ::syscall(SYS_set_mempolicy, kMpolBind, nodemask, kMaxNodes + 1) != 0) {
      steps.failed(kMempolicy, errno);
    }
    // The shim forks the worker here (inheriting all of the above); only the worker returns.
    become_shim(shim);
  };
  base::Spawned child;
  try {
    child = base::spawn(o);
  } catch (const base::SpawnError& e) {
    ::close(events[0]);
    ::close(events[1]);
    base::fail_input(e.what());
  }
  ::close(events[1]);
  Spawned s;
  s.shim = child.pid;
  s.events_fd = events[0];
  s.pid = read_started(events[0]);
  for (const auto& f : child.failed_steps) {
    const char* what = f.step == kAffinity    ? "sched_setaffinity: {} (CPUs not bound)"
                       : f.step == kMempolicy ? "set_mempolicy: {} (memory not bound)"
                                              : "cgroup.procs: {} (not in the run's cgroup)";
    s.warnings.push_back(fmt::format(fmt::runtime(what), std::strerror(f.error)));
  }
  return s;
}

}  // namespace gpuorch::launch
