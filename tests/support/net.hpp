#pragma once
// Network helpers for tests that start several processes on loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

#include "gpuorch/launch/net.hpp"

namespace gpuorch::test {

// A TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT in multi-process tests).
inline int free_loopback_port() {
  const int port = launch::pick_free_port("127.0.0.1");
  if (port == 0) throw std::runtime_error("no free loopback port");
  return port;
}

// A TCP connection to 127.0.0.1:port that a test drives by hand; -1 when refused. A receive
// buffer > 0 is set before connecting (a small one makes a peer that reads slowly).
// `source`: the local address to connect from (127.0.0.2 is another peer than 127.0.0.1).
inline int open_loopback(int port, int receive_buffer = 0, const char* source = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd);
      return -1;
    }
  }
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

}  // namespace gpuorch::test
