// gpuorch topo / dmon / exporter as a user runs them: exit codes, one-line errors, outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "../topology/fixture_hosts.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

Run run(const std::string& args) {
  const std::string err_file =
      (std::filesystem::temp_directory_path() / ("gpuorch-e2e-" + std::to_string(::getpid())))
          .string();
  const std::string cmd =
      std::string(::gpuorch::test::binary_path()) + " " + args + " 2>" + err_file;
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = testing::read_text(err_file);
  std::filesystem::remove(err_file);
  return r;
}

std::string root(const std::string& host) { return testing::topo_fixture(host).string(); }

TEST(TopoCli, MatrixJsonLabelsFromRecording) {
  const auto m = run("topo --sysfs-root " + root("dgx-h100"));
  EXPECT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(m.out, testing::read_text(testing::topo_fixture("dgx-h100") / "expected/matrix.txt"));
  EXPECT_EQ(m.err, "");
  const auto j = run("topo --json --sysfs-root " + root("mi250"));
  EXPECT_EQ(j.code, 0);
  EXPECT_EQ(j.out, testing::read_text(testing::topo_fixture("mi250") / "expected/topo.json"));
  const auto l = run("topo --labels --sysfs-root " + root("t4x2"));
  EXPECT_EQ(l.out, testing::read_text(testing::topo_fixture("t4x2") / "expected/labels.txt"));
  const auto s = run("topo --node-spec --sysfs-root " + root("h200-vm"));
  EXPECT_EQ(s.out,
            testing::read_text(testing::topo_fixture("h200-vm") / "expected/node-spec.yaml"));
}

TEST(TopoCli, BadRootIsOneLineExitTwo) {
  const auto r = run("topo --sysfs-root /nonexistent/tree");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpuorch: /nonexistent/tree: not a directory\n");
  EXPECT_EQ(r.out, "");
}

// This machine (and CI) has neither NVML nor a GPU: one line says so; CPUs and NUMA still shown.
TEST(TopoCli, LiveHostWithoutGpu) {
  if (std::filesystem::exists("/proc/driver/nvidia") || std::filesystem::exists("/dev/kfd")) {
    GTEST_SKIP() << "this machine has a GPU driver";
  }
  const auto r = run("topo --nvml-library libnvidia-ml-absent.so.1");
  EXPECT_EQ(r.code, 0) << r.err;
  std::size_t lines = 0;
  for (std::size_t at = r.out.find("no GPU found"); at != std::string::npos;
       at = r.out.find("no GPU found", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << r.out;
  EXPECT_NE(r.out.find("NUMA nodes"), std::string::npos);
  EXPECT_NE(r.out.find("node 0: CPUs"), std::string::npos);
  const auto j = run("topo --json");
  EXPECT_EQ(j.code, 0);
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_GE(json["numa_nodes"].size(), 1u);
  EXPECT_GE(json["cpus"]["logical"].get<int>(), 1);
  EXPECT_EQ(json["gpus"].size(), 0u);
  const auto dm = run("dmon --count 1");
  EXPECT_EQ(dm.code, 1);
  EXPECT_EQ(dm.err.find("gpuorch: no GPU found"), 0u) << dm.err;
  EXPECT_EQ(std::count(dm.err.begin(), dm.err.end(), '\n'), 1);
}

TEST(TopoCli, DamagedRecordingWarnsOncePerFile) {
  const testing::TreeCopy copy("t4x2", "cli");
  std::ofstream(copy.dir() / "sys/devices/system/node/node1/cpulist") << "16-x\n";
  const auto r = run("topo --sysfs-root " + copy.dir().string());
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err,
            "gpuorch: warning: " + (copy.dir() / "sys/devices/system/node/node1/cpulist").string() +
                ": expected a CPU list, found '16-x'\n");
}

TEST(DmonCli, RowsFromRecording) {
  const auto r = run("dmon --count 2 --interval 0.01 --sysfs-root " + root("dgx-h100"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# gpu", 0), 0u);
  // 2 header lines + 8 GPUs x 2 rounds
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 18);
  const auto j = run("dmon --json --count 1 --sysfs-root " + root("mi250"));
  EXPECT_EQ(j.code, 0);
  std::istringstream lines(j.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto o = nlohmann::json::parse(line);
    EXPECT_EQ(o["gpu"].get<int>(), n);
    EXPECT_EQ(o["gpu_util"].get<double>(), 80 + n);
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(ExporterCli, BadListenIsExitTwo) {
  const auto r = run("exporter --listen nonsense --sysfs-root " + root("t4x2"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST(ExporterCli, SaysWhoCanReachIt) {
  // --listen :PORT is every interface: the log line says so, as it says loopback.
  const auto any =
      run("exporter --listen :0 --duration 0.2 --no-nvml --sysfs-root " + root("t4x2"));
  EXPECT_EQ(any.code, 0) << any.err;
  EXPECT_NE(any.out.find("listening on http://0.0.0.0:"), std::string::npos) << any.out;
  EXPECT_NE(any.out.find("/metrics, every IPv4 interface ("), std::string::npos) << any.out;
  const auto lo =
      run("exporter --listen 127.0.0.1:0 --duration 0.2 --no-nvml --sysfs-root " + root("t4x2"));
  EXPECT_EQ(lo.code, 0) << lo.err;
  EXPECT_NE(lo.out.find("/metrics, loopback only ("), std::string::npos) << lo.out;
}

}  // namespace
}  // namespace gpuorch
