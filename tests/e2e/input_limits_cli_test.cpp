// Small files that would expand into huge work, and control characters deep in a file: each is
// refused by the built binary with one "file:line: ..." line, exit code 2 and nothing on stdout.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::fixture;
using test::run_cli;
using ::testing::HasSubstr;

void expect_refused(const test::CommandResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuorch: " + message + "\n");
}

TEST(InputLimitsCli, AnInventoryOfFiftyMillionNodesIsRefusedAtOnce) {
  const test::TempDir dir;
  std::string yaml = "nodes:\n";
  for (int i = 0; i < 50; ++i) {
    yaml += fmt::format(
        "  - {{name: t{:02d}, count: 1000000, cpu_milli: 96000, memory_mib: 1024, "
        "gpu: {{model: A100, count: 8}}}}\n",
        i);
  }
  ASSERT_LT(yaml.size(), 5000U);
  const std::string inv = dir.file("inv.yaml");
  test::write_text(inv, yaml);
  const auto r = run_cli({"sim", "fill", "--nodes", inv, "--pods", fixture("openb_pods.csv"),
                          "--policy", "fgd", "--seeds", "1"},
                         dir);
  expect_refused(r, inv + ":2: the inventory expands past 100000 nodes (the limit)");
}

TEST(InputLimitsCli, ATenMegabyteCsvLineIsRefused) {
  const test::TempDir dir;
  const std::string pods = dir.file("pods.csv");
  {
    std::ofstream out(pods, std::ios::binary);
    out << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,100,1,500\n";
    out << std::string(10 << 20, 'x') << "\n";
  }
  const auto r = run_cli({"sim", "fill", "--nodes", fixture("openb_nodes.csv"), "--pods", pods,
                          "--policy", "fgd", "--seeds", "1"},
                         dir);
  expect_refused(r, pods + ":3: line longer than 65536 bytes");
}

// A NUL in a pod name past the first 8 KiB used to reach `sim arrivals` output.
TEST(InputLimitsCli, ANulInAPodNameDeepInTheFileIsRefused) {
  const test::TempDir dir;
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  for (int i = 0; i < 400; ++i) text += fmt::format("pod-{:04d},1000,100,1,500\n", i);
  text += std::string("evil\0pod,1000,100,1,500\n", 25);
  const std::string pods = dir.file("pods.csv");
  test::write_text(pods, text);
  const auto r = run_cli(
      {"sim", "arrivals", "--nodes", fixture("openb_nodes.csv"), "--pods", pods, "--seeds", "1"},
      dir);
  expect_refused(r, pods + ":402: column 'name' holds a control character (0x00) at byte 4");
}

// An ESC written as a JSON escape in a GPU model, which `launch --dry-run` would print.
TEST(InputLimitsCli, AnEscapeInATopologyModelIsRefused) {
  const test::TempDir dir;
  auto host = nlohmann::json::parse(test::read_text(fixture("topo/t4x2/expected/topo.json")));
  host["gpus"][1]["model"] = "Tesla T4\x1b[2J";
  const std::string topo = dir.file("topo.json");
  test::write_text(topo, host.dump(2));
  const auto r = run_cli({"launch", "--topology", topo, "--nproc-per-node", "gpu", "--dry-run",
                          "--", "python3", "train.py"},
                         dir);
  expect_refused(r, topo + ": /gpus/1/model holds a control character (0x1b) at byte 8");
}

// Found by fuzz/sysfs_recording: a recorded nvml.json holding a number past the double range
// ("2e996") escaped discovery as nlohmann's out_of_range and aborted `gpuorch topo`. It is a
// problem of that file, reported, and the host is read from sysfs as without NVML.
TEST(InputLimitsCli, ARecordedNvmlJsonWithAHugeNumberIsAProblemNotACrash) {
  const test::TempDir dir;
  const std::string root = dir.file("rec");
  std::filesystem::copy(fixture("topo/t4x2"), root,
                        std::filesystem::copy_options::recursive |
                            std::filesystem::copy_options::copy_symlinks);
  test::write_text(root + "/nvml.json", "2e996");
  const auto r = run_cli({"topo", "--sysfs-root", root, "--json"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("nvml.json: not JSON (a number out of range)"));
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"].size(), 2U);
}

}  // namespace
}  // namespace gpuorch
