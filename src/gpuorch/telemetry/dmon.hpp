#pragma once
// `gpuorch dmon`: rows like `nvidia-smi dmon`, or one JSON object per GPU per round.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gpuorch/telemetry/sampler.hpp"

namespace gpuorch::telemetry {

// Rates over the interval between two rounds (NVLink counters are cumulative).
struct Rates {
  std::optional<double> nvlink_tx_mbps, nvlink_rx_mbps;
};
Rates rates(const GpuSample& now, const GpuSample* before, double seconds);

// The two '#' header lines: names and units.
std::string dmon_header();
std::string dmon_row(const GpuSample& s, const Rates& r);
nlohmann::ordered_json dmon_json(const Round& round, const GpuSample& s, const Rates& r);

}  // namespace gpuorch::telemetry
