#include "gpuorch/base/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>

namespace gpuorch::base {

// /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses, so the
// fields are counted from the last ')'. utime and stime are fields 14 and 15, the start time 22.
bool parse_proc_stat(const std::string& text, ProcessEntry& e) {
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  e.state = text[close + 2];
  const char* p = text.c_str() + close + 3;
  char* end = nullptr;
  e.ppid = static_cast<pid_t>(std::strtol(p, &end, 10));
  if (end == p) return false;
  p = end;
  e.cpu_ticks = 0;
  for (int field = 5; field < 22; ++field) {  // fields 5..21: only utime and stime are kept
    const unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return false;
    if (field == 14 || field == 15) e.cpu_ticks += v;
    p = end;
  }
  e.start = std::strtoull(p, &end, 10);
  return end != p;
}

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (const dirent* d = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string path = "/proc/" + std::string(d->d_name) + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    const auto n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    ProcessEntry e;
    e.pid = static_cast<pid_t>(pid);
    if (parse_proc_stat(std::string(buf, static_cast<std::size_t>(n)), e)) out.push_back(e);
  }
  ::closedir(dir);
  return out;
}

std::vector<ProcessEntry> descendants_of(pid_t root, const std::vector<ProcessEntry>& all,
                                         const std::vector<pid_t>& except) {
  std::multimap<pid_t, const ProcessEntry*> children;
  for (const auto& e : all) children.emplace(e.ppid, &e);
  std::vector<ProcessEntry> out;
  std::vector<pid_t> todo{root};
  std::set<pid_t> seen{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      const ProcessEntry& c = *it->second;
      if (std::find(except.begin(), except.end(), c.pid) != except.end()) continue;
      if (!seen.insert(c.pid).second) continue;  // a pid loop in a racy read
      out.push_back(c);
      todo.push_back(c.pid);
    }
  }
  return out;
}

EndedDescendants end_descendants(std::chrono::milliseconds grace, const std::vector<pid_t>& except,
                                 const std::function<bool()>& hurry,
                                 std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  const pid_t self = ::getpid();
  EndedDescendants result;
  std::set<std::pair<pid_t, unsigned long long>> seen, termed, killed;
  bool kill_now = false;
  for (;;) {
    const auto found = descendants_of(self, list_processes(), except);
    bool live = false;
    for (const auto& e : found) {
      const auto id = std::make_pair(e.pid, e.start);
      if (seen.insert(id).second) ++result.found;
      if (e.ppid == self) {
        int status = 0;
        if (::waitpid(e.pid, &status, WNOHANG) == e.pid) continue;
      }
      if (e.state == 'Z') continue;  // its parent (also ended here) or this process reaps it
      live = true;
      if (kill_now) {
        if (killed.insert(id).second) ++result.killed;
        ::kill(e.pid, SIGKILL);
      } else if (termed.insert(id).second) {
        ::kill(e.pid, SIGTERM);
        ::kill(e.pid, SIGCONT);
      }
    }
    if (found.empty()) return result;
    if (Clock::now() - started > limit) {
      result.all_gone = false;
      return result;
    }
    if (live && !kill_now && (Clock::now() - started >= grace || (hurry && hurry()))) {
      kill_now = true;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace gpuorch::base
