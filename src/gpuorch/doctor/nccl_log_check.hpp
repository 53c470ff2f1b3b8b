#pragma once
// The findings of `gpuorch doctor nccl-log`: what an NCCL_DEBUG=INFO log says went wrong.
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/doctor/nccl_log.hpp"

namespace gpuorch::doctor {

// One measured path of a `gpuorch tune nccl --calibration` file (docs/comm.md).
struct CalibratedPath {
  std::string type;       // "nvlink", "via_host_memory", ...
  std::string forced_by;  // "NCCL_P2P_DISABLE=1" or ""
  double bandwidth_gbps = 0;
};

// One NCCL_ALGO / NCCL_PROTO setting a calibration file measured for a collective.
struct CalibratedSetting {
  std::string collective;
  int ranks = 0;
  std::string algo, proto;  // "" where NCCL chose
  struct Point {
    double bytes = 0, busbw_gbps = 0;
  };
  std::vector<Point> points;  // by size
};

struct NcclCheckOptions {
  // From --calibration: what switching a fast path off, or forcing an algorithm or protocol,
  // measured on a host, quoted as its cost.
  std::string calibration_file, calibration_host;
  std::vector<CalibratedPath> calibrated_paths;
  std::vector<CalibratedSetting> calibrated_settings;
};

std::vector<Finding> check_nccl_log(const NcclLog& log, const NcclCheckOptions& options = {});

// The paths of a calibration file (schema gpuorch.calibration/1). Throws base::InputError
// "file: what is wrong" when it is not one.
NcclCheckOptions read_calibration(const std::string& path);

}  // namespace gpuorch::doctor
