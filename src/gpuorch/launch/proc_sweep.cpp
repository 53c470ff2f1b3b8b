#include "gpuorch/launch/proc_sweep.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

namespace gpuorch::launch::sweep {
namespace {

constexpr int kMaxProcs = 1 << 16;
Proc g_procs[kMaxProcs];
int g_proc_count = 0;
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
  for (unsigned v = static_cast<unsigned>(pid); v > 0; v /= 10)
    digits[n++] = static_cast<char>('0' + v % 10);
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

bool is_member_pid(pid_t pid) {
  for (int i = 0; i < g_proc_count; ++i) {
    if (g_member[i] && g_procs[i].pid == pid) return true;
  }
  return false;
}

bool is_seed(const Proc& p, const Proc* seeds, int seed_count) {
  for (int i = 0; i < seed_count; ++i) {
    if (seeds[i].pid == p.pid && seeds[i].start == p.start) return true;
  }
  return false;
}

bool live(const Proc& p) { return p.state != 'Z' && p.state != 'X'; }

}  // namespace

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

int count() { return g_proc_count; }
const Proc& at(int i) { return g_procs[i]; }
bool marked(int i) { return g_member[i]; }

int mark(pid_t root, pid_t spare, const Proc* seeds, int seed_count) {
  const pid_t self = ::getpid();
  int n = 0;
  for (int i = 0; i < g_proc_count; ++i) {
    const Proc& p = g_procs[i];
    g_member[i] = p.pid != self && p.pid != spare && is_seed(p, seeds, seed_count);
    n += g_member[i] ? 1 : 0;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < g_proc_count; ++i) {
      const Proc& p = g_procs[i];
      if (g_member[i] || p.pid == self || p.pid == spare) continue;
      if ((root > 0 && p.ppid == root) || is_member_pid(p.ppid)) {
        g_member[i] = true;
        grew = true;
        ++n;
      }
    }
  }
  return n;
}

int marked_alive(int* running) {
  int alive = 0, going = 0;
  for (int i = 0; i < g_proc_count; ++i) {
    if (!g_member[i] || !live(g_procs[i])) continue;
    ++alive;
    if (g_procs[i].state != 'T' && g_procs[i].state != 't') ++going;
  }
  if (running) *running = going;
  return alive;
}

void stop_then_kill(void (*remark)()) {
  int last_count = -1;
  for (int round = 0; round < 1000; ++round) {
    remark();
    int running = 0;
    const int alive = marked_alive(&running);
    if (alive == 0) return;
    const bool settled = running == 0 && alive == last_count;
    for (int i = 0; i < g_proc_count; ++i) {
      if (g_member[i]) ::kill(g_procs[i].pid, settled ? SIGKILL : SIGSTOP);
    }
    last_count = alive;
    sleep_ms(5);
  }
}

void close_fds_except(const int* keep, int keep_count) {
  unsigned from = STDERR_FILENO + 1;
  // The kept ones in increasing order, each closing the gap below it.
  for (;;) {
    int next = -1;
    for (int i = 0; i < keep_count; ++i) {
      if (keep[i] >= static_cast<int>(from) && (next < 0 || keep[i] < next)) next = keep[i];
    }
    const unsigned to = next < 0 ? ~0U : static_cast<unsigned>(next) - 1;
    if (from <= to && ::syscall(SYS_close_range, from, to, 0) != 0) {
      // Before Linux 5.9: one by one, up to the descriptor limit.
      rlimit lim{};
      const unsigned max = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (1U << 20)
                               ? static_cast<unsigned>(lim.rlim_cur)
                               : (1U << 20);
      for (unsigned fd = from; fd <= to && fd < max; ++fd) ::close(static_cast<int>(fd));
    }
    if (next < 0) return;
    from = static_cast<unsigned>(next) + 1;
  }
}

void sleep_ms(int ms) { ::poll(nullptr, 0, ms); }

long long now_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

}  // namespace gpuorch::launch::sweep
