#pragma once
// A KAI Queue with a GPU quota and limit only, as the job layer's tests make them.
#include <cstdint>
#include <string>
#include <utility>

#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::test {

// `gpu_quota` in GPUs (fractions allowed); `gpu_limit` in GPUs, negative: none.
inline workload::QueueSpec gpu_queue(std::string name, double gpu_quota,
                                     std::int64_t gpu_limit = -1) {
  workload::QueueSpec q;
  q.name = std::move(name);
  q.gpu.quota = static_cast<std::int64_t>(gpu_quota * 1000);
  q.gpu.limit = gpu_limit < 0 ? workload::kUnlimited : gpu_limit * 1000;
  return q;
}

}  // namespace gpuorch::test
