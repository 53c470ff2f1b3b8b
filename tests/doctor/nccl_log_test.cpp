// doctor nccl-log: each fixture raises exactly its findings; the healthy log raises none.
#include "gpuorch/doctor/nccl_log.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::doctor_fixture;
using test::find_id;
using test::problem_ids;
using Ids = std::vector<std::string>;

std::vector<doctor::Finding> check(const std::string& name) {
  const std::string path = doctor_fixture("nccl/" + name);
  return doctor::check_nccl_log(doctor::read_nccl_log(path));
}

struct Case {
  const char* file;
  Ids problems;
};

class NcclLogFixture : public ::testing::TestWithParam<Case> {};

TEST_P(NcclLogFixture, RaisesExactlyItsFindings) {
  const auto findings = check(GetParam().file);
  EXPECT_EQ(problem_ids(findings), GetParam().problems) << GetParam().file;
  ASSERT_TRUE(find_id(findings, "nccl.summary"));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, NcclLogFixture,
    ::testing::Values(
        Case{"healthy-ib.log", {}}, Case{"socket-fallback.log", {"nccl.socket-fallback"}},
        Case{"ib-without-gdr.log", {"nccl.ib-without-gdr"}},
        // NCCL_P2P_DISABLE=1 is set: the setting's finding carries the SHM connections.
        Case{"shm-not-p2p.log", {"nccl.env-p2p-disabled"}},
        Case{"socket-on-loopback.log", {"nccl.socket-fallback", "nccl.socket-interface"}},
        Case{"warn.log", {"nccl.ib-completion-error"}}, Case{"h200-bench-nvls-off.log", {}},
        Case{"env-ib-disabled.log", {"nccl.env-ib-disabled"}},
        Case{"rdma-plugin-no-device.log", {"nccl.rdma-no-device"}},
        Case{"duplicate-gpu.log", {"nccl.duplicate-gpu", "torch.nccl-error"}},
        Case{"prefixes-k8s.log", {"torch.watchdog-stuck"}},
        Case{"env-fast-paths-off.log",
             {"nccl.env-algo-forced", "nccl.env-p2p-disabled", "nccl.env-proto-forced",
              "nccl.env-shm-disabled"}},
        Case{"socket-ifname-missing.log", {"nccl.no-socket-interface"}},
        Case{"init-incomplete.log", {"nccl.init-incomplete"}},
        Case{"timeout-rank-stopped.log", {"nccl.timeout"}},
        Case{"timeout-all-waiting.log", {"nccl.timeout"}}),
    [](const ::testing::TestParamInfo<Case>& p) {
      std::string n = p.param.file;
      n = n.substr(0, n.find('.'));
      for (char& c : n) {
        if (c == '-') c = '_';
      }
      return n;
    });

// A real NCCL 2.28 log (torch.distributed all_reduce on the H200 machine, gpuorch launch,
// docs/hardware/h200-doctor): the version comes as an INFO line there.
TEST(NcclLog, ReadsARealNccl228Log) {
  const std::string path = doctor_fixture("nccl/h200-single-rank-torch.log");
  const auto log = doctor::read_nccl_log(path);
  EXPECT_EQ(log.version, "2.28.9+cuda13.0");
  EXPECT_EQ(log.hosts, (std::set<std::string>{"vm"}));
  EXPECT_EQ(log.nranks, 1);
  EXPECT_EQ(problem_ids(doctor::check_nccl_log(log)), Ids{});
}

TEST(NcclLog, ReadsTransportsRingsTreesAndRanks) {
  const std::string path = doctor_fixture("nccl/healthy-ib.log");
  const auto log = doctor::read_nccl_log(path);
  EXPECT_EQ(log.version, "2.18.5+cuda12.2");
  EXPECT_EQ(log.hosts, (std::set<std::string>{"gpu01", "gpu02"}));
  EXPECT_EQ(log.nranks, 4);
  EXPECT_EQ(log.init_complete.size(), 4u);
  EXPECT_EQ(log.init_complete.at(3).host, "gpu02");
  EXPECT_EQ(log.rings.size(), 2u);
  EXPECT_EQ(log.rings.at(1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(log.tree_channels, (std::set<int>{0, 1}));
  EXPECT_EQ(log.graph_types, (std::vector<std::string>{"NVL/PIX"}));
  int gdr = 0, p2p = 0;
  for (const auto& c : log.connections) {
    gdr += c.transport == doctor::Transport::kNetIb && c.gdr;
    p2p += c.transport == doctor::Transport::kP2p;
  }
  EXPECT_EQ(p2p, 4);  // 2 channels x 2 intra-host hops
  EXPECT_EQ(gdr, 8);  // 2 channels x 2 inter-host hops, logged by the sender and the receiver
  const auto summary = find_id(doctor::check_nccl_log(log), "nccl.summary");
  ASSERT_TRUE(summary);
  // Each network connection counted once, though both of its sides log it.
  EXPECT_NE(summary->evidence.find("NET/IB 4, P2P 4, of which GPUDirect RDMA 4"), std::string::npos)
      << summary->evidence;
}

TEST(NcclLog, SocketFallbackNamesTheHostsWithoutIb) {
  const auto f = find_id(check("socket-fallback.log"), "nccl.socket-fallback");
  ASSERT_TRUE(f);
  EXPECT_NE(f->evidence.find("4 of 4 network connections via NET/Socket"), std::string::npos);
  EXPECT_NE(f->evidence.find("'NET/IB : No device found' on gpu01, gpu02"), std::string::npos);
}

TEST(NcclLog, ShmBecauseOfTheEnvironmentIsTheSettingsFinding) {
  const auto f = find_id(check("shm-not-p2p.log"), "nccl.env-p2p-disabled");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("NCCL_P2P_DISABLE=1"), std::string::npos) << f->what;
  EXPECT_NE(f->evidence.find("connections via SHM"), std::string::npos) << f->evidence;
}

TEST(NcclLog, WarnLinesAreGroupedByCatalogueEntry) {
  const auto findings = check("warn.log");
  ASSERT_EQ(std::count_if(findings.begin(), findings.end(),
                          [](const auto& f) { return f.id == "nccl.ib-completion-error"; }),
            1);
  const auto f = find_id(findings, "nccl.ib-completion-error");
  EXPECT_NE(f->evidence.find("2 time(s) on gpu02, first at line"), std::string::npos)
      << f->evidence;
  EXPECT_NE(f->evidence.find("NCCL 2.20-2.21 prints it (src/transport/net_ib.cc)"),
            std::string::npos)
      << f->evidence;
  // The peer the line names is the one to look at first.
  EXPECT_NE(f->what.find("between gpu02 and 10.0.0.1<47312>"), std::string::npos) << f->what;
  EXPECT_NE(f->fix.find("doctor network"), std::string::npos);
}

// A WARN no catalogue entry knows is still reported, as it is.
TEST(NcclLog, AnUnknownWarnIsReportedAsLogged) {
  const auto log = doctor::parse_nccl_log(
      "h:1:2 [0] misc/new.cc:1 NCCL WARN Something new went wrong\n", "job.log");
  const auto f = find_id(doctor::check_nccl_log(log), "nccl.warn");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->what, "NCCL WARN Something new went wrong (a message not in doctor's catalogue)");
}

// Issue 35's first missed log: NCCL_IB_DISABLE=1 and NET/Socket: RDMA switched off by the
// environment, with its cost, and no "no problem found".
TEST(NcclLog, RdmaSwitchedOffByTheEnvironmentIsItsCause) {
  const auto findings = check("env-ib-disabled.log");
  const auto f = find_id(findings, "nccl.env-ib-disabled");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, doctor::Severity::kWarning);
  EXPECT_NE(f->what.find("switched off by the environment: NCCL_IB_DISABLE=1"), std::string::npos);
  EXPECT_NE(f->what.find("cost: TCP sockets"), std::string::npos) << f->what;
  EXPECT_NE(f->evidence.find("sockets in use: line 6: \"NET/Socket : Using [0]eth0"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->fix.find("unset NCCL_IB_DISABLE"), std::string::npos);
  EXPECT_FALSE(find_id(findings, "nccl.socket-fallback"));  // one problem, one finding
}

// The second: an RDMA plugin (HPC-X) and "NET/IB : No device found.": sockets between hosts.
TEST(NcclLog, AnRdmaPluginWithoutADeviceIsReported) {
  const auto f = find_id(check("rdma-plugin-no-device.log"), "nccl.rdma-no-device");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, doctor::Severity::kWarning);
  EXPECT_NE(f->what.find("found no RDMA device on node-a"), std::string::npos) << f->what;
  EXPECT_NE(f->evidence.find("Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->fix.find("ibv_devinfo"), std::string::npos);
  EXPECT_NE(f->fix.find("gpuorch doctor network"), std::string::npos);
}

TEST(NcclLog, DuplicateGpusGetTheBindingAdvice) {
  const auto findings = check("duplicate-gpu.log");
  const auto f = find_id(findings, "nccl.duplicate-gpu");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("ranks 0 and 1 use the same GPU (PCI bus 60) on gpu01"), std::string::npos)
      << f->what;
  EXPECT_NE(f->what.find("LOCAL_RANK"), std::string::npos);
  EXPECT_EQ(f->what.find("CUDA error"), std::string::npos);
  EXPECT_NE(f->fix.find("torch.cuda.set_device(int(os.environ['LOCAL_RANK']))"), std::string::npos);
  EXPECT_NE(f->fix.find("gpuorch launch"), std::string::npos);
  // Both WARN lines and PyTorch's "Last error:" copy count as the same message.
  EXPECT_NE(f->evidence.find("3 time(s) on gpu01"), std::string::npos) << f->evidence;
}

TEST(NcclLog, NvlsOffByChoiceIsInfoNotAProblem) {
  for (const char* name : {"h200-bench-nvls-off.log", "h200-single-rank-torch.log"}) {
    const auto findings = check(name);
    EXPECT_EQ(problem_ids(findings), Ids{}) << name;
    const auto f = find_id(findings, "nccl.env-nvls-disabled");
    ASSERT_TRUE(f) << name;
    EXPECT_EQ(f->severity, doctor::Severity::kInfo);
    EXPECT_NE(f->what.find("switched off by choice"), std::string::npos);
  }
}

TEST(NcclLog, EverySettingThatSwitchesAFastPathOffSaysItsCost) {
  const auto findings = check("env-fast-paths-off.log");
  for (const char* id : {"nccl.env-p2p-disabled", "nccl.env-shm-disabled", "nccl.env-algo-forced",
                         "nccl.env-proto-forced", "nccl.env-nvls-disabled"}) {
    const auto f = find_id(findings, id);
    ASSERT_TRUE(f) << id;
    EXPECT_NE(f->what.find("cost: "), std::string::npos) << id << ": " << f->what;
  }
}

TEST(NcclLog, ACalibrationFileGivesTheMeasuredCost) {
  const std::string calib =
      test::source_dir() + std::string("/docs/hardware/h200-x2-bench/calibration.json");
  const auto options = doctor::read_calibration(calib);
  const auto findings = doctor::check_nccl_log(
      doctor::read_nccl_log(doctor_fixture("nccl/env-fast-paths-off.log")), options);
  const auto p2p = find_id(findings, "nccl.env-p2p-disabled");
  ASSERT_TRUE(p2p);
  EXPECT_NE(p2p->what.find("measured on vm (" + calib +
                           "): 359.5 GB/s between two GPUs over nvlink against 23.0 GB/s with "
                           "NCCL_P2P_DISABLE=1 (15.6x slower)"),
            std::string::npos)
      << p2p->what;
  const auto algo = find_id(findings, "nccl.env-algo-forced");
  ASSERT_TRUE(algo);
  // That recording predates the per-setting curves: doctor says so instead of a figure.
  EXPECT_NE(algo->what.find("has no per-setting curves"), std::string::npos) << algo->what;
  EXPECT_EQ(test::input_error([] {
              doctor::read_calibration(doctor_fixture("nccl/warn.log"));
            }).substr(0, 10),
            doctor_fixture("nccl/warn.log").substr(0, 10));
}

TEST(NcclLog, ForcedAlgorithmAndProtocolArePricedFromTheirMeasuredCurves) {
  // env-fast-paths-off.log forces NCCL_ALGO=Tree and NCCL_PROTO=LL; the file measured that pair
  // against NCCL's choice on all_reduce (picked over all_gather, which it also measured).
  const std::string calib = doctor_fixture("calibration/settings.json");
  const auto options = doctor::read_calibration(calib);
  ASSERT_EQ(options.calibrated_settings.size(), 5U);
  const auto findings = doctor::check_nccl_log(
      doctor::read_nccl_log(doctor_fixture("nccl/env-fast-paths-off.log")), options);
  for (const char* id : {"nccl.env-algo-forced", "nccl.env-proto-forced"}) {
    const auto f = find_id(findings, id);
    ASSERT_TRUE(f) << id;
    EXPECT_NE(f->what.find("measured on made (" + calib +
                           ", all_reduce on 2 GPUs): with NCCL_ALGO=Tree NCCL_PROTO=LL 150.0 GB/s "
                           "at 1 GiB against 300.0 GB/s with NCCL's choice (2.00x slower), at 64 "
                           "KiB 5.00 against 4.00 GB/s (1.25x faster); it loses most at 16 MiB "
                           "(5.00x slower)"),
              std::string::npos)
        << f->what;
  }
  // A setting the file did not measure is named with the command that measures it.
  doctor::NcclCheckOptions only_ring = options;
  std::erase_if(only_ring.calibrated_settings,
                [](const doctor::CalibratedSetting& s) { return s.algo == "Tree"; });
  const auto unmeasured =
      find_id(doctor::check_nccl_log(
                  doctor::read_nccl_log(doctor_fixture("nccl/env-fast-paths-off.log")), only_ring),
              "nccl.env-algo-forced");
  ASSERT_TRUE(unmeasured);
  EXPECT_NE(unmeasured->what.find("did not measure NCCL_ALGO=Tree NCCL_PROTO=LL against NCCL's "
                                  "choice: `gpuorch tune nccl --algos Tree --protos LL` does"),
            std::string::npos)
      << unmeasured->what;
  // A malformed curve is one line naming the file and the collective.
  const std::string bad = ::testing::TempDir() + "/bad-calibration.json";
  base::write_file_atomically(
      bad, R"({"schema": "gpuorch.calibration/1", "collectives": [{"collective": "all_reduce",)"
           R"( "settings": [{"NCCL_ALGO": "Tree", "points": [[0, 1]]}]}]})");
  EXPECT_EQ(test::input_error([&] { doctor::read_calibration(bad); }),
            bad + ": collective all_reduce: a point is not [bytes > 0, busbw_gbps >= 0, ...]");
  // Wrong types and sizes no message has are one line too, never a JSON library exception.
  for (const auto& [text, line] : std::vector<std::pair<std::string, std::string>>{
           {R"({"schema": "gpuorch.calibration/1", "host": 7})", ": 'host' is not a string"},
           {R"({"schema": 1})",
            ": not a calibration file (schema gpuorch.calibration/1, `gpuorch tune nccl "
            "--calibration`)"},
           {R"({"schema": "gpuorch.calibration/1", "collectives": [{"collective": 5,)"
            R"( "settings": []}]})",
            ": 'collective' is not a string"},
           {R"({"schema": "gpuorch.calibration/1", "collectives": [{"collective": "x",)"
            R"( "settings": [{"points": [[1e300, 1]]}]}]})",
            ": collective x: a point is not [bytes > 0, busbw_gbps >= 0, ...]"},
           {R"({"schema": "gpuorch.calibration/1", "paths": [{"type": [], "bandwidth_gbps": 1}]})",
            ": 'type' is not a string"}}) {
    base::write_file_atomically(bad, text);
    EXPECT_EQ(test::input_error([&] { doctor::read_calibration(bad); }), bad + line) << text;
  }
}

TEST(NcclLog, AMissingSocketInterfaceNamesTheSetting) {
  const auto f = find_id(check("socket-ifname-missing.log"), "nccl.no-socket-interface");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("on gpu01"), std::string::npos) << f->what;
  EXPECT_NE(f->what.find("NCCL_SOCKET_IFNAME=ens5 is set by the environment"), std::string::npos)
      << f->what;
  EXPECT_NE(f->fix.find("ip -br addr"), std::string::npos);
}

// Kubernetes (CRI and kubectl --prefix) and torchrun prefixes, mixed hosts and ranks, timestamps.
TEST(NcclLog, ReadsLogsUnderKubernetesAndTorchrunPrefixes) {
  const auto log = doctor::read_nccl_log(doctor_fixture("nccl/prefixes-k8s.log"));
  EXPECT_EQ(log.hosts, (std::set<std::string>{"train-0", "train-1"}));
  EXPECT_EQ(log.nnodes, 2);
  EXPECT_EQ(log.init_complete.size(), 2U);
  EXPECT_EQ(log.init_complete.at(1).host, "train-1");
  EXPECT_EQ(log.connections.size(), 4U);
  const auto stuck = find_id(doctor::check_nccl_log(log), "torch.watchdog-stuck");
  ASSERT_TRUE(stuck);
  EXPECT_NE(stuck->what.find("on rank 1"), std::string::npos) << stuck->what;
}

TEST(NcclLog, TimeoutNamesTheRankThatStopped) {
  const auto f = find_id(check("timeout-rank-stopped.log"), "nccl.timeout");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("ALLREDUCE #1580 timed out after 600000 ms on 3 rank(s)"),
            std::string::npos)
      << f->what;
  EXPECT_NE(f->what.find("rank(s) that stopped: 3 (gpu02 pid 5202)"), std::string::npos) << f->what;
  const auto all = find_id(check("timeout-all-waiting.log"), "nccl.timeout");
  ASSERT_TRUE(all);
  EXPECT_NE(all->what.find("every rank was waiting in it"), std::string::npos) << all->what;
}

TEST(NcclLog, ATextWithoutNcclLinesIsBadInput) {
  EXPECT_EQ(test::input_error([] { doctor::parse_nccl_log("hello\nworld\n", "job.log"); }),
            "job.log: no NCCL line in 2 lines (run the job with NCCL_DEBUG=INFO and give its "
            "output)");
}

TEST(NcclLog, OldRingLinesAndLauncherPrefixesAreRead) {
  const auto log = doctor::parse_nccl_log(
      "[1,0]<stdout>:node-a:10158:10560 [0] NCCL INFO Ring 00 : 15 -> 0 [receive] via "
      "NET/Socket/0\n"
      "2025-01-01 10:00:00,1 - INFO - node-b:7:9 [2] NCCL INFO Ring 01 : 2[0] -> 3[0] via direct "
      "shared memory\n",
      "old.log");
  ASSERT_EQ(log.connections.size(), 2u);
  EXPECT_EQ(log.connections[0].transport, doctor::Transport::kNetSocket);
  EXPECT_EQ(log.connections[0].from_rank, 15);
  EXPECT_EQ(log.connections[1].transport, doctor::Transport::kShm);
  EXPECT_EQ(log.hosts, (std::set<std::string>{"node-a", "node-b"}));
}

// An out-of-range number ended `doctor nccl-log` with "error: stoi" (issue 30): its line is NCCL
// text this reader cannot read, skipped, and the rest of the log still counts.
TEST(NcclLog, AnOutOfRangeNumberSkipsItsLine) {
  const std::string init =
      "h:1:2 [0] NCCL INFO comm 0x1 rank {} nranks {} cudaDev 0 Init COMPLETE\n";
  const auto log = doctor::parse_nccl_log(
      fmt::format(fmt::runtime(init), 0, "99999999999999999999") +
          fmt::format(fmt::runtime(init), 0, 2) +
          "h:1:2 [0] NCCL INFO Channel 99999999999 : 0[0] -> 1[1] via P2P/IPC\n"
          "h:1:2 [0] NCCL INFO Channel 00/02 :    0 99999999999\n"
          "h:1:2 [0] NCCL INFO Trees [99999999999] -1/-1/-1->0->1 [1] -1/-1/-1->0->1\n"
          "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
          "99999999999999999999, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 "
          "milliseconds\n",
      "job.log");
  EXPECT_EQ(log.nccl_lines, 6U);
  EXPECT_EQ(log.nranks, 2);
  EXPECT_EQ(log.init_complete.size(), 1U);
  EXPECT_TRUE(log.connections.empty());
  EXPECT_TRUE(log.rings.empty());
  EXPECT_EQ(log.tree_channels, (std::set<int>{1}));
  EXPECT_TRUE(log.timeouts.empty());
}

// std::regex recurses once per byte: a 64 KiB "Channel ... via" line overflowed the stack.
TEST(NcclLog, ALineLongerThanNcclWritesIsSkipped) {
  const std::string ok = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n";
  const std::string text = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via " +
                           std::string(64 * 1024, 'x') + "\n" + ok;
  const auto log = doctor::parse_nccl_log(text, "job.log");
  ASSERT_EQ(log.connections.size(), 1U);
  EXPECT_EQ(log.connections[0].line, 2U);
  const test::TempDir dir;
  test::write_text(dir.file("job.log"), text);
  const auto read = doctor::read_nccl_log(dir.file("job.log"));
  ASSERT_EQ(read.connections.size(), 1U);
  EXPECT_EQ(read.connections[0].line, 2U);
  EXPECT_EQ(read.lines, 2U);
}

}  // namespace
}  // namespace gpuorch
