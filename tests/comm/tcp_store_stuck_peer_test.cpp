// A peer that asks and never reads must not stall the store for everyone else: the server is one
// thread, and before the send timeout its blocking send to that peer waited forever.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/comm/tcp_store_wire.hpp"
#include "support/net.hpp"

namespace gpuorch::comm {
namespace {

TEST(TcpStoreStuckPeer, APeerThatNeverReadsDoesNotStallOthers) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient writer("127.0.0.1", server.port(), std::chrono::seconds(10));
  writer.set("big", std::vector<char>(8 << 20, 'x'));

  const int stuck = test::open_loopback(server.port(), 4096);  // fills at once
  ASSERT_GE(stuck, 0);
  std::vector<char> q{static_cast<char>(wire::kValidate)};
  q.resize(1 + sizeof wire::kValidateMagic);
  std::memcpy(q.data() + 1, &wire::kValidateMagic, sizeof wire::kValidateMagic);
  for (int i = 0; i < 8; ++i) {  // 64 MiB of answers, none of them read
    q.push_back(static_cast<char>(wire::kGet));
    wire::put_str(q, "big");
  }
  ASSERT_EQ(::send(stuck, q.data(), q.size(), MSG_NOSIGNAL), static_cast<ssize_t>(q.size()));

  const auto start = std::chrono::steady_clock::now();
  TcpStoreClient other("127.0.0.1", server.port(), std::chrono::seconds(20));
  EXPECT_EQ(other.add("n", 1), 1);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(5)) << "the server waited on the peer that never reads";
  ::close(stuck);
}

}  // namespace
}  // namespace gpuorch::comm
