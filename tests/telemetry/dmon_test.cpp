// `gpuorch dmon`'s columns line up: the header, the unit line and every row end each column at
// the same place, with '-' for a value the GPU does not report and with the largest values of
// current GPUs (H200: 143771 MiB, NVLink 4 at 900000 MB/s).
#include "gpuorch/telemetry/dmon.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "../topology/fixture_hosts.hpp"
#include "support/test_support.hpp"

namespace gpuorch::telemetry {
namespace {

// Where each column of `line` ends (the index after its last character); the header's leading
// '#' is no column.
std::vector<std::size_t> right_edges(const std::string& line) {
  std::vector<std::size_t> edges;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const bool ends = line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ');
    if (ends && !(i == 0 && line[0] == '#')) edges.push_back(i + 1);
  }
  return edges;
}

void expect_aligned(const std::string& text) {
  const auto lines = test::lines_of(text);
  ASSERT_GE(lines.size(), 3U) << text;
  const auto header = right_edges(lines[0]);
  EXPECT_EQ(header.size(), 12U) << lines[0];
  for (const auto& line : lines) EXPECT_EQ(right_edges(line), header) << "\n" << text;
}

TEST(Dmon, ColumnsLineUpWithDashesAndTheLargestValues) {
  GpuSample big;
  big.ok = true;
  big.gpu = 15;
  big.power_w = 700;
  big.temperature_c = 105;
  big.gpu_util = 100;
  big.mem_copy_util = 100;
  big.memory_used_mib = 143771;
  big.mem_clock_mhz = 3201;
  big.sm_clock_mhz = 1980;
  big.pcie_rx_kbps = 64e6;  // 64000 MB/s: PCIe 5 x16
  big.pcie_tx_kbps = 64e6;
  Rates nvlink;
  nvlink.nvlink_rx_mbps = 900000;
  nvlink.nvlink_tx_mbps = 900000;
  GpuSample none;  // a GPU that reports nothing but its index
  none.ok = true;
  none.gpu = 0;
  expect_aligned(dmon_header() + dmon_row(big, nvlink) + dmon_row(none, {}));
  EXPECT_NE(dmon_row(big, nvlink).find("143771"), std::string::npos);
}

TEST(Dmon, ColumnsLineUpOnARecordedHost) {
  for (const char* host : {"dgx-h100", "mi250"}) {
    const test::TempDir dir;
    const auto r = test::run_cli({"dmon", "--count", "2", "--interval", "0.01", "--sysfs-root",
                                  testing::topo_fixture(host).string()},
                                 dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_aligned(r.out);
  }
}

}  // namespace
}  // namespace gpuorch::telemetry
