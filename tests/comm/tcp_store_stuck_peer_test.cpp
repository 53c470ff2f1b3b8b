// A peer that asks and never reads must not stall the store for everyone else: the server is one
// thread, and before the send timeout its blocking send to that peer waited forever.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/comm/tcp_store_wire.hpp"

namespace gpuorch::comm {
namespace {

int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;  // the reader's side fills at once
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(TcpStoreStuckPeer, APeerThatNeverReadsDoesNotStallOthers) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient writer("127.0.0.1", server.port(), std::chrono::seconds(10));
  writer.set("big", std::vector<char>(8 << 20, 'x'));

  const int stuck = connect_raw(server.port());
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
