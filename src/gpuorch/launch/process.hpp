#pragma once
// Starting one worker through base::spawn: its shim (shim.hpp: its own session, the worker's
// parent and subreaper, which ends the worker's processes when the agent dies), its output
// pipes; and in the child (before exec) the run's cgroup, the CPU affinity (sched_setaffinity)
// and the memory policy (set_mempolicy MPOL_BIND; a raw syscall, so no libnuma) of its binding.
// The worker has its own process group and dies with its shim (PR_SET_PDEATHSIG).
#include <sys/types.h>

#include <string>
#include <vector>

#include "gpuorch/topology/cpuset.hpp"

namespace gpuorch::launch {

struct SpawnSpec {
  std::string path;               // resolved executable
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // "KEY=VALUE"
  topology::IdSet cpus;           // empty: inherit
  int memory_node = -1;           // -1: inherit
  int stdout_fd = -1;             // write ends, dup2'ed onto 1 and 2
  int stderr_fd = -1;
  int cgroup_procs_fd = -1;  // the run's cgroup.procs, open for writing; -1: none
  int lifeline_fd = -1;      // Lifeline::read_fd() (shim.hpp)
  int stop_grace_ms = 0;     // the shim's SIGTERM to SIGKILL when ending what is left
};

struct Spawned {
  pid_t pid = -1;      // the worker: also its process group id
  pid_t shim = -1;     // the agent's child
  int events_fd = -1;  // the shim's records (ShimEvent), non-blocking; the caller closes it
  // Steps that failed in the child (the worker still runs): "set_mempolicy: ...".
  std::vector<std::string> warnings;
};

// Throws base::InputError when the program cannot be executed (the child reports exec's errno).
Spawned spawn_worker(const SpawnSpec& spec);

// PATH lookup as execvp would do it, done before forking; throws base::InputError
// ("PROGRAM: program not found") when nothing executable matches.
std::string resolve_program(const std::string& program);

// Makes this process the reaper of orphaned descendants, so a worker's children never escape.
void become_subreaper();

}  // namespace gpuorch::launch
