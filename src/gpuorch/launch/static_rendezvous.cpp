// Static rendezvous: node rank and node count are known up front (flags, Slurm, a Kubernetes
// indexed Job), the store lives at --master-addr:--master-port. Every round is the same.
#include <fmt/format.h>

#include "gpuorch/base/error.hpp"
#include "gpuorch/launch/net.hpp"
#include "gpuorch/launch/rendezvous.hpp"

namespace gpuorch::launch {
namespace {

class StaticRendezvous final : public Rendezvous {
 public:
  explicit StaticRendezvous(RendezvousConfig c) : c_(std::move(c)) {
    if (c_.min_nodes != c_.max_nodes) {
      base::fail_input(fmt::format(
          "--nnodes {}:{}: an elastic range needs --rdzv-backend etcd or c10d (static ranks are fixed)",
          c_.min_nodes, c_.max_nodes));
    }
    if (c_.node_rank < 0 || c_.node_rank >= c_.max_nodes) {
      base::fail_input(fmt::format("--node-rank {}: not in 0..{}", c_.node_rank, c_.max_nodes - 1));
    }
    if (c_.master_port < 0 || c_.master_port > 65535) {
      base::fail_input(fmt::format("--master-port {}: not a TCP port", c_.master_port));
    }
    // Node 0's rank 0 will listen there; say so now rather than as a worker's stack trace.
    if (c_.node_rank == 0 && c_.master_port != 0 &&
        !port_available(c_.master_addr, c_.master_port)) {
      base::fail_input(
          fmt::format("--master-port {}: port in use on {}", c_.master_port, c_.master_addr));
    }
  }

  Round next_round(const std::function<bool()>&) override {
    Round r;
    r.round = round_++;
    r.group_rank = c_.node_rank;
    r.group_world_size = c_.max_nodes;
    r.master_addr = c_.master_addr;
    if (c_.master_port == 0) {
      // Standalone: a fresh port per round, so a restarted store never meets the old one's socket.
      r.master_port = pick_free_port(c_.master_addr);
    } else {
      r.master_port = c_.master_port;
    }
    return r;
  }

  bool membership_changed() override { return false; }
  void finish(bool) override {}
  [[nodiscard]] std::string describe() const override {
    return fmt::format("static, node {} of {}, store {}:{}", c_.node_rank, c_.max_nodes,
                       c_.master_addr,
                       c_.master_port == 0 ? "auto" : std::to_string(c_.master_port));
  }

 private:
  RendezvousConfig c_;
  int round_ = 0;
};

}  // namespace

std::unique_ptr<Rendezvous> make_static_rendezvous(const RendezvousConfig& config) {
  return std::make_unique<StaticRendezvous>(config);
}

std::unique_ptr<Rendezvous> make_rendezvous(const RendezvousConfig& config) {
  if (config.backend == "static") return make_static_rendezvous(config);
  if (config.backend == "etcd" || config.backend == "etcd-v3") return make_etcd_rendezvous(config);
  if (config.backend == "c10d") return make_c10d_rendezvous(config);
  base::fail_input("--rdzv-backend " + config.backend + ": not static, etcd or c10d");
}

}  // namespace gpuorch::launch
