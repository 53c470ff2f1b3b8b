#include "gpuorch/comm/host_rendezvous.hpp"

#include <fmt/format.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <array>

namespace gpuorch::comm::host {
namespace {

// Gloo's Store interface over the TCP store, under a prefix of this run's own.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(TcpStoreClient& client, std::string prefix)
      : client_(client), prefix_(std::move(prefix) + "/") {}
  void set(const std::string& key, const std::vector<char>& data) override {
    client_.set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string& key) override { return client_.get(prefix_ + key); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, client_.timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    client_.wait(full, timeout);
  }

 private:
  TcpStoreClient& client_;
  std::string prefix_;
};

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

// Rank 0's store, on the address MASTER_ADDR names (loopback stays loopback), and only when it
// is no address of this host (a Service or NAT address) on every interface; says which.
std::unique_ptr<TcpStoreServer> serve_store(const Endpoint& e) {
  std::unique_ptr<TcpStoreServer> server;
  std::string note;
  try {
    server = std::make_unique<TcpStoreServer>(e.master_addr, e.master_port);
  } catch (const StoreAddressError&) {
    server = std::make_unique<TcpStoreServer>("", e.master_port);
    note = fmt::format(" (MASTER_ADDR={} is no address of this host)", e.master_addr);
  }
  fmt::print(stderr, "gpuorch bench: rank 0: store listening on {}{}\n", server->address(), note);
  return server;
}

}  // namespace

std::string default_hostname(const std::string& master_addr) {
  if (master_addr.empty() || is_loopback(master_addr)) return "127.0.0.1";
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "127.0.0.1";
  return name.data();
}

Mesh connect_mesh(const Endpoint& e) {
  Mesh m;
  gloo::transport::tcp::attr attr;
  if (!e.iface.empty()) {
    attr.iface = e.iface;
  } else {
    attr.hostname = default_hostname(e.master_addr);
  }
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(e.rank, e.world);
  context->setTimeout(e.timeout);
  if (e.world == 1 || e.master_addr.empty()) {
    gloo::rendezvous::HashStore store;
    context->connectFullMesh(store, device);
  } else {
    if (e.rank == 0 && !e.agent_store) m.server = serve_store(e);
    TcpStoreClient client(e.master_addr, e.master_port, e.timeout);
    StoreAdapter store(client, e.store_prefix);
    context->connectFullMesh(store, device);
  }
  m.address = device->str();
  m.context = std::move(context);
  return m;
}

}  // namespace gpuorch::comm::host
