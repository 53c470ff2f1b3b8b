#pragma once
// How the host backend's ranks find each other: a store at MASTER_ADDR:MASTER_PORT (torchrun's
// contract; rank 0 serves it unless the launcher's agent already does), then Gloo's full mesh of
// TCP pairs on the interface chosen by --iface / GLOO_SOCKET_IFNAME.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gpuorch/comm/tcp_store.hpp"

namespace gloo {
class Context;
}

namespace gpuorch::comm::host {

struct Endpoint {
  int rank = 0;
  int world = 1;
  std::string master_addr;  // empty with world 1: no store needed
  int master_port = 0;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: someone else serves the store
  std::string store_prefix = "gpuorch-bench";
  std::string iface;  // Gloo's TCP interface; empty: the address that reaches MASTER_ADDR's side
  std::chrono::milliseconds timeout{60000};
};

struct Mesh {
  std::unique_ptr<TcpStoreServer> server;  // rank 0's store, kept for the whole run
  std::shared_ptr<gloo::Context> context;
  std::string address;  // this rank's Gloo endpoint, for the header
};

// Throws StoreError or gloo::Exception when the peers cannot be reached in time.
Mesh connect_mesh(const Endpoint& e);

// The host name Gloo's TCP device binds to without --iface: loopback when the store is local.
std::string default_hostname(const std::string& master_addr);

}  // namespace gpuorch::comm::host
