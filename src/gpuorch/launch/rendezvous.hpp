#pragma once
// How the agents of a job agree on a round: which nodes take part, each node's group rank, and
// where the workers' c10d store lives (MASTER_ADDR:MASTER_PORT). Static (ranks known: Slurm,
// Kubernetes indexed Jobs, a fixed list), etcd (elastic, min..max nodes) or c10d (PyTorch's own
// protocol, shared with torchrun's agents). docs/launch.md.
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuorch::launch {

// next_round gave up because the agent is stopping (a signal arrived).
class RendezvousCancelled : public std::runtime_error {
 public:
  RendezvousCancelled() : std::runtime_error("rendezvous cancelled") {}
};

struct RendezvousConfig {
  std::string backend = "static";  // static | etcd | c10d
  std::string endpoint;            // etcd: host:port; c10d: the store's host[:port]
  std::string run_id = "none";
  int min_nodes = 1;
  int max_nodes = 1;
  int node_rank = 0;  // static only
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // static; 0 = pick a free one (standalone)
  std::string local_addr;   // this node's address for MASTER_ADDR (etcd); default: towards etcd
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  int lease_ttl_s = 10;
  int local_world_size = 1;  // c10d: told to torchrun's agents (their role info)
  std::string role = "default";
};

struct Round {
  int round = 0;
  int group_rank = 0;
  int group_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> members;  // node ids in group-rank order
  // The workers' store is the rank-0 agent's (TORCHELASTIC_USE_AGENT_STORE=True), as PyTorch
  // 2.x's c10d rendezvous has it; otherwise rank 0 of the workers hosts it.
  bool agent_store = false;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Blocks until a round that includes this node closes. `cancelled` is polled while waiting.
  // Throws base::InputError for a bad configuration and std::runtime_error on timeout.
  virtual Round next_round(const std::function<bool()>& cancelled) = 0;
  // A node joined or left since the current round closed: restart the group (not a failure).
  virtual bool membership_changed() = 0;
  // This node is done with the job (`succeeded`: its workers all exited 0).
  virtual void finish(bool succeeded) = 0;
  // This node was stopped by a signal (an eviction, a preemption, a scale-down) while the job
  // may go on without it: it gives its place up and leaves the run open for the others. etcd's
  // finish (a lease revoke) does just that; c10d's would close the run for every node.
  virtual void leave() { finish(false); }
  [[nodiscard]] virtual std::string describe() const = 0;
};

std::unique_ptr<Rendezvous> make_rendezvous(const RendezvousConfig& config);
std::unique_ptr<Rendezvous> make_static_rendezvous(const RendezvousConfig& config);
std::unique_ptr<Rendezvous> make_etcd_rendezvous(const RendezvousConfig& config);
std::unique_ptr<Rendezvous> make_c10d_rendezvous(const RendezvousConfig& config);

}  // namespace gpuorch::launch
