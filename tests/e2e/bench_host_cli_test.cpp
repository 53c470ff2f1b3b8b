// gpuorch bench --backend host as a user runs it: --np processes on loopback (and two processes
// joined through RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT), the nccl-tests table and JSON,
// the planted wrong value, a peer that dies or hangs, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/net.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Run {
  int code = -1;
  std::string out, err;
  Clock::duration took{};
};

// A value of our own in every process this test starts, to find leftovers in /proc.
const std::string& marker() {
  static const std::string m = "GPUORCH_TEST_MARK=" + std::to_string(::getpid()) + "-" +
                               std::to_string(std::random_device{}());
  return m;
}

std::string command(const std::vector<std::string>& env, const std::string& args) {
  std::string cmd = "env ";
  cmd += marker();
  for (const auto& e : env) {
    cmd += ' ';
    cmd += test::shell_quote(e);
  }
  cmd += ' ';
  cmd += test::shell_quote(::gpuorch::test::binary_path());
  cmd += " bench ";
  cmd += args;
  return cmd;
}

Run run(const std::string& args, const std::vector<std::string>& env = {}) {
  test::TempDir dir;
  const std::string cmd =
      command(env, args) + " >" + dir.file("out") + " 2>" + dir.file("err") + " </dev/null";
  Run r;
  const auto start = Clock::now();
  const int status = std::system(cmd.c_str());
  r.took = Clock::now() - start;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_text(dir.file("out"));
  r.err = test::read_text(dir.file("err"));
  return r;
}

// Processes still alive that this test started (children of a launcher must never outlive it).
int leftovers() {
  int n = 0;
  for (const auto& p : std::filesystem::directory_iterator("/proc")) {
    const std::string name = p.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(p.path() / "environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (env.find(marker()) != std::string::npos) ++n;
  }
  return n;
}

TEST(BenchHostCli, EveryCollectiveOnTwoAndFourProcesses) {
  for (const int np : {2, 4}) {
    for (const char* c : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                          "alltoall", "sendrecv"}) {
      const auto r = run(std::string(c) + " --backend host --np " + std::to_string(np) +
                         " -b 64 -e 64K -f 32 -n 3 -r 1 --json");
      const std::string what = std::string(c) + " --np " + std::to_string(np);
      ASSERT_EQ(r.code, 0) << what << ": " << r.err;
      EXPECT_EQ(r.err, "") << what;
      const auto j = nlohmann::json::parse(r.out);  // one document: only rank 0 printed
      EXPECT_EQ(j["backend"], "host");
      EXPECT_EQ(j["ranks"], np);
      EXPECT_EQ(j["devices"].size(), static_cast<std::size_t>(np));
      EXPECT_EQ(j["out_of_bounds"], 0) << what;
      const double factor = j["busbw_factor"];
      ASSERT_EQ(j["results"].size(), 3u);  // 64, 2K, 64K
      for (const auto& row : j["results"]) {
        for (const char* place : {"out_of_place", "in_place"}) {
          ASSERT_FALSE(row[place].is_null()) << what;  // in place too, as nccl-tests
          const bool checked = std::string(place) == "out_of_place" ||
                               (std::string(c) != "alltoall" && std::string(c) != "sendrecv");
          if (checked) {
            EXPECT_EQ(row[place]["wrong"], 0) << what;
          } else {
            EXPECT_TRUE(row[place]["wrong"].is_null()) << what;  // timed, never checked
          }
          EXPECT_DOUBLE_EQ(row[place]["busbw_gbps"].get<double>(),
                           row[place]["algbw_gbps"].get<double>() * factor)
              << what;
        }
      }
    }
  }
  EXPECT_EQ(leftovers(), 0);
}

TEST(BenchHostCli, TableAndFooterLikeNcclTests) {
  const auto r = run("all_reduce --backend host --np 4 -b 8 -e 4K -f 8 -n 2 -d half -o max");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = test::lines_of(r.out);
  int rows = 0, ranks = 0;
  for (const auto& l : lines) {
    if (l.rfind("#  Rank ", 0) == 0) ++ranks;
    if (!l.empty() && l[0] != '#') {
      ++rows;
      EXPECT_NE(l.find("  half     max      -1"), std::string::npos) << l;
    }
  }
  EXPECT_EQ(ranks, 4);
  EXPECT_EQ(rows, 4);  // 8, 64, 512, 4096
  EXPECT_NE(r.out.find("# gpuorch host backend: Gloo "), std::string::npos);
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(r.out.find("# Collective test concluded: all_reduce"), std::string::npos);
  // all_reduce on 4 ranks: busbw = algbw x 2(n-1)/n = 1.5 algbw.
  const auto j =
      nlohmann::json::parse(run("all_reduce --backend host --np 4 -b 1M -e 1M -n 2 --json").out);
  EXPECT_DOUBLE_EQ(j["busbw_factor"].get<double>(), 1.5);
}

TEST(BenchHostCli, PlantedWrongValueIsCounted) {
  const auto r =
      run("all_reduce --backend host --np 2 -b 1K -e 1K -n 2", {"GPUORCH_BENCH_CORRUPT=1:5"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("# Out of bounds values : 1 FAILED"), std::string::npos) << r.out;
  const auto rows = test::lines_of(r.out);
  bool seen = false;
  for (const auto& l : rows) {
    if (l.empty() || l[0] == '#') continue;
    seen = true;  // in place: #wrong 1 ends the line
    EXPECT_EQ(l.substr(l.size() - 8), "       1") << l;
  }
  EXPECT_TRUE(seen);
  const auto j = nlohmann::json::parse(
      run("alltoall --backend host --np 4 -b 1K -e 1K -n 1 --json", {"GPUORCH_BENCH_CORRUPT=3:0"})
          .out);
  EXPECT_EQ(j["results"][0]["out_of_place"]["wrong"], 1);
}

TEST(BenchHostCli, KilledPeerEndsTheRunQuickly) {
  // Rank 2 dies at its 10th operation of a run that would otherwise last long.
  const auto r = run("all_reduce --backend host --np 4 -b 1K -e 1K -n 1000000 --timeout 30",
                     {"GPUORCH_BENCH_FAULT=kill:2:10"});
  EXPECT_EQ(r.code, 1);
  EXPECT_LT(r.took, 15s);
  EXPECT_NE(r.err.find("rank 2 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9"), std::string::npos) << r.err;
  EXPECT_EQ(leftovers(), 0);
}

TEST(BenchHostCli, HungPeerTimesOut) {
  // Rank 1 stops (SIGSTOP) without closing its sockets: only the timeout can end the wait.
  const auto r = run("sendrecv --backend host --np 2 -b 8 -e 8 -n 1000000 --timeout 1",
                     {"GPUORCH_BENCH_FAULT=stall:1:5"});
  EXPECT_EQ(r.code, 1);
  EXPECT_LT(r.took, 15s);
  EXPECT_NE(r.err.find("rank 0: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("still running"), std::string::npos) << r.err;
  EXPECT_EQ(leftovers(), 0);
}

TEST(BenchHostCli, TwoProcessesJoinThroughTorchrunVariables) {
  // As on two machines: each process started on its own, rank 0 serves the store.
  const std::string port = std::to_string(test::free_loopback_port());
  test::TempDir dir;
  const std::string args = "broadcast --backend host -b 1K -e 1K -n 2 -r 1 --iface lo";
  const std::string both =
      command({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}, args) +
      " >/dev/null 2>" + dir.file("err1") + " & " +
      command({"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}, args) +
      " >" + dir.file("out0") + " 2>" + dir.file("err0") + "; r0=$?; wait $!; exit $((r0 + $?))";
  const int status = std::system(("sh -c " + test::shell_quote(both)).c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << test::read_text(dir.file("err0")) << test::read_text(dir.file("err1"));
  EXPECT_NE(test::read_text(dir.file("out0")).find("# Out of bounds values : 0 OK"),
            std::string::npos);
}

TEST(BenchHostCli, AbsentPeerTimesOut) {
  const std::string port = std::to_string(test::free_loopback_port());
  const auto r = run("all_reduce --backend host --timeout 1",
                     {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port});
  EXPECT_EQ(r.code, 1);
  EXPECT_LT(r.took, 15s);
  // Rank 0 says where its store listens (MASTER_ADDR, not every interface), then the error.
  const auto lines = test::lines_of(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_EQ(lines[0], "gpuorch bench: rank 0: store listening on 127.0.0.1:" + port) << r.err;
  EXPECT_EQ(lines[1].rfind("gpuorch bench: rank 0: ", 0), 0u) << r.err;
}

TEST(BenchHostCli, BadInputIsOneLineExitTwo) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"all_reduce --backend host --np 0", {}},
      {"all_reduce --backend host --np -3", {}},
      {"all_reduce --backend host --np 2 -g 2", {}},
      {"all_reduce --backend host --np 2 -d bfloat16", {}},
      {"all_reduce --backend gpu --np 2", {}},
      {"all_reduce --backend gpu -d half", {}},
      {"all_reduce --backend tcp", {}},
      {"all_reduce --backend host --np 2 --timeout -1", {}},
      {"all_reduce --backend host --np 2 -t 2", {}},
      {"all_reduce --backend host --np 2 -G 1", {}},
      {"all_reduce --backend host --np 2 --iface no-such-if0", {}},
      {"broadcast --backend host --np 4 -r 4", {}},
      {"all_reduce --backend host --np 2 -b 1M -e 1K", {}},
      {"all_reduce --backend host --np 2 -o avg -d int32", {}},
      {"all_reduce --backend host", {"WORLD_SIZE=two", "RANK=0"}},
      {"all_reduce --backend host", {"WORLD_SIZE=2", "RANK=2"}},
      {"all_reduce --backend host", {"WORLD_SIZE=2", "RANK=0"}},  // no MASTER_ADDR
      {"all_reduce --backend host --np 2", {"GPUORCH_BENCH_CORRUPT=one"}},
      {"all_reduce --backend host --np 2", {"GPUORCH_BENCH_FAULT=explode:1:1"}},
  };
  for (const auto& [args, env] : cases) {
    const auto r = run(args, env);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(test::lines_of(r.err).size(), 1u) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpuorch
