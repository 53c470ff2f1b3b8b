// gpuorch bench (GPU backend) and gpuorch tune nccl as a user runs them on a host without a GPU:
// the multi-process bootstrap's bounded waits (a rank that never comes, a peer that dies mid
// exchange), every rank failing with the same line, bad launcher variables, tune's bad input.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "gpuorch/base/child_process.hpp"
#include "support/net.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;
using Clock = std::chrono::steady_clock;

base::ChildResult gpuorch(const std::vector<std::string>& args, const Env& env) {
  std::vector<std::string> argv{::gpuorch::test::binary_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return base::run_child(argv, env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"},
                         std::chrono::seconds(60));
}

bool has_cuda_driver() {
  return std::system("ldconfig -p 2>/dev/null | grep -q libcuda.so.1") == 0;
}

Env rank_env(int rank, int world, int port, const std::string& timeout = "2") {
  return {{"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},  {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}, {"GPUORCH_PEER_TIMEOUT", timeout}};
}

long lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST(BenchMultiProcess, ARankThatNeverComesIsABoundedWait) {
  const int port = test::free_loopback_port();
  const auto start = Clock::now();
  const auto r = gpuorch({"bench", "all_reduce"}, rank_env(0, 3, port, "1"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("ranks 1, 2 of 3: never connected"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  const auto peer =
      gpuorch({"bench", "all_reduce"}, rank_env(1, 2, test::free_loopback_port(), "1"));
  EXPECT_EQ(peer.code, 1);
  EXPECT_NE(peer.err.find("not reachable within 1 s"), std::string::npos) << peer.err;
}

TEST(BenchMultiProcess, APeerDyingInTheExchangeIsNamed) {
  const int port = test::free_loopback_port();
  auto root = std::async(std::launch::async, [port] {
    return gpuorch({"bench", "all_reduce"}, rank_env(0, 2, port, "20"));
  });
  // A peer that says hello as rank 1, waits for "ok", then dies before the next step.
  int fd = -1;
  for (int i = 0; i < 200 && fd < 0; ++i) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_GE(fd, 0);
  const std::string hello = "gpuorch-bootstrap 1 1 2";
  const std::uint32_t n = htonl(static_cast<std::uint32_t>(hello.size()));
  ASSERT_EQ(::send(fd, &n, 4, 0), 4);
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  char ok[6] = {};
  ASSERT_EQ(::recv(fd, ok, 6, MSG_WAITALL), 6);
  ::close(fd);
  const auto start = Clock::now();
  const auto r = root.get();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rank 1 closed its connection (exited or died)"), std::string::npos)
      << r.err;
}

TEST(BenchMultiProcess, EveryRankFailsWithTheSameLineWithoutADriver) {
  if (has_cuda_driver()) GTEST_SKIP() << "this host has a CUDA driver";
  const int port = test::free_loopback_port();
  auto r1 = std::async(std::launch::async, [port] {
    return gpuorch({"bench", "all_reduce"}, rank_env(1, 2, port, "20"));
  });
  const auto r0 = gpuorch({"bench", "all_reduce"}, rank_env(0, 2, port, "20"));
  const auto one = r1.get();
  for (const auto* r : {&r0, &one}) {
    EXPECT_EQ(r->code, 1) << r->err;
    EXPECT_EQ(lines(r->err), 1) << r->err;
    EXPECT_NE(r->err.find("rank 0: no CUDA driver (libcuda.so.1"), std::string::npos) << r->err;
    EXPECT_EQ(r->out, "");
  }
}

TEST(BenchMultiProcess, BadLauncherVariablesExitTwo) {
  for (const auto& env :
       std::vector<Env>{{{"RANK", "2"}, {"WORLD_SIZE", "2"}},
                        {{"RANK", "0"}, {"WORLD_SIZE", "x"}},
                        {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}},
                        {{"RANK", "0"},
                         {"WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "h"},
                         {"GPUORCH_PEER_TIMEOUT", "-1"}}}) {
    const auto r = gpuorch({"bench", "all_reduce"}, env);
    EXPECT_EQ(r.code, 2) << env[1].second << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
}

TEST(TuneCli, BadInputExitsTwoAndNoGpuExitsOne) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"tune", "nccl", "-b", "1G", "-e", "1M"},
                                             {"tune", "nccl", "-b", "1Q"},
                                             {"tune", "nccl", "--algos", "NVLS"},
                                             {"tune", "nccl", "--protos", "LL256"},
                                             {"tune", "nccl", "--repeats", "1"},
                                             {"tune", "nccl", "--collectives", "sendrecv"}}) {
    const auto r = gpuorch(args, {});
    EXPECT_EQ(r.code, 2) << args[2] << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
  if (has_cuda_driver()) return;
  const auto r = gpuorch({"tune", "nccl", "--output", "/tmp/gpuorch-tune-never.env"}, {});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("no NVIDIA GPU found"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("/tmp/gpuorch-tune-never.env"));
  const auto forced = gpuorch({"tune", "nccl", "-g", "2"}, {});
  EXPECT_EQ(forced.code, 1);
  EXPECT_NE(forced.err.find("no CUDA driver"), std::string::npos) << forced.err;
}

}  // namespace
}  // namespace gpuorch
