#include "gpuorch/launch/guardian.hpp"

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

#include "gpuorch/base/subprocess.hpp"

namespace gpuorch::launch {
namespace {

// Everything below runs in the forked guardian, whose parent may have had other threads (NVML's,
// the output relay's): raw system calls and static storage only, no allocation, no stdio.

struct Proc {
  pid_t pid;
  pid_t ppid;
  char state;
  unsigned long long start;
};
constexpr int kMaxProcs = 1 << 16;
constexpr int kMaxTracked = 1 << 14;
Proc g_procs[kMaxProcs];
int g_proc_count = 0;
Proc g_tracked[kMaxTracked];  // the agent's descendants, as last seen
int g_tracked_count = 0;
bool g_member[kMaxProcs];

const char* parse_number(const char* p, const char* end, unsigned long long& v) {
  while (p < end && *p == ' ') ++p;
  if (p < end && *p == '-') ++p;  // a negative field (priority) is skipped, never kept
  const char* digits = p;
  v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + static_cast<unsigned>(*p++ - '0');
  return p == digits ? nullptr : p;
}

// /proc/PID/stat: "pid (comm) state ppid ..."; fields counted from the last ')', start is 22nd.
bool read_stat(pid_t pid, Proc& out) {
  char path[32] = "/proc/";
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(pid); v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  int at = 6;
  while (n > 0) path[at++] = digits[--n];
  std::memcpy(path + at, "/stat", 6);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const auto got = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (got <= 0) return false;
  const char* end = buf + got;
  const char* close = nullptr;
  for (const char* p = buf; p < end; ++p) {
    if (*p == ')') close = p;
  }
  if (!close || close + 2 >= end) return false;
  out.pid = pid;
  out.state = close[2];
  const char* p = close + 3;
  unsigned long long v = 0;
  for (int field = 4; field <= 22 && p; ++field) {
    p = parse_number(p, end, v);
    if (field == 4) out.ppid = static_cast<pid_t>(v);
  }
  if (!p) return false;
  out.start = v;
  return true;
}

void scan() {
  g_proc_count = 0;
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[16384];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      off += reclen;
      long pid = 0;
      const char* c = name;
      for (; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      if (*c != '\0' || pid <= 0 || g_proc_count >= kMaxProcs) continue;
      if (read_stat(static_cast<pid_t>(pid), g_procs[g_proc_count])) ++g_proc_count;
    }
  }
  ::close(dir);
}

bool is_member_pid(pid_t pid) {
  for (int i = 0; i < g_proc_count; ++i) {
    if (g_member[i] && g_procs[i].pid == pid) return true;
  }
  return false;
}

bool tracked(const Proc& p) {
  for (int i = 0; i < g_tracked_count; ++i) {
    if (g_tracked[i].pid == p.pid && g_tracked[i].start == p.start) return true;
  }
  return false;
}

// Marks, in the last scan, the processes below `root` (root > 0), or (root 0) those tracked
// and what they started; never this process or `spare`. Returns how many are marked.
int mark(pid_t root, pid_t spare) {
  const pid_t self = ::getpid();
  int count = 0;
  for (int i = 0; i < g_proc_count; ++i) {
    const Proc& p = g_procs[i];
    g_member[i] = root == 0 && p.pid != self && p.pid != spare && tracked(p);
    count += g_member[i] ? 1 : 0;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < g_proc_count; ++i) {
      const Proc& p = g_procs[i];
      if (g_member[i] || p.pid == self || p.pid == spare) continue;
      if ((root > 0 && p.ppid == root) || is_member_pid(p.ppid)) {
        g_member[i] = true;
        grew = true;
        ++count;
      }
    }
  }
  return count;
}

void remember_members() {
  int n = 0;
  for (int i = 0; i < g_proc_count && n < kMaxTracked; ++i) {
    if (g_member[i]) g_tracked[n++] = g_procs[i];
  }
  g_tracked_count = n;
}

void sleep_ms(int ms) { ::poll(nullptr, 0, ms); }

// The agent is gone: stop every tracked process and what they started until none is running
// (a stopped process cannot fork), then kill them all; repeat until /proc shows none alive.
void sweep(pid_t agent) {
  int last_count = -1;
  for (int round = 0; round < 1000; ++round) {
    scan();
    mark(0, agent);
    remember_members();  // reparented ones stay tracked
    int alive = 0, running = 0;
    for (int i = 0; i < g_proc_count; ++i) {
      if (!g_member[i] || g_procs[i].state == 'Z' || g_procs[i].state == 'X') continue;
      ++alive;
      if (g_procs[i].state != 'T' && g_procs[i].state != 't') ++running;
    }
    if (alive == 0) return;
    const bool settled = running == 0 && alive == last_count;
    for (int i = 0; i < g_proc_count; ++i) {
      if (g_member[i]) ::kill(g_procs[i].pid, settled ? SIGKILL : SIGSTOP);
    }
    last_count = alive;
    sleep_ms(5);
  }
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
  // Only the pipe and the cgroup: no socket or output pipe of the agent stays open through us.
  for (int fd = STDERR_FILENO + 1; fd < 4096; ++fd) {
    if (fd != pipe_fd && fd != kill_fd) ::close(fd);
  }
  for (;;) {
    pollfd p{pipe_fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 100);
    if (n > 0) {
      char c;
      const auto got = ::read(pipe_fd, &c, 1);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) break;
    } else if (n < 0 && errno != EINTR) {
      break;
    }
    scan();
    mark(agent, 0);
    remember_members();
  }
  if (kill_fd >= 0) {
    [[maybe_unused]] const auto w = ::write(kill_fd, "1", 1);
  }
  sweep(agent);
  if (cgroup_path[0] != '\0') {
    for (int i = 0; i < 200 && ::rmdir(cgroup_path) != 0 && errno == EBUSY; ++i) sleep_ms(10);
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
  // Its own group: a Ctrl-C to the agent's group leaves it to do its work.
  try {
    pid_ = base::fork_function(base::ProcessGroup::kNewGroup, [&] {
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
