#pragma once
// The findings of `gpuorch doctor nccl-log`: what an NCCL_DEBUG=INFO log says went wrong.
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/doctor/nccl_log.hpp"

namespace gpuorch::doctor {

std::vector<Finding> check_nccl_log(const NcclLog& log);

}  // namespace gpuorch::doctor
