#pragma once
// The processes below this one, found through /proc (parent-pid chains), and ending all of them:
// what a process group cannot reach (a descendant that called setsid, or that a double fork
// left with this process as its subreaper) is still found here.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace gpuorch::base {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';                  // 'R', 'S', 'T', 'Z', ... as in /proc/PID/stat
  unsigned long long start = 0;      // start time in clock ticks since boot: pid + start is unique
  unsigned long long cpu_ticks = 0;  // utime + stime: CPU time used so far, in clock ticks
};

// One /proc/PID/stat (or /proc/PID/task/TID/stat) line into `e` (all but pid); false when it is
// not one.
bool parse_proc_stat(const std::string& text, ProcessEntry& e);

// Every process /proc shows; one that ends while being read is left out.
std::vector<ProcessEntry> list_processes();

// The descendants of `root` in `all` (children, their children, ...), not `root` itself; the
// subtrees of `except` are left out with them.
std::vector<ProcessEntry> descendants_of(pid_t root, const std::vector<ProcessEntry>& all,
                                         const std::vector<pid_t>& except = {});

struct EndedDescendants {
  int found = 0;   // distinct processes that had to be ended
  int killed = 0;  // of them, still there after the grace period (SIGKILL)
  bool all_gone = true;
};

// Ends every descendant of this process but `except` and theirs: SIGTERM (and SIGCONT, so a
// stopped one acts on it), up to `grace` (shortened when `hurry` turns true), then SIGKILL;
// reaps those that are this process's children (a subreaper's orphans are), and repeats until
// /proc shows none, or `limit` has passed (all_gone false).
EndedDescendants end_descendants(std::chrono::milliseconds grace, const std::vector<pid_t>& except,
                                 const std::function<bool()>& hurry = {},
                                 std::chrono::milliseconds limit = std::chrono::seconds(30));

}  // namespace gpuorch::base
