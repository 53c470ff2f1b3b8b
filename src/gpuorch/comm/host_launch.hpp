#pragma once
// `gpuorch bench --backend host --np N`: this program started N times on this machine as ranks
// 0..N-1, the way torchrun starts workers (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT; the store is served here, as torchrun's agent store). Only rank 0 keeps stdout.
#include <chrono>
#include <string>
#include <vector>

namespace gpuorch::comm::host {

// Set in the ranks' environment: they run the benchmark instead of launching again.
inline constexpr const char* kLaunchedVar = "GPUORCH_BENCH_LAUNCHED";

// Runs /proc/self/exe with argv as `np` ranks and waits for them. When one
// fails, the others get `grace` to end on their own, then SIGKILL; every child is reaped, and each
// dies with this process (PR_SET_PDEATHSIG). Returns the exit code: the ranks' highest, or 1 when
// one was killed by a signal (said on stderr in one line).
int launch_local(int np, const std::vector<std::string>& argv, std::chrono::milliseconds grace);

// This process's own command line (/proc/self/cmdline).
std::vector<std::string> own_command_line();

}  // namespace gpuorch::comm::host
