// gpuorch's c10d TCPStore client and server against PyTorch's own (/usr/bin/python3, Debian's
// python3-torch 1.13, which speaks the format without VALIDATE): PyTorch's server as torchrun's
// agent store for two `gpuorch bench --backend host` ranks, and PyTorch's client against
// gpuorch's server, answered exactly as PyTorch's server answers it. Skipped without PyTorch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/comm/tcp_store.hpp"
#include "launch/launch_support.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;

#define GPUORCH_REQUIRE_TORCH()                                                         \
  if (!launch_test::have_torch()) {                                                     \
    GTEST_SKIP() << "/usr/bin/python3 -c 'import torch.distributed' failed: these "     \
                    "tests need PyTorch there (Debian: apt-get install python3-torch)"; \
  }

std::string python_command(const std::string& script, const std::string& args) {
  return "/usr/bin/python3 " + test::shell_quote(test::fixture("comm/" + script)) + " " + args;
}

// PyTorch's TCPStore server (tests/fixtures/comm/torch_store_server.py) in a process of its
// own, killed at scope exit whatever the test's outcome (and gone by itself after 60 s).
class TorchStoreServer {
 public:
  explicit TorchStoreServer(const test::TempDir& dir)
      : dir_(dir),
        child_(
            python_command("torch_store_server.py", test::shell_quote(dir.file("port")) + " 2 60"),
            dir.file("server.out"), dir.file("server.err")) {
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end && !child_.wait(1ms)) {
      const std::string port = test::read_text(dir.file("port"));
      if (!port.empty()) {
        port_ = std::stoi(port);
        return;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  int port() const { return port_; }  // 0: it did not start
  std::string log() const { return test::read_text(dir_.file("server.err")); }

 private:
  const test::TempDir& dir_;
  launch_test::Child child_;
  int port_ = 0;
};

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(TcpStorePyTorch, PyTorchServesTheStoreOfTwoBenchRanks) {
  GPUORCH_REQUIRE_TORCH();
  test::TempDir dir;
  TorchStoreServer server(dir);
  ASSERT_GT(server.port(), 0) << server.log();
  // Two runs on the one long-lived store, told apart by torchrun's run id, as under the agent.
  for (const std::string c : {"all_reduce", "sendrecv"}) {
    const auto rank = [&](int r) {
      return "env RANK=" + std::to_string(r) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
             " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
             std::to_string(server.port()) +
             " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RUN_ID=" + c +
             " TORCHELASTIC_RESTART_COUNT=0 timeout -s KILL 25 " +
             test::shell_quote(::gpuorch::test::binary_path()) + " bench " + c +
             " --backend host -b 1K -e 1K -n 2 --timeout 10";
    };
    const std::string both = rank(1) + " >/dev/null 2>" + dir.file("err1") + " & " + rank(0) +
                             " >" + dir.file("out0") + " 2>" + dir.file("err0") +
                             "; r0=$?; wait $!; exit $((r0 + $?))";
    const int status = std::system(("sh -c " + test::shell_quote(both)).c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << c << ": " << test::read_text(dir.file("err0")) << test::read_text(dir.file("err1"))
        << server.log();
    EXPECT_NE(test::read_text(dir.file("out0")).find("# Out of bounds values : 0 OK"),
              std::string::npos)
        << c << ": " << test::read_text(dir.file("out0"));
  }
}

// What PyTorch 1.13's client prints against PyTorch 1.13's own server (checked below too).
constexpr const char* kClientSays = R"(torch = ['1', '13']
get a = b'1'
add cnt 5 = 5
add cnt -2 = 3
get cnt = b'3'
compare_set cas '' first = b'first'
compare_set cas wrong x = b'first'
compare_set cas first second = b'second'
compare_set absent nope x = b'nope'
wait a cnt from-gpuorch = 'done'
get from-gpuorch = b'hello'
num_keys = 4
delete_key a = True
delete_key a again = False
num_keys = 3
wait never = 'timed out'
)";

TEST(TcpStorePyTorch, PyTorchClientGetsTheSameAnswersFromGpuorchsServer) {
  GPUORCH_REQUIRE_TORCH();
  test::TempDir dir;
  comm::TcpStoreServer ours("127.0.0.1", 0);
  TorchStoreServer theirs(dir);
  ASSERT_GT(theirs.port(), 0) << theirs.log();
  for (const auto& [name, port] : {std::pair<std::string, int>{"gpuorch", ours.port()},
                                   std::pair<std::string, int>{"PyTorch", theirs.port()}}) {
    // gpuorch's client, then PyTorch's, then gpuorch's again, on one store. PyTorch's client
    // puts "/" before its keys.
    comm::TcpStoreClient client("127.0.0.1", port, 10s);
    client.set("/from-gpuorch", bytes("hello"));
    const std::string out = dir.file(name + ".out"), err = dir.file(name + ".err");
    const int status =
        std::system(("timeout -s KILL 20 " +
                     python_command("torch_store_client.py", "127.0.0.1 " + std::to_string(port)) +
                     " >" + out + " 2>" + err + " </dev/null")
                        .c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << name << " server: " << test::read_text(err);
    EXPECT_EQ(test::read_text(out), kClientSays) << name << " server: " << test::read_text(err);
    EXPECT_EQ(client.get("/from-python"), bytes("world")) << name;
    EXPECT_EQ(client.add("/cnt", 10), 13) << name;
    EXPECT_TRUE(client.check({"/cnt", "/cas", "/from-python"})) << name;
    EXPECT_FALSE(client.check({"/a"})) << name;
  }
}

}  // namespace
}  // namespace gpuorch
