// doctor nccl-log: each fixture raises exactly its findings; the healthy log raises none.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/doctor/nccl_log.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"
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
    ::testing::Values(Case{"healthy-ib.log", {}},
                      Case{"socket-fallback.log", {"nccl.socket-fallback"}},
                      Case{"ib-without-gdr.log", {"nccl.ib-without-gdr"}},
                      Case{"shm-not-p2p.log", {"nccl.shm-not-p2p"}},
                      Case{"socket-on-loopback.log",
                           {"nccl.socket-fallback", "nccl.socket-interface"}},
                      Case{"warn.log", {"nccl.warn"}},
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

TEST(NcclLog, ShmFindingQuotesTheEnvironmentThatCausedIt) {
  const auto f = find_id(check("shm-not-p2p.log"), "nccl.shm-not-p2p");
  ASSERT_TRUE(f);
  EXPECT_NE(f->evidence.find("NCCL_P2P_DISABLE=1"), std::string::npos) << f->evidence;
}

TEST(NcclLog, WarnLinesAreGroupedByMessage) {
  const auto findings = check("warn.log");
  ASSERT_EQ(std::count_if(findings.begin(), findings.end(),
                          [](const auto& f) { return f.id == "nccl.warn"; }),
            1);
  const auto f = find_id(findings, "nccl.warn");
  EXPECT_NE(f->evidence.find("2 time(s) on gpu02"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("transport/net_ib.cc:1295"), std::string::npos);
  EXPECT_NE(f->fix.find("doctor network"), std::string::npos);
}

TEST(NcclLog, TimeoutNamesTheRankThatStopped) {
  const auto f = find_id(check("timeout-rank-stopped.log"), "nccl.timeout");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("ALLREDUCE #1580 timed out after 600000 ms on 3 rank(s)"),
            std::string::npos)
      << f->what;
  EXPECT_NE(f->what.find("rank(s) that stopped: 3 (gpu02 pid 5202)"), std::string::npos)
      << f->what;
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
      "[1,0]<stdout>:node-a:10158:10560 [0] NCCL INFO Ring 00 : 15 -> 0 [receive] via NET/Socket/0\n"
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
