#include "gpuorch/launch/guardian.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "gpuorch/base/subprocess.hpp"
#include "gpuorch/launch/proc_sweep.hpp"

namespace gpuorch::launch {
namespace {

// Everything below runs in the forked guardian, whose parent may have had other threads:
// raw system calls and static storage only (proc_sweep.hpp).

constexpr int kMaxTracked = 1 << 14;
sweep::Proc g_tracked[kMaxTracked];  // the agent's descendants, as last seen
int g_tracked_count = 0;
pid_t g_agent = 0;

void remember_members() {
  int n = 0;
  for (int i = 0; i < sweep::count() && n < kMaxTracked; ++i) {
    if (sweep::marked(i)) g_tracked[n++] = sweep::at(i);
  }
  g_tracked_count = n;
}

// After the agent's death: what was tracked, and what those started since (reparented ones
// stay tracked).
void remark_tracked() {
  sweep::scan();
  sweep::mark(0, g_agent, g_tracked, g_tracked_count);
  remember_members();
}

// True once the pipe has closed (the agent ended), waiting up to `ms`.
bool agent_gone(int pipe_fd, int ms) {
  pollfd p{pipe_fd, POLLIN, 0};
  const int n = ::poll(&p, 1, ms);
  if (n > 0) {
    char c;
    const auto got = ::read(pipe_fd, &c, 1);
    return got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN);
  }
  return n < 0 && errno != EINTR;
}

int guard(int pipe_fd, int kill_fd, const char* cgroup_path, pid_t agent) {
  ::prctl(PR_SET_NAME, "gpuorch-guard", 0, 0, 0);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::sigaction(sig, &ign, nullptr);
  const int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(null_fd, STDOUT_FILENO);
  }
  // Only the pipe and the cgroup: no socket, output pipe or lifeline of the agent stays open
  // through us.
  g_agent = agent;
  const int keep[] = {pipe_fd, kill_fd};
  sweep::close_fds_except(keep, 2);
  while (!agent_gone(pipe_fd, 100)) {
    sweep::scan();
    sweep::mark(agent, 0);
    // A look taken while the agent was dying may already show its children reparented away
    // (the pipe closes before the kernel reparents them): keep the previous one then.
    if (agent_gone(pipe_fd, 0)) break;
    remember_members();
  }
  if (kill_fd >= 0) {
    [[maybe_unused]] const auto w = ::write(kill_fd, "1", 1);
  }
  sweep::stop_then_kill(remark_tracked);
  if (cgroup_path[0] != '\0') {
    for (int i = 0; i < 200 && ::rmdir(cgroup_path) != 0 && errno == EBUSY; ++i)
      sweep::sleep_ms(10);
  }
  return 0;
}

}  // namespace

Guardian::Guardian(int cgroup_kill_fd, const std::string& cgroup_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("guardian: pipe: ") + std::strerror(errno));
  }
  const pid_t agent = ::getpid();
  const char* path = cgroup_path.c_str();
  const int read_end = fds[0];
  // Its own session: a Ctrl-C to the agent's group, or a kill of the agent's whole group or
  // session, leaves it to do its work.
  try {
    pid_ = base::fork_function(base::ProcessGroup::kNewSession, [&] {
      ::close(fds[1]);
      return guard(read_end, cgroup_kill_fd, path, agent);
    });
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[0]);
  pipe_ = fds[1];
}

Guardian::~Guardian() {
  ::close(pipe_);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace gpuorch::launch
