#pragma once
// The calibration file: measured bandwidth and latency per path type between GPUs (NVLink, PCIe,
// same NUMA node, cross-socket; network when measured across hosts) and per collective, for the
// simulator's performance model. Schema: docs/comm.md, "Calibration file".
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/comm/tune.hpp"
#include "gpuorch/topology/path.hpp"

namespace gpuorch::comm {

// "nvlink", "xgmi", "pcie" (PIX, PXB, PHB), "same_numa" (NODE), "cross_socket" (SYS).
std::string path_type(topology::Path p);

// One measured sweep reduced to the model's two numbers, plus the points behind them.
struct Figures {
  double bandwidth_gbps = 0;                     // out-of-place busbw at the largest size
  double latency_us = 0;                         // out-of-place time at the smallest size
  std::size_t bandwidth_at = 0, latency_at = 0;  // bytes
  nlohmann::ordered_json points = nlohmann::ordered_json::array();  // [bytes, busbw, time_us]
};
// From a `gpuorch bench --json` document; throws std::runtime_error when it has no results.
Figures figures_from_bench(const nlohmann::json& bench);

struct PathFigures {
  std::string type;  // path_type()
  std::string link;  // "NV18", "PHB", ...
  int gpu_a = 0, gpu_b = 1;
  std::string forced_by;  // an env setting that forced this path ("NCCL_P2P_DISABLE=1"), or ""
  Figures figures;
};

struct CollectiveFigures {
  std::string collective;
  int ranks = 0;
  Figures figures;  // NCCL's default, first repeat
  // Every setting `tune nccl` ran (the default too), mean over the repeats: what forcing
  // NCCL_ALGO / NCCL_PROTO costs or gains per size (doctor nccl-log --calibration quotes it).
  std::vector<SettingCurve> settings;
};

struct CalibrationMeta {
  std::string host, library, measured_utc, command;
};

nlohmann::ordered_json calibration_json(const CalibrationMeta& meta,
                                        const std::vector<PathFigures>& paths,
                                        const std::vector<CollectiveFigures>& collectives);

}  // namespace gpuorch::comm
