#pragma once
// What the launcher's forked helpers (the guardian, each worker's shim) share: a table of /proc,
// marking the processes below one, and the stop-then-kill sweep that ends them all. These helpers
// are forks of an agent that may have had other threads (NVML's, the output relay's), so all of
// it is raw system calls and static storage: no allocation, no stdio, no locks.
// docs/launch.md, "No orphans".
#include <sys/types.h>

namespace gpuorch::launch::sweep {

struct Proc {
  pid_t pid;
  pid_t ppid;
  char state;                // as in /proc/PID/stat: 'R', 'S', 'T', 'Z', ...
  unsigned long long start;  // clock ticks since boot: pid + start name one process for good
};

// Reads every process from /proc into the table (one that ends meanwhile is left out).
void scan();
int count();
const Proc& at(int i);

// Marks, in the last scan, the `seeds` found there and every process below `root` (root > 0) or
// below a seed; never this process or `spare`. Returns how many are marked.
int mark(pid_t root, pid_t spare, const Proc* seeds = nullptr, int seed_count = 0);
bool marked(int i);
// Live (neither zombie nor dead) marked processes; `running`: of them, those not stopped.
int marked_alive(int* running = nullptr);

// Ends the marked processes and what they start meanwhile: `remark` scans and marks again; each
// round stops (SIGSTOP) every marked process until none runs and the count holds (a stopped
// process cannot fork), then kills them all; until none is alive. `remark` may also reap.
void stop_then_kill(void (*remark)());

// Closes every descriptor from 3 up but `keep` (close_range, or one by one on old kernels).
void close_fds_except(const int* keep, int keep_count);

void sleep_ms(int ms);
// CLOCK_MONOTONIC in milliseconds.
long long now_ms();

}  // namespace gpuorch::launch::sweep
