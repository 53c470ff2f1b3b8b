// c10d rendezvous (torchrun's default backend, by name and endpoint): the nodes meet in a c10d
// TCPStore at --rdzv-endpoint (comm/tcp_store). The agent on the endpoint's host serves it (the
// first that binds the port; the others connect), as torchrun's agent does. A fixed node count:
// in round k every node adds 1 to `<run>/<k>/joined`, its answer is its group rank; a node
// that finds round k full moves on to k+1. Node 0 publishes MASTER_ADDR:MASTER_PORT in
// `<run>/<k>/master`. A node that needs a new round (its workers failed, or it came late) opens
// k+1, which the running nodes see as a membership change. The state is gpuorch's own, so the
// nodes of one job are all gpuorch agents (docs/launch.md).
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/launch/net.hpp"
#include "gpuorch/launch/rendezvous.hpp"

namespace gpuorch::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultPort = 29400;  // torchrun's, when the endpoint names no port

std::pair<std::string, int> split_endpoint(const std::string& endpoint) {
  if (endpoint.empty()) base::fail_input("--rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT]");
  std::string host = endpoint;
  int port = kDefaultPort;
  const auto colon = endpoint.rfind(':');
  if (colon != std::string::npos && endpoint.find(']', colon) == std::string::npos) {
    host = endpoint.substr(0, colon);
    const std::string p = endpoint.substr(colon + 1);
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(p) < 1 || std::stoi(p) > 65535) {
      base::fail_input("--rdzv-endpoint " + endpoint + ": expected HOST[:PORT]");
    }
    port = std::stoi(p);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) base::fail_input("--rdzv-endpoint " + endpoint + ": expected HOST[:PORT]");
  return {host, port};
}

std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

class C10dRendezvous final : public Rendezvous {
 public:
  explicit C10dRendezvous(RendezvousConfig c) : c_(std::move(c)) {
    if (c_.min_nodes != c_.max_nodes) {
      base::fail_input(fmt::format(
          "--nnodes {}:{}: an elastic range needs --rdzv-backend etcd (c10d takes a fixed count)",
          c_.min_nodes, c_.max_nodes));
    }
    std::tie(host_, port_) = split_endpoint(c_.endpoint);
    prefix_ = "/gpuorch/rdzv/" + c_.run_id + "/";
    try {
      server_ = std::make_unique<comm::TcpStoreServer>(host_, port_);
    } catch (const comm::StoreError&) {
      // Another agent serves it, or the endpoint is another machine's.
    }
    try {
      store_ = std::make_unique<comm::TcpStoreClient>(host_, port_, c_.connect_timeout);
    } catch (const std::exception& e) {
      base::fail_input(fmt::format("--rdzv-endpoint {}: no c10d store after {} s ({})", c_.endpoint,
                                   c_.connect_timeout.count() / 1000, e.what()));
    }
    if (c_.local_addr.empty()) c_.local_addr = local_address_towards(host_, port_);
  }

  Round next_round(const std::function<bool()>& cancelled) override {
    int rank = 0;
    for (;; ++next_) {
      const auto n = store_->add(key(next_, "joined"), 1);
      if (n <= c_.max_nodes) {
        rank = static_cast<int>(n) - 1;
        break;
      }
    }
    const int round = next_++;
    current_ = round;
    const auto deadline = Clock::now() + c_.join_timeout;
    for (;;) {
      const auto joined = store_->add(key(round, "joined"), 0);
      if (joined >= c_.max_nodes) break;
      pause(cancelled, deadline, [&] {
        return fmt::format("c10d rendezvous at {}: round {} has {} of {} nodes after {} s",
                           c_.endpoint, round, joined, c_.max_nodes,
                           c_.join_timeout.count() / 1000);
      });
    }
    Round r;
    r.round = round;
    r.group_rank = rank;
    r.group_world_size = c_.max_nodes;
    if (rank == 0) {
      r.master_addr = c_.local_addr;
      r.master_port = pick_free_port(c_.local_addr);
      const std::string m = fmt::format("{}:{}", r.master_addr, r.master_port);
      store_->set(key(round, "master"), std::vector<char>(m.begin(), m.end()));
    } else {
      while (!store_->check({key(round, "master")})) {
        pause(cancelled, deadline, [&] {
          return fmt::format("c10d rendezvous at {}: node 0 of round {} published no store",
                             c_.endpoint, round);
        });
      }
      const auto m = text(store_->get(key(round, "master")));
      const auto colon = m.rfind(':');
      r.master_addr = m.substr(0, colon);
      r.master_port = std::stoi(m.substr(colon + 1));
    }
    for (int i = 0; i < c_.max_nodes; ++i) r.members.push_back(fmt::format("node{}", i));
    return r;
  }

  bool membership_changed() override {
    try {
      return store_->add(key(current_ + 1, "joined"), 0) > 0;
    } catch (const std::exception&) {
      return false;  // the serving agent is gone: the job is ending
    }
  }

  void finish(bool) override {
    try {
      store_->add(key(current_, "done"), 1);
      if (!server_) return;
      // The serving agent stays until every node has said so (bounded), so none loses the store.
      const auto deadline = Clock::now() + c_.last_call_timeout;
      while (store_->add(key(current_, "done"), 0) < c_.max_nodes && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    } catch (const std::exception&) {
    }
  }

  [[nodiscard]] std::string describe() const override {
    return fmt::format("c10d, {} nodes, store {}:{} ({})", c_.max_nodes, host_, port_,
                       server_ ? "served here" : "joined");
  }

 private:
  [[nodiscard]] std::string key(int round, const char* what) const {
    return fmt::format("{}{}/{}", prefix_, round, what);
  }

  template <typename Why>
  static void pause(const std::function<bool()>& cancelled, Clock::time_point deadline,
                    const Why& why) {
    if (cancelled && cancelled()) throw RendezvousCancelled();
    if (Clock::now() >= deadline) throw std::runtime_error(why());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  RendezvousConfig c_;
  std::string host_;
  int port_ = 0;
  std::string prefix_;
  std::unique_ptr<comm::TcpStoreServer> server_;
  std::unique_ptr<comm::TcpStoreClient> store_;
  int next_ = 0;
  int current_ = 0;
};

}  // namespace

std::unique_ptr<Rendezvous> make_c10d_rendezvous(const RendezvousConfig& config) {
  return std::make_unique<C10dRendezvous>(config);
}

}  // namespace gpuorch::launch
