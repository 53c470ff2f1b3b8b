#include "gpuorch/telemetry/dmon.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace gpuorch::telemetry {
namespace {

// The columns after the GPU index: name, unit, width. Header, unit line and rows are all printed
// from this table, right-aligned to the same widths, so their right edges line up. A width holds
// the largest value the column reaches on current GPUs plus a separating space: fb 143771 MiB
// (H200), rxnvl/txnvl 900000 MB/s (NVLink 4, 18 links), 7 characters in all.
struct Column {
  const char* name;
  const char* unit;
  int width;
};
constexpr Column kColumns[] = {
    {"pwr", "W", 6},      {"gtemp", "C", 6},    {"sm", "%", 5},       {"mem", "%", 5},
    {"fb", "MiB", 8},     {"mclk", "MHz", 6},   {"pclk", "MHz", 6},   {"rxpci", "MB/s", 7},
    {"txpci", "MB/s", 7}, {"rxnvl", "MB/s", 8}, {"txnvl", "MB/s", 8},
};
// "# gpu" over the index: rows print it in the same 5 characters.
constexpr int kIndexWidth = 5;

std::string cell(const std::optional<double>& v, int width) {
  return v ? fmt::format("{:>{}.0f}", std::round(*v), width) : fmt::format("{:>{}}", "-", width);
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
  std::string names = "# gpu", units = "# Idx";
  for (const Column& c : kColumns) {
    names += fmt::format("{:>{}}", c.name, c.width);
    units += fmt::format("{:>{}}", c.unit, c.width);
  }
  return names + "\n" + units + "\n";
}

std::string dmon_row(const GpuSample& s, const Rates& r) {
  if (!s.ok) return fmt::format("{:>{}}  {}\n", s.gpu, kIndexWidth, "error: " + s.error);
  auto mbps = [](const std::optional<double>& kbps) {
    return kbps ? std::optional<double>(*kbps / 1000) : std::nullopt;
  };
  const std::optional<double> values[] = {
      s.power_w,        s.temperature_c,      s.gpu_util,
      s.mem_copy_util,  s.memory_used_mib,    s.mem_clock_mhz,
      s.sm_clock_mhz,   mbps(s.pcie_rx_kbps), mbps(s.pcie_tx_kbps),
      r.nvlink_rx_mbps, r.nvlink_tx_mbps};
  static_assert(sizeof values / sizeof values[0] == std::size(kColumns));
  std::string row = fmt::format("{:>{}}", s.gpu, kIndexWidth);
  for (std::size_t i = 0; i < std::size(kColumns); ++i) row += cell(values[i], kColumns[i].width);
  return row + "\n";
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
