// Small files that would expand into huge work, and control characters deep in a file: each is
// refused by the built binary with one "file:line: ..." line, exit code 2 and nothing on stdout.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

// ---- Bounded reads (issue 30, items 6-9): files that are not regular files, or far too large.

// Runs the binary under timeout(1), so that a read that blocks fails the test instead of hanging
// it.
test::CommandResult run_cli_within(const std::vector<std::string>& args, const test::TempDir& dir) {
  std::vector<std::string> argv{"timeout", "60", test::binary_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_command(argv, dir);
}

std::string topo() { return fixture("topo/t4x2/expected/topo.json"); }

// /dev/zero ran every one of these to bad_alloc (exit 1).
TEST(InputLimitsCli, DevZeroIsRefusedAsNotARegularFile) {
  const test::TempDir dir;
  expect_refused(run_cli_within({"doctor", "nccl-log", "/dev/zero"}, dir),
                 "/dev/zero: the NCCL log is a character device, not a regular file");
  expect_refused(
      run_cli_within(
          {"device-plugin", "--topology", topo(), "--config-file", "/dev/zero", "--dry-run"}, dir),
      "/dev/zero: the config file is a character device, not a regular file");
}

// A FIFO without a writer blocked the reader for good.
TEST(InputLimitsCli, AFifoWithoutAWriterIsRefusedAtOnce) {
  const test::TempDir dir;
  const std::string fifo = dir.file("workload.csv");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(run_cli_within({"sim", "timeline", "--workload", fifo}, dir),
                 fifo + ": the CSV file is a FIFO, not a regular file");
  expect_refused(run_cli_within({"doctor", "nccl-log", fifo}, dir),
                 fifo + ": the NCCL log is a FIFO, not a regular file");
}

// A mounted ConfigMap folder given instead of its file read as an empty config: no sharing, exit 0.
TEST(InputLimitsCli, ADirectoryAsTheConfigFileIsRefused) {
  const test::TempDir dir;
  const std::string folder = dir.file("config");
  std::filesystem::create_directory(folder);
  test::write_text(folder + "/config.yaml",
                   "sharing:\n  timeSlicing:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 4\n");
  const std::string message = folder + ": the config file is a directory, not a regular file";
  expect_refused(
      run_cli({"device-plugin", "--topology", topo(), "--config-file", folder, "--dry-run"}, dir),
      message);
  expect_refused(run_cli({"node-labeller", "--dry-run", "--sysfs-root", fixture("topo/dgx-h100"),
                          "--config-file", folder},
                         dir),
                 message);
}

// A 1 GB first line cost 2.1 GB in `sim timeline --workload`; it stops at the line limit now.
TEST(InputLimitsCli, AHugeFirstLineOfAWorkloadIsRefusedAtTheLineLimit) {
  const test::TempDir dir;
  const std::string workload = dir.file("workload.csv");
  test::write_text(workload, std::string(1 << 20, 'x') + "\n");
  expect_refused(run_cli({"sim", "timeline", "--workload", workload}, dir),
                 workload + ":1: line longer than 65536 bytes");
}

// replicas: 1000000 took 2.5 GB and printed a 274 MB device list.
TEST(InputLimitsCli, ReplicasPastTheMaximumAreRefused) {
  const test::TempDir dir;
  const std::string config = dir.file("ts.yaml");
  test::write_text(config,
                   "sharing:\n  timeSlicing:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 1000000\n");
  expect_refused(
      run_cli({"device-plugin", "--topology", topo(), "--config-file", config, "--dry-run"}, dir),
      config +
          ":5: replicas is 1000000: at most 64 per device (each replica is a device the "
          "plugin lists to the kubelet)");
}

// One out-of-range integer ended the whole check with "error: stoi".
TEST(InputLimitsCli, AnOutOfRangeNumberInAnNcclLogIsSkipped) {
  const test::TempDir dir;
  const std::string log = dir.file("job.log");
  test::write_text(log,
                   "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 99999999999999999999 cudaDev 0 "
                   "Init COMPLETE\n"
                   "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n");
  const auto r = run_cli({"doctor", "nccl-log", log, "--json"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("2 NCCL lines of 2"));
}

// A duration of 1e12 s ran for minutes; one of 1e19 s (past int64) became a 1-second job, exit 0.
TEST(InputLimitsCli, ADurationOutsideItsRangeIsRefusedWithTheRange) {
  const test::TempDir dir;
  for (const char* duration : {"1e12", "1e19"}) {
    const std::string trace = dir.file("philly.csv");
    test::write_text(trace, fmt::format("timestamp,duration,num_gpus\n"
                                        "2017-10-09 06:00:00,600,1\n"
                                        "2017-10-09 06:01:00,{},1\n",
                                        duration));
    expect_refused(run_cli({"sim", "timeline", "--workload", trace, "--policy", "fifo"}, dir),
                   fmt::format("{}:3: column 'duration': '{}' is not a number of seconds in "
                               "0..31536000",
                               trace, duration));
  }
}

// An arrival past int64 gave "can never run" (exit 1, no file:line).
TEST(InputLimitsCli, AnArrivalOutsideItsRangeIsRefusedWithItsLine) {
  const test::TempDir dir;
  const std::string workload = dir.file("workload.csv");
  test::write_text(workload, "name,time,application,num_replicas,batch_size\nj0,1e19,tiny,1,4\n");
  expect_refused(
      run_cli({"sim", "timeline", "--workload", workload, "--apps", dir.file("apps")}, dir),
      workload + ":2: column 'time': '1e19' is not a number of seconds in 0..315360000");
}

// A profile of one application: the validation table and the placements a Pollux workload needs.
std::string write_app(const test::TempDir& dir, const std::string& step_time) {
  const std::string app = dir.file("apps/tiny");
  std::filesystem::create_directories(app);
  test::write_text(app + "/validation-4.csv",
                   "progress,iteration,grad_sqr,grad_var\n1,10,1,1\n2,20,1,1\n");
  test::write_text(
      app + "/placements.csv",
      fmt::format("placement,local_bsz,step_time,sync_time\n1,4,{0},0\n2,4,{0},0\n", step_time));
  return app;
}

// All-zero step times gave "can never run" (exit 1, no file:line).
TEST(InputLimitsCli, AZeroStepTimeIsRefusedWithItsLine) {
  const test::TempDir dir;
  const std::string app = write_app(dir, "0");
  const std::string workload = dir.file("workload.csv");
  test::write_text(workload, "name,time,application,num_replicas,batch_size\nj0,0,tiny,1,4\n");
  expect_refused(
      run_cli({"sim", "timeline", "--workload", workload, "--apps", dir.file("apps")}, dir),
      workload + ":2: job j0: " + app +
          "/placements.csv:2: column 'step_time': '0' is not a number of seconds in (0, 86400]");
}

// Profiles qhull cannot triangulate (too few points) printed qhull's page and exited 1.
TEST(InputLimitsCli, AProfileTooSmallToTriangulateIsOneLine) {
  const test::TempDir dir;
  const std::string app = write_app(dir, "0.5");
  const std::string workload = dir.file("workload.csv");
  test::write_text(workload, "name,time,application,num_replicas,batch_size\nj0,0,tiny,1,4\n");
  const auto r =
      run_cli({"sim", "timeline", "--workload", workload, "--apps", dir.file("apps")}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(test::lines_of(r.err).size(), 1U) << r.err;
  EXPECT_EQ(r.err.rfind("gpuorch: " + workload + ":2: job j0: " + app +
                            ": qhull failed to triangulate the throughput profile (QH",
                        0),
            0U)
      << r.err;
}

// A symlink loop as --apps ended with filesystem_error's text, exit 1.
TEST(InputLimitsCli, ASymlinkLoopAsTheAppsFolderIsOneLine) {
  const test::TempDir dir;
  const std::string loop = dir.file("loop");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  const std::string workload = dir.file("workload.csv");
  test::write_text(workload, "name,time,application,num_replicas,batch_size\nj0,0,tiny,1,4\n");
  expect_refused(run_cli({"sim", "timeline", "--workload", workload, "--apps", loop}, dir),
                 workload + ":2: job j0: " + loop + "/tiny: Too many levels of symbolic links");
}

// A 50 MB value came back as one 52 MB line on stderr; 1.5 million unknown keys as 1.5 million
// warning lines.
TEST(InputLimitsCli, HugeConfigValuesAndWarningsAreCut) {
  const test::TempDir dir;
  const std::string value = dir.file("value.yaml");
  test::write_text(value, "version: " + std::string(10 << 20, 'v') + "\n");  // under the cap
  const auto r =
      run_cli({"device-plugin", "--topology", topo(), "--config-file", value, "--dry-run"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_LT(r.err.size(), 1000U);
  EXPECT_THAT(r.err, HasSubstr(":1: unknown version: vvvv"));
  EXPECT_THAT(r.err, HasSubstr("... (10485560 more bytes)"));

  const std::string keys = dir.file("keys.yaml");
  {
    std::ofstream out(keys);
    for (int i = 0; i < 100000; ++i) out << "unknown" << i << ": 1\n";
  }
  const auto w =
      run_cli({"device-plugin", "--topology", topo(), "--config-file", keys, "--dry-run"}, dir);
  EXPECT_EQ(w.exit_code, 0) << w.err.substr(0, 1000);
  const auto lines = test::lines_of(w.err);
  EXPECT_EQ(lines.size(), 21U);
  EXPECT_THAT(lines.back(), HasSubstr(keys + ": and 99980 more warnings"));
}

}  // namespace
}  // namespace gpuorch
