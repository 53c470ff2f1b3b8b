#pragma once
// Network helpers for tests that start several processes on loopback.
#include <stdexcept>

#include "gpuorch/launch/net.hpp"

namespace gpuorch::test {

// A TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT in multi-process tests).
inline int free_loopback_port() {
  const int port = launch::pick_free_port("127.0.0.1");
  if (port == 0) throw std::runtime_error("no free loopback port");
  return port;
}

}  // namespace gpuorch::test
