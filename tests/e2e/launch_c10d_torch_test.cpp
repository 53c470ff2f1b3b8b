// gpuorch's c10d rendezvous against PyTorch's own (Debian's python3-torch 1.13): a node run by
// PyTorch's DynamicRendezvousHandler and torchrun's agent steps (tests/fixtures/launch/
// torch_c10d_node.py) and a `gpuorch launch` node meet in one round through PyTorch's store;
// a corrupt state in the store is one clear error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/launch/etcd_client.hpp"
#include "gpuorch/launch/net.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

using launch_test::read_file;

std::string gpuorch_node(int port, const std::string& run_id, const std::string& program) {
  return test::shell_quote(::gpuorch::test::binary_path()) +
         " launch --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" +
         std::to_string(port) + " --rdzv-id " + run_id + " --bind none -- " + program;
}

TEST(LaunchC10dTorch, TorchNodeAndGpuorchNodeShareOneRound) {
  if (!launch_test::have_torch()) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed (apt install python3-torch)";
  }
  test::TempDir dir;
  const int port = launch::pick_free_port("127.0.0.1");
  // PyTorch's node first, so its TCPStore serves the endpoint (as a torchrun on that host would).
  launch_test::Child torch_node("/usr/bin/python3 " +
                                    test::shell_quote(test::fixture("launch/torch_c10d_node.py")) +
                                    " 127.0.0.1:" + std::to_string(port) + " mixed 2",
                                dir.path() / "torch.out", dir.path() / "torch.err");
  for (int i = 0; i < 300 && launch::port_available("127.0.0.1", port); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  launch_test::Child ours(
      gpuorch_node(port, "mixed",
                   "/bin/sh -c 'echo $RANK $WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE "
                   "$MASTER_ADDR:$MASTER_PORT $TORCHELASTIC_USE_AGENT_STORE'"),
      dir.path() / "ours.out", dir.path() / "ours.err");
  const auto torch_code = torch_node.wait(std::chrono::seconds(120)).value_or(-1);
  const auto our_code = ours.wait(std::chrono::seconds(120)).value_or(-1);
  const auto torch_out = read_file(dir.path() / "torch.out");
  const auto our_out = read_file(dir.path() / "ours.out");
  const auto logs = torch_out + read_file(dir.path() / "torch.err") + our_out +
                    read_file(dir.path() / "ours.err");
  ASSERT_EQ(torch_code, 0) << logs;
  ASSERT_EQ(our_code, 0) << logs;
  const auto seen = nlohmann::json::parse(torch_out);
  const int torch_rank = seen["rank"];
  EXPECT_EQ(seen["world"], 2) << logs;
  EXPECT_EQ(seen["local_world_sizes"], nlohmann::json::array({1, 1})) << logs;
  const std::string master = seen["master"];
  const int our_rank = 1 - torch_rank;
  // The worker's line, prefixed [rank<N>]: RANK WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE
  // MASTER_ADDR:MASTER_PORT TORCHELASTIC_USE_AGENT_STORE (PyTorch 1.x: the workers' own store).
  EXPECT_EQ(our_out, fmt::format("[rank{0}]:{0} 2 {0} 2 {1} False\n", our_rank, master)) << logs;
  EXPECT_NE(logs.find("(joined)"), std::string::npos) << logs;
}

TEST(LaunchC10dTorch, CorruptStateIsOneError) {
  test::TempDir dir;
  comm::TcpStoreServer server("127.0.0.1", 0);
  comm::TcpStoreClient client("127.0.0.1", server.port(), std::chrono::seconds(5));
  const std::string junk = launch::base64_encode("\x80\x04N.");  // a pickled None
  client.set("/torch.rendezvous.bad",  // PyTorch's client writes "/" first
             std::vector<char>(junk.begin(), junk.end()));
  const auto r = test::run_cli({"launch", "--nnodes", "2", "--rdzv-backend", "c10d",
                                "--rdzv-endpoint", "127.0.0.1:" + std::to_string(server.port()),
                                "--rdzv-id", "bad", "--bind", "none", "--", "true"},
                               dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(
      r.err.find("gpuorch: error: c10d rendezvous at 127.0.0.1:" + std::to_string(server.port()) +
                 ": the state in torch.rendezvous.bad is not one gpuorch reads (rendezvous "
                 "state: the state is a None, not a "
                 "torch.distributed.elastic.rendezvous.dynamic_rendezvous._RendezvousState)"),
      std::string::npos)
      << r.err;
}

// --nnodes 1:2 through c10d: alone, the round completes after the last call; at the end the
// agent marks the rendezvous closed, so a later agent with the same run id is refused (torchrun's
// shutdown).
TEST(LaunchC10dTorch, ElasticRangeThenClosed) {
  test::TempDir dir;
  comm::TcpStoreServer server("127.0.0.1", 0);
  const std::vector<std::string> args{"launch",
                                      "--nnodes",
                                      "1:2",
                                      "--rdzv-backend",
                                      "c10d",
                                      "--rdzv-endpoint",
                                      "127.0.0.1:" + std::to_string(server.port()),
                                      "--rdzv-id",
                                      "el",
                                      "--rdzv-conf",
                                      "last_call_timeout=1",
                                      "--bind",
                                      "none",
                                      "--",
                                      "/bin/sh",
                                      "-c",
                                      "echo $RANK $WORLD_SIZE"};
  const auto first = test::run_cli(args, dir);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "[rank0]:0 1\n") << first.err;
  const auto second = test::run_cli(args, dir);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.err.find(
                "gpuorch: error: c10d rendezvous at 127.0.0.1:" + std::to_string(server.port()) +
                ": run 'el' is closed (its job ended); use a new --rdzv-id"),
            std::string::npos)
      << second.err;
}

}  // namespace
}  // namespace gpuorch
