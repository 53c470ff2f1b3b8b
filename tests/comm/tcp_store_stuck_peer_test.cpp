// A peer that asks and never reads must not stall the store for everyone else: the server is one
// thread, and before the send timeout its blocking send to that peer waited forever.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
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

// PyTorch 2.x's store client checks a new connection with PING (a u32 nonce it expects back); a
// server that refused it made torchrun fail to join a rendezvous gpuorch's agent serves.
TEST(TcpStorePing, TheNonceComesBack) {
  TcpStoreServer server("127.0.0.1", 0);
  const int fd = test::open_loopback(server.port(), 4096);
  ASSERT_GE(fd, 0);
  std::vector<char> q{static_cast<char>(wire::kValidate)};
  q.resize(1 + sizeof wire::kValidateMagic);
  std::memcpy(q.data() + 1, &wire::kValidateMagic, sizeof wire::kValidateMagic);
  const std::uint32_t nonce = 0xC0FFEE42;
  q.push_back(static_cast<char>(wire::kPing));
  const auto* p = reinterpret_cast<const char*>(&nonce);
  q.insert(q.end(), p, p + sizeof nonce);
  ASSERT_EQ(::send(fd, q.data(), q.size(), MSG_NOSIGNAL), static_cast<ssize_t>(q.size()));
  std::uint32_t back = 0;
  std::size_t got = 0;
  while (got < sizeof back) {
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&back) + got, sizeof back - got, 0);
    ASSERT_GT(n, 0) << "the server closed the connection";
    got += static_cast<std::size_t>(n);
  }
  EXPECT_EQ(back, nonce);
  ::close(fd);
}

}  // namespace
}  // namespace gpuorch::comm
