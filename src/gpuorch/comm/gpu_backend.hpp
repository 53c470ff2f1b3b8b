#pragma once
// The GPU backend of `gpuorch bench`: NCCL (libnccl.so.2) and the CUDA driver (libcuda.so.1) loaded
// with dlopen. One process drives Options::gpus devices; under a launcher (RANK / WORLD_SIZE,
// mpirun, srun: launch_env.hpp) every process drives its -g devices and the processes bootstrap
// one NCCL communicator through rank 0 (peer_group.hpp).
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm {

// The environment cannot run the benchmark (no driver, no NCCL, too few GPUs, a peer process that
// never came or died): exit code 1.
class EnvironmentError : public std::runtime_error {
 public:
  explicit EnvironmentError(const std::string& message) : std::runtime_error(message) {}
};

// Runs the sweep; calls on_start once the devices are known, then on_row after every size. With
// several processes, rows carry the mean time over processes and #wrong summed over all ranks,
// at every process; only the reporting process (reporting_process()) should print them.
std::vector<Row> run_gpu(const Options& o, const std::function<void(const RunInfo&)>& on_start,
                         const std::function<void(const Row&)>& on_row);

// False in the processes a launcher started other than rank 0 (they print nothing, as
// nccl-tests under MPI). Throws base::InputError on malformed launcher variables.
bool reporting_process();

// The bounded wait for peers and for progress, in seconds: GPUORCH_PEER_TIMEOUT, default 300.
double peer_timeout_s();

}  // namespace gpuorch::comm
