#include "gpuorch/launch/shim.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpuorch/launch/proc_sweep.hpp"

namespace gpuorch::launch {
namespace {

// Everything in this namespace runs in the shim, a fork of an agent that may have had other
// threads: raw system calls and static storage only (proc_sweep.hpp).

pid_t g_self = 0;
pid_t g_worker = 0;
int g_events = -1;
bool g_worker_done = false;
bool g_no_children = false;
volatile sig_atomic_t g_terms = 0;

// Processes already sent SIGTERM while ending politely (pid and start: a reused pid is new).
constexpr int kMaxSignalled = 1 << 14;
sweep::Proc g_signalled[kMaxSignalled];
int g_signalled_count = 0;

extern "C" void on_term(int) { g_terms = g_terms + 1; }
extern "C" void on_child(int) {}

void put(const ShimEvent& e) {
  // The agent may be gone (EPIPE, SIGPIPE ignored): nothing to tell then.
  while (::write(g_events, &e, sizeof e) < 0 && errno == EINTR) {
  }
}

// Reaps every child that has ended (the worker, and the orphans reparented here); reports the
// worker's status.
void reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == g_worker && !g_worker_done) {
        g_worker_done = true;
        put({ShimEvent::kExited, status, 0});
      }
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    g_no_children = pid < 0 && errno == ECHILD;
    return;
  }
}

void remark_subtree() {
  reap();
  sweep::scan();
  sweep::mark(g_self, 0);
}

bool signalled(const sweep::Proc& p) {
  for (int i = 0; i < g_signalled_count; ++i) {
    if (g_signalled[i].pid == p.pid && g_signalled[i].start == p.start) return true;
  }
  return false;
}

// SIGTERM (and SIGCONT, so a stopped one acts on it) to each process below the shim not yet
// sent one.
void terminate_new() {
  remark_subtree();
  for (int i = 0; i < sweep::count(); ++i) {
    const auto& p = sweep::at(i);
    if (!sweep::marked(i) || p.state == 'Z' || p.state == 'X' || signalled(p)) continue;
    ::kill(p.pid, SIGTERM);
    ::kill(p.pid, SIGCONT);
    if (g_signalled_count < kMaxSignalled) g_signalled[g_signalled_count++] = p;
  }
}

// Until the worker has ended and no child is left; returns the shim's exit code.
int watch(int lifeline_fd, int grace_ms) {
  sigset_t wait_mask;
  ::sigprocmask(SIG_SETMASK, nullptr, &wait_mask);
  sigdelset(&wait_mask, SIGCHLD);
  sigdelset(&wait_mask, SIGTERM);
  bool ending = false;
  int killed = -1;
  long long deadline = 0;
  for (;;) {
    reap();
    if (g_worker_done && g_no_children) break;
    if (g_terms > 0 && !ending) {
      ending = true;
      deadline = sweep::now_ms() + grace_ms;
    }
    if (ending && killed < 0) {
      terminate_new();
      // A second SIGTERM: the agent got a second signal and means now.
      if (g_terms > 1 || sweep::now_ms() >= deadline) {
        remark_subtree();
        killed = sweep::marked_alive();
        sweep::stop_then_kill(remark_subtree);
        continue;
      }
    }
    pollfd p{lifeline_fd, POLLIN, 0};
    timespec tick{0, 20 * 1000 * 1000};
    const int n = ::ppoll(&p, 1, ending && killed < 0 ? &tick : nullptr, &wait_mask);
    if (n > 0) {
      // Nobody writes to the lifeline: readable means end-of-file, the agent is gone.
      sweep::stop_then_kill(remark_subtree);
      reap();
      return 0;
    }
  }
  if (ending) put({ShimEvent::kEnded, g_signalled_count, killed < 0 ? 0 : killed});
  return 0;
}

}  // namespace

Lifeline::Lifeline() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("lifeline: pipe: ") + std::strerror(errno));
  }
  read_ = fds[0];
  write_ = fds[1];
}

Lifeline::~Lifeline() {
  ::close(read_);
  ::close(write_);
}

void become_shim(const ShimSetup& s) {
  // Blocked until the shim waits for them (ppoll), so none is missed; the worker unblocks.
  sigset_t block;
  sigemptyset(&block);
  for (const int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, nullptr);
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_child;
  ::sigaction(SIGCHLD, &sa, nullptr);
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  g_self = ::getpid();
  g_events = s.events_fd;
  // fork(2) without glibc's or the sanitizers' fork handlers: they may wait for a lock that
  // another thread of the agent held when the shim was forked.
  const long worker = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (worker == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != g_self) ::_exit(128 + SIGKILL);  // the shim died before prctl
    sa.sa_handler = SIG_DFL;
    for (const int sig : {SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(sig, &sa, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return;
  }
  if (worker < 0) {
    put({ShimEvent::kExited, 127 << 8, 0});  // as if the worker had exited 127
    ::_exit(127);
  }
  g_worker = static_cast<pid_t>(worker);
  ::setpgid(g_worker, g_worker);  // also here: the agent signals the group as soon as it knows it
  put({ShimEvent::kStarted, g_worker, 0});
  ::prctl(PR_SET_NAME, "gpuorch-shim", 0, 0, 0);
  // Neither the worker's output pipes nor any descriptor of the agent (the guardian's pipe, the
  // lifeline's write end, spawn's status pipe) stays open through the shim.
  const int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(null_fd, fd);
  }
  const int keep[] = {s.lifeline_fd, s.events_fd};
  sweep::close_fds_except(keep, 2);
  ::_exit(watch(s.lifeline_fd, s.grace_ms));
}

std::optional<ShimEvent> read_shim_event(int fd, bool& closed) {
  ShimEvent e;
  for (;;) {
    const auto n = ::read(fd, &e, sizeof e);
    if (n == static_cast<ssize_t>(sizeof e)) return e;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return std::nullopt;
    closed = true;  // end-of-file, or a record cut short (no writer does that)
    return std::nullopt;
  }
}

}  // namespace gpuorch::launch
