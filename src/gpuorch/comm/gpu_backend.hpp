#pragma once
// The GPU backend of `gpuorch bench`: NCCL (libnccl.so.2) and the CUDA driver (libcuda.so.1) loaded
// with dlopen, one process driving Options::gpus devices.
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm {

// The environment cannot run the benchmark (no driver, no NCCL, too few GPUs): exit code 1.
class EnvironmentError : public std::runtime_error {
 public:
  explicit EnvironmentError(const std::string& message) : std::runtime_error(message) {}
};

// Runs the sweep; calls on_start once the devices are known, then on_row after every size.
std::vector<Row> run_gpu(const Options& o, const std::function<void(const RunInfo&)>& on_start,
                         const std::function<void(const Row&)>& on_row);

}  // namespace gpuorch::comm
