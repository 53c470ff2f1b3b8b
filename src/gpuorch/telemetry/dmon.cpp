#include "gpuorch/telemetry/dmon.hpp"

#include <fmt/format.h>

#include <cmath>

namespace gpuorch::telemetry {
namespace {

std::string cell(const std::optional<double>& v) {
  return v ? fmt::format("{:>7.0f}", std::round(*v)) : fmt::format("{:>7}", "-");
}

nlohmann::ordered_json value(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

Rates rates(const GpuSample& now, const GpuSample* before, double seconds) {
  Rates r;
  if (!before || seconds <= 0) return r;
  auto rate = [&](const std::optional<double>& a, const std::optional<double>& b) {
    return a && b && *a >= *b ? std::optional<double>((*a - *b) / seconds / 1e6) : std::nullopt;
  };
  r.nvlink_tx_mbps = rate(now.nvlink_tx_bytes, before->nvlink_tx_bytes);
  r.nvlink_rx_mbps = rate(now.nvlink_rx_bytes, before->nvlink_rx_bytes);
  return r;
}

std::string dmon_header() {
  return "# gpu     pwr   gtemp      sm     mem      fb    mclk    pclk   rxpci   txpci   rxnvl   "
         "txnvl\n"
         "# Idx       W       C       %       %     MiB     MHz     MHz    MB/s    MB/s    MB/s    "
         "MB/s\n";
}

std::string dmon_row(const GpuSample& s, const Rates& r) {
  if (!s.ok) return fmt::format("{:>5}  {}\n", s.gpu, "error: " + s.error);
  auto mbps = [](const std::optional<double>& kbps) {
    return kbps ? std::optional<double>(*kbps / 1000) : std::nullopt;
  };
  return fmt::format("{:>5}{}{}{}{}{}{}{}{}{}{}{}\n", s.gpu, cell(s.power_w), cell(s.temperature_c),
                     cell(s.gpu_util), cell(s.mem_copy_util), cell(s.memory_used_mib),
                     cell(s.mem_clock_mhz), cell(s.sm_clock_mhz), cell(mbps(s.pcie_rx_kbps)),
                     cell(mbps(s.pcie_tx_kbps)), cell(r.nvlink_rx_mbps), cell(r.nvlink_tx_mbps));
}

nlohmann::ordered_json dmon_json(const Round& round, const GpuSample& s, const Rates& r) {
  nlohmann::ordered_json j;
  j["time"] = std::chrono::duration<double>(round.time.time_since_epoch()).count();
  j["gpu"] = s.gpu;
  j["ok"] = s.ok;
  if (!s.ok) j["error"] = s.error;
  j["power_w"] = value(s.power_w);
  j["temperature_c"] = value(s.temperature_c);
  j["gpu_util"] = value(s.gpu_util);
  j["mem_copy_util"] = value(s.mem_copy_util);
  j["memory_used_mib"] = value(s.memory_used_mib);
  j["memory_total_mib"] = value(s.memory_total_mib);
  j["sm_clock_mhz"] = value(s.sm_clock_mhz);
  j["mem_clock_mhz"] = value(s.mem_clock_mhz);
  j["pcie_rx_kbps"] = value(s.pcie_rx_kbps);
  j["pcie_tx_kbps"] = value(s.pcie_tx_kbps);
  j["nvlink_rx_mbps"] = value(r.nvlink_rx_mbps);
  j["nvlink_tx_mbps"] = value(r.nvlink_tx_mbps);
  return j;
}

}  // namespace gpuorch::telemetry
