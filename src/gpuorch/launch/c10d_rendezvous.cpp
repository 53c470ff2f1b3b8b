// c10d rendezvous, PyTorch's own protocol (torch.distributed.elastic.rendezvous, the dynamic
// handler with the C10d backend), so gpuorch agents and torchrun's agents meet in one round.
// The nodes share a TCPStore at --rdzv-endpoint (comm/tcp_store; the agent on the endpoint's
// host serves it, the first that binds the port, as torchrun's does). The round lives in one key,
// `torch.rendezvous.<run id>` (`/torch...` on the wire, as PyTorch's client writes keys): the
// base64 of the pickled `_RendezvousState` (torch_rdzv_state), changed only by compare-set against
// the value last read. The state machine is torch's:
//   join: a node adds itself to the participants of an open round; at min nodes a last-call
//     deadline starts, at max nodes (or past the deadline) the round is complete and ranks go by
//     the participants' sorted (host, pid, local id). A node that finds the round complete goes
//     on the wait list; the running nodes see a waiting node and restart into a new round (a
//     membership change), which opens when the last participant leaves the complete one.
//   heartbeats every 5 s; a node silent for 15 s is dropped from the state by whoever reads it.
//   shutdown marks the rendezvous closed: no later node may join. Not after a signal: torchrun
//     then leaves the rendezvous open ("prevents any additional scaling events", its
//     launcher/api.py) and the others drop the node after 15 s; gpuorch's agent leaves the round
//     (torch's exit op), so they re-form without it at once.
// After the round, under the prefix `torch.rendezvous.<run id>.<round>/`, what torchrun's agents
// do next: rank 0 publishes MASTER_ADDR/MASTER_PORT, every node its role info (the keys of
// PyTorch 1.x and of 2.x), rank 0 the assigned ranks (2.x), and at the end the exit barrier.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/launch/etcd_client.hpp"
#include "gpuorch/launch/net.hpp"
#include "gpuorch/launch/py_pickle.hpp"
#include "gpuorch/launch/rendezvous.hpp"
#include "gpuorch/launch/torch_rdzv_state.hpp"

namespace gpuorch::launch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kDefaultPort = 29400;  // torchrun's, when the endpoint names no port
// What c10d's backend stores while there is no state (a store's get blocks on a missing key).
constexpr std::string_view kNullSentinel = "Y2FuaW1hZGFt";
constexpr auto kKeepAliveInterval = seconds(5);
constexpr int kKeepAliveMaxAttempts = 3;
constexpr auto kCloseTimeout = seconds(30);
constexpr auto kRollback = seconds(5);              // past the join deadline, to leave the round
constexpr auto kExitBarrierTimeout = seconds(300);  // torchrun's exit_barrier_timeout

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

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

UtcMicros utc_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
constexpr UtcMicros micros(std::chrono::milliseconds d) { return d.count() * 1000; }

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

template <typename T>
bool erase_node(std::vector<T>& v, const TorchNode& n) {
  const auto it = std::find_if(v.begin(), v.end(), [&](const T& e) {
    if constexpr (std::is_same_v<T, TorchNode>)
      return e == n;
    else
      return e.first == n;
  });
  if (it == v.end()) return false;
  v.erase(it);
  return true;
}

enum class Action {
  kKeepAlive,
  kAddParticipant,
  kAddWait,
  kAddRedundant,
  kRemoveParticipant,
  kRemoveWait,
  kRemoveRedundant,
  kComplete,
  kClose,
  kSync,
  kErrorClosed,
  kErrorTimeout,
  kFinish,
};

class C10dRendezvous final : public Rendezvous {
 public:
  explicit C10dRendezvous(RendezvousConfig c) : c_(std::move(c)) {
    if (c_.min_nodes < 1 || c_.max_nodes < c_.min_nodes) {
      base::fail_input(
          fmt::format("--nnodes {}:{}: need 1 <= MIN <= MAX", c_.min_nodes, c_.max_nodes));
    }
    std::tie(host_, port_) = split_endpoint(c_.endpoint);
    // PyTorch's TCPStore client puts "/" before every key: so does this one, to share them.
    key_ = "/torch.rendezvous." + c_.run_id;
    try {
      server_ = std::make_unique<comm::TcpStoreServer>(host_, port_);
    } catch (const comm::StoreError&) {
      // Another agent serves it, or the endpoint is another machine's.
    }
    try {
      store_ = std::make_unique<comm::TcpStoreClient>(host_, port_, c_.connect_timeout);
      state_store_ = std::make_unique<comm::TcpStoreClient>(host_, port_, c_.connect_timeout);
    } catch (const std::exception& e) {
      base::fail_input(fmt::format("--rdzv-endpoint {}: no c10d store after {} s ({})", c_.endpoint,
                                   c_.connect_timeout.count() / 1000, e.what()));
    }
    const bool user_addr = !c_.local_addr.empty();
    if (!user_addr) c_.local_addr = local_address_towards(host_, port_);
    // PyTorch names a node by its FQDN (or --local-addr); the pid and a per-process counter tell
    // apart the agents of one host. The first state is written in the kind PyTorch 1.x reads if
    // its store answers (no VALIDATE), else as current PyTorch writes it.
    me_ = {user_addr ? c_.local_addr : host_name(), ::getpid(), 0};
    fallback_ = store_->legacy() ? torch1_dialect() : torch2_dialect();
    state_.dialect = fallback_;
    try {
      state_store_->compare_set(key_, {}, bytes(kNullSentinel));
      // Marks this node as a gpuorch agent, so a round of gpuorch agents only keeps gpuorch's
      // own worker store (rank 0 of the workers hosts it).
      store_->set(gpuorch_key(me_), bytes("1"));
    } catch (const std::exception& e) {
      base::fail_input(fmt::format("--rdzv-endpoint {}: {}", c_.endpoint, e.what()));
    }
  }

  ~C10dRendezvous() override { stop_heartbeats(); }
  C10dRendezvous(const C10dRendezvous&) = delete;
  C10dRendezvous& operator=(const C10dRendezvous&) = delete;

  Round next_round(const std::function<bool()>& cancelled) override {
    stop_heartbeats();
    std::unique_lock lock(mu_);
    auto deadline = Clock::now() + c_.join_timeout;
    run([&] { return exit_op(deadline); }, cancelled);
    run([&] { return join_op(deadline); }, cancelled);
    Round r;
    r.round = static_cast<int>(state_.round);
    r.group_rank = static_cast<int>(*state_.rank_of(me_));
    r.group_world_size = static_cast<int>(state_.participants.size());
    auto order = state_.participants;
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [n, rank] : order) r.members.push_back(n.text());
    round_ = r;
    const bool torch2 = state_.dialect.aware_times;
    lock.unlock();
    // The heartbeats go on (their own connection) while the agents agree on the workers' store.
    start_heartbeats();
    after_round(r, order, torch2, cancelled);
    return r;
  }

  bool membership_changed() override {
    std::lock_guard lock(mu_);
    try {
      if (Clock::now() - last_read_ >= seconds(1)) sync(false);  // torch's 1 s cache
      return !state_.wait_list.empty();
    } catch (const std::exception&) {
      return false;  // the serving agent is gone: the job is ending
    }
  }

  void finish(bool succeeded) override {
    try {
      if (succeeded && round_) exit_barrier(*round_);  // heartbeats go on meanwhile, as torch's
    } catch (const std::exception&) {
    }
    stop_heartbeats();
    std::lock_guard lock(mu_);
    try {
      const auto deadline = Clock::now() + kCloseTimeout;
      run([&] { return close_op(deadline); }, nullptr);
    } catch (const std::exception&) {  // as torchrun: a failed shutdown is only a warning
    }
  }

  void leave() override {
    stop_heartbeats();
    std::lock_guard lock(mu_);
    try {
      const auto deadline = Clock::now() + kCloseTimeout;
      run([&] { return leave_op(deadline); }, nullptr);
    } catch (const std::exception&) {  // the others drop it after 15 s without heartbeats
    }
  }

  [[nodiscard]] std::string describe() const override {
    return fmt::format("c10d, {}..{} nodes, store {}:{} ({})", c_.min_nodes, c_.max_nodes, host_,
                       port_, server_ ? "served here" : "joined");
  }

 private:
  [[nodiscard]] std::string gpuorch_key(const TorchNode& n) const {
    return fmt::format("{}.gpuorch.{}", key_, n.text());
  }
  [[nodiscard]] std::string round_key(int round, const std::string& what) const {
    return fmt::format("{}.{}/{}", key_, round, what);
  }

  // ---- the shared state (torch's _BackendRendezvousStateHolder) ----

  // Writes our state (compare-set against the token read last) or reads the current one; then
  // drops the nodes whose heartbeats stopped. Returns whether our write won.
  bool sync(bool write) {
    std::string got;
    bool won = false;
    if (write) {
      const auto mine = base64_encode(encode_torch_state(state_));
      got = text(state_store_->compare_set(key_, bytes(token_.empty() ? kNullSentinel : token_),
                                           bytes(mine)));
      won = got == mine;
    } else {
      got = text(state_store_->get(key_));
    }
    last_read_ = Clock::now();
    if (got == kNullSentinel) {
      state_ = TorchRdzvState{};
      state_.dialect = fallback_;
      token_.clear();
    } else {
      try {
        state_ = decode_torch_state(base64_decode(got), fallback_);
      } catch (const pickle::PickleError& e) {
        throw std::runtime_error(
            fmt::format("c10d rendezvous at {}: the state in {} is not one "
                        "gpuorch reads ({})",
                        c_.endpoint, key_.substr(1), e.what()));
      }
      token_ = got;
    }
    sanitize();
    return won;
  }

  void sanitize() {
    const UtcMicros expire = utc_now() - micros(kKeepAliveInterval * kKeepAliveMaxAttempts);
    std::vector<TorchNode> dead;
    for (const auto& [n, t] : state_.last_heartbeats) {
      if (t < expire) dead.push_back(n);
    }
    bool participant_removed = false;
    for (const auto& n : dead) {
      erase_node(state_.last_heartbeats, n);
      participant_removed |= erase_node(state_.participants, n);
      erase_node(state_.wait_list, n);
      erase_node(state_.redundancy_list, n);
    }
    if (participant_removed) participant_left();
  }

  void participant_left() {
    if (state_.complete) {
      if (state_.participants.empty()) {  // the last one left: the next round opens
        state_.complete = false;
        ++state_.round;
      }
    } else if (static_cast<int>(state_.participants.size()) < c_.min_nodes) {
      state_.deadline.reset();
    }
  }

  // ---- operations (torch's _RendezvousExitOp, JoinOp, CloseOp, KeepAliveOp) ----

  template <typename Op>
  void run(const Op& op, const std::function<bool()>& cancelled) {
    bool dirty = false;
    for (;;) {
      sync(dirty);
      dirty = false;
      const Action a = op();
      switch (a) {
        case Action::kFinish:
          return;
        case Action::kErrorClosed:
          throw std::runtime_error(fmt::format(
              "c10d rendezvous at {}: run '{}' is closed (its job ended); use a new --rdzv-id",
              c_.endpoint, c_.run_id));
        case Action::kErrorTimeout:
          throw std::runtime_error(
              fmt::format("c10d rendezvous at {}: round {} has {} of {}..{} nodes after {} s",
                          c_.endpoint, state_.round, state_.participants.size(), c_.min_nodes,
                          c_.max_nodes, c_.join_timeout.count() / 1000));
        case Action::kSync:
          for (int i = 0; i < 10; ++i) {  // torch polls once a second
            if (cancelled && cancelled()) throw RendezvousCancelled();
            std::this_thread::sleep_for(milliseconds(100));
          }
          break;
        default:
          apply(a);
          dirty = true;
      }
    }
  }

  [[nodiscard]] bool should_keep_alive() const {
    for (const auto& [n, t] : state_.last_heartbeats) {
      if (n == me_) return t <= utc_now() - micros(kKeepAliveInterval);
    }
    return false;
  }
  [[nodiscard]] bool redundant() const {
    return std::find(state_.redundancy_list.begin(), state_.redundancy_list.end(), me_) !=
           state_.redundancy_list.end();
  }

  Action exit_op(Clock::time_point deadline) const {
    if (!state_.rank_of(me_)) return Action::kFinish;
    return Clock::now() > deadline ? Action::kErrorTimeout : Action::kRemoveParticipant;
  }

  Action join_op(Clock::time_point& deadline) const {
    const auto& s = state_;
    const auto n = static_cast<int>(s.participants.size());
    if (s.closed) return Action::kErrorClosed;
    if (redundant()) {
      if (n == c_.max_nodes) return should_keep_alive() ? Action::kKeepAlive : Action::kSync;
      deadline = Clock::now() + c_.join_timeout;  // it may take part now: a fresh deadline
      return Action::kRemoveRedundant;
    }
    const bool participant = s.rank_of(me_) != nullptr;
    if (s.complete && participant) return Action::kFinish;
    const auto now = Clock::now();
    if (now > deadline) {
      if (now <= deadline + kRollback) {
        if (participant) return Action::kRemoveParticipant;
        if (s.waiting(me_)) return Action::kRemoveWait;
      }
      return Action::kErrorTimeout;
    }
    if (s.complete) {
      if (n < c_.max_nodes) {
        if (!s.waiting(me_)) return Action::kAddWait;
      } else if (s.dialect.redundancy_list && !s.waiting(me_)) {
        return Action::kAddRedundant;
      }
    } else if (participant) {
      if (n >= c_.min_nodes && n <= c_.max_nodes && s.deadline && *s.deadline < utc_now()) {
        return Action::kComplete;
      }
    } else {
      return Action::kAddParticipant;
    }
    return should_keep_alive() ? Action::kKeepAlive : Action::kSync;
  }

  // Out of the participants, the wait list and the redundancy list, whichever holds it.
  Action leave_op(Clock::time_point deadline) const {
    const bool participant = state_.rank_of(me_) != nullptr;
    if (!participant && !state_.waiting(me_) && !redundant()) return Action::kFinish;
    if (Clock::now() > deadline) return Action::kErrorTimeout;
    if (participant) return Action::kRemoveParticipant;
    return state_.waiting(me_) ? Action::kRemoveWait : Action::kRemoveRedundant;
  }

  Action close_op(Clock::time_point deadline) const {
    if (state_.closed) return Action::kFinish;
    return Clock::now() > deadline ? Action::kErrorTimeout : Action::kClose;
  }

  Action keep_alive_op(Clock::time_point deadline) const {
    if (!should_keep_alive()) return Action::kFinish;
    return Clock::now() > deadline ? Action::kErrorTimeout : Action::kKeepAlive;
  }

  void keep_alive() {
    for (auto& [n, t] : state_.last_heartbeats) {
      if (n == me_) {
        t = utc_now();
        return;
      }
    }
    state_.last_heartbeats.emplace_back(me_, utc_now());
  }

  void apply(Action a) {
    auto& s = state_;
    switch (a) {
      case Action::kKeepAlive:
        keep_alive();
        break;
      case Action::kAddParticipant: {
        erase_node(s.wait_list, me_);
        s.participants.emplace_back(me_, 0);  // ranks are given when the round completes
        keep_alive();
        const auto n = static_cast<int>(s.participants.size());
        if (n == c_.min_nodes) s.deadline = utc_now() + micros(c_.last_call_timeout);
        if (n == c_.max_nodes) apply(Action::kComplete);
        break;
      }
      case Action::kAddWait:
        erase_node(s.redundancy_list, me_);
        s.wait_list.push_back(me_);
        keep_alive();
        break;
      case Action::kAddRedundant:
        s.redundancy_list.push_back(me_);
        keep_alive();
        break;
      case Action::kRemoveParticipant:
        erase_node(s.participants, me_);
        erase_node(s.last_heartbeats, me_);
        participant_left();
        break;
      case Action::kRemoveWait:
        erase_node(s.wait_list, me_);
        erase_node(s.last_heartbeats, me_);
        break;
      case Action::kRemoveRedundant:
        erase_node(s.redundancy_list, me_);
        erase_node(s.last_heartbeats, me_);
        break;
      case Action::kComplete: {
        s.complete = true;
        s.deadline.reset();
        std::vector<TorchNode> order;
        for (const auto& [n, rank] : s.participants) order.push_back(n);
        std::sort(order.begin(), order.end());
        for (auto& [n, rank] : s.participants) {
          rank = std::find(order.begin(), order.end(), n) - order.begin();
        }
        break;
      }
      case Action::kClose:
        s.closed = true;
        break;
      default:
        break;
    }
  }

  // ---- heartbeats (torch's keep-alive timer) ----

  void start_heartbeats() {
    stop_ = false;
    heartbeat_ = std::thread([this] {
      std::unique_lock wait_lock(stop_mu_);
      while (!stop_cv_.wait_for(wait_lock, kKeepAliveInterval, [this] { return stop_; })) {
        std::lock_guard lock(mu_);
        try {
          const auto deadline = Clock::now() + kKeepAliveInterval;
          run([&] { return keep_alive_op(deadline); }, nullptr);
        } catch (const std::exception&) {  // as torch: a missed heartbeat is only a warning
        }
      }
    });
  }

  void stop_heartbeats() {
    {
      std::lock_guard lock(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  // ---- what torchrun's agents do after the round ----

  void after_round(Round& r, const std::vector<std::pair<TorchNode, std::int64_t>>& order,
                   bool torch2, const std::function<bool()>& cancelled) {
    const TorchNode& leader = order.front().first;
    bool all_gpuorch = true;
    for (const auto& [n, rank] : order)
      all_gpuorch = all_gpuorch && store_->check({gpuorch_key(n)});
    const char* no_share = std::getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
    const bool may_share = !(no_share && std::string(no_share) == "1");
    if (r.group_rank == 0) {
      // PyTorch 2.x's rank 0 serves the workers' store from its agent; its other nodes' workers
      // connect to it. gpuorch does the same when such nodes are in the round.
      r.agent_store = may_share && !all_gpuorch && torch2;
      r.master_addr = c_.local_addr;
      if (r.agent_store) {
        if (!agent_store_) agent_store_ = std::make_unique<comm::TcpStoreServer>("", 0);
        r.master_port = agent_store_->port();
      } else {
        r.master_port = pick_free_port(c_.local_addr);
      }
      store_->set(round_key(r.round, "gpuorch/agent_store"), bytes(r.agent_store ? "1" : "0"));
      store_->set(round_key(r.round, "MASTER_ADDR"), bytes(r.master_addr));
      store_->set(round_key(r.round, "MASTER_PORT"), bytes(std::to_string(r.master_port)));
    } else {
      r.master_addr = text(store_->get(round_key(r.round, "MASTER_ADDR")));
      const auto port = text(store_->get(round_key(r.round, "MASTER_PORT")));
      if (port.empty() || port.size() > 5 ||
          port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
          std::stoi(port) > 65535) {
        throw std::runtime_error(
            fmt::format("c10d rendezvous at {}: node 0 published MASTER_PORT '{}'", c_.endpoint,
                        port.substr(0, 64)));
      }
      r.master_port = std::stoi(port);
      if (store_->check({gpuorch_key(leader)})) {
        r.agent_store = text(store_->get(round_key(r.round, "gpuorch/agent_store"))) == "1";
      } else {  // torchrun's rank 0: PyTorch 2.x shares its store unless told not to
        r.agent_store = may_share && torch2;
      }
    }
    share_role_info(r, cancelled);
  }

  // torchrun's agents learn the workers' ranks from each node's role info: PyTorch 1.x reads
  // every node's `torchelastic/role_info<i>` and marks `<key>.FIN`; 2.x writes
  // `torchelastic/role_info/<i>` and waits for rank 0's `torchelastic/assigned_ranks/<i>`.
  // gpuorch writes both, and its ranks assume the same worker count on every node: checked.
  void share_role_info(const Round& r, const std::function<bool()>& cancelled) {
    const char* identical = std::getenv("TORCH_ELASTIC_WORKER_IDENTICAL");
    if (identical && std::string(identical) == "1") return;  // 2.x skips the exchange
    const nlohmann::json mine{
        {"role", c_.role}, {"rank", r.group_rank}, {"local_world_size", c_.local_world_size}};
    const std::string old_prefix = "torchelastic/role_info", new_prefix = "torchelastic/role_info/";
    store_->set(round_key(r.round, old_prefix + std::to_string(r.group_rank)), bytes(mine.dump()));
    store_->set(round_key(r.round, new_prefix + std::to_string(r.group_rank)), bytes(mine.dump()));
    const auto deadline = Clock::now() + c_.join_timeout;
    std::vector<nlohmann::json> infos;
    for (int i = 0; i < r.group_world_size; ++i) {
      const auto old_key = round_key(r.round, old_prefix + std::to_string(i));
      const auto new_key = round_key(r.round, new_prefix + std::to_string(i));
      std::string got;
      for (;;) {
        if (store_->check({new_key}))
          got = text(store_->get(new_key));
        else if (store_->check({old_key}))
          got = text(store_->get(old_key));
        if (!got.empty()) break;
        if (cancelled && cancelled()) throw RendezvousCancelled();
        if (Clock::now() > deadline) {
          throw std::runtime_error(
              fmt::format("c10d rendezvous at {}: node {} of round {} told no "
                          "role info",
                          c_.endpoint, i, r.round));
        }
        std::this_thread::sleep_for(milliseconds(100));
      }
      const auto info = nlohmann::json::parse(got, nullptr, false);
      if (info.is_discarded() || !info.is_object() || !info.contains("local_world_size") ||
          !info["local_world_size"].is_number_integer() || !info.contains("role") ||
          !info["role"].is_string()) {
        throw std::runtime_error(
            fmt::format("c10d rendezvous at {}: node {}'s role info is not "
                        "torchelastic's: {}",
                        c_.endpoint, i, got.substr(0, 200)));
      }
      if (info["local_world_size"].get<std::int64_t>() != c_.local_world_size) {
        throw std::runtime_error(fmt::format(
            "c10d rendezvous at {}: node {} runs {} workers, this one {}: gpuorch's ranks need the "
            "same --nproc-per-node on every node",
            c_.endpoint, i, info["local_world_size"].get<std::int64_t>(), c_.local_world_size));
      }
      infos.push_back(info);
    }
    store_->set(round_key(r.round, old_prefix + std::to_string(r.group_rank) + ".FIN"),
                bytes("FIN"));
    if (r.group_rank != 0) return;
    // [base global rank, global world size, base role rank, role world size] per node, in
    // group-rank order, as 2.x's rank 0 assigns them.
    std::map<std::string, std::int64_t> role_size, role_next;
    for (const auto& info : infos)
      role_size[info["role"].get<std::string>()] += c_.local_world_size;
    const auto world = static_cast<std::int64_t>(infos.size()) * c_.local_world_size;
    std::int64_t base = 0;
    for (std::size_t i = 0; i < infos.size(); ++i) {
      const auto role = infos[i]["role"].get<std::string>();
      const nlohmann::json ranks{base, world, role_next[role], role_size[role]};
      store_->set(round_key(r.round, "torchelastic/assigned_ranks/" + std::to_string(i)),
                  bytes(ranks.dump()));
      base += c_.local_world_size;
      role_next[role] += c_.local_world_size;
    }
  }

  // torchrun's exit barrier, both kinds: 1.x sets `terminal_state<rank>` and reads every node's;
  // 2.x counts `terminal_state/num_members` and the last sets `terminal_state/last_member`.
  void exit_barrier(const Round& r) {
    const std::string prefix = "torchelastic/agent/terminal_state";
    store_->set(round_key(r.round, prefix + std::to_string(r.group_rank)),
                bytes(std::to_string(r.group_rank)));
    if (store_->add(round_key(r.round, prefix + "/num_members"), 1) == r.group_world_size) {
      store_->set(round_key(r.round, prefix + "/last_member"), bytes("<val_ignored>"));
    }
    std::vector<std::string> old_keys;
    for (int i = 0; i < r.group_world_size; ++i)
      old_keys.push_back(round_key(r.round, prefix + std::to_string(i)));
    const auto deadline = Clock::now() + kExitBarrierTimeout;
    for (;;) {
      if (store_->check({round_key(r.round, prefix + "/last_member")})) break;
      if (store_->check(old_keys)) {
        store_->set(round_key(r.round, prefix + std::to_string(r.group_rank) + ".FIN"),
                    bytes("FIN"));
        break;
      }
      if (Clock::now() > deadline || barrier_broken(r)) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  // A node that failed closes the rendezvous, and one stopped by a signal leaves the round
  // (leave), without reaching the barrier: stop waiting for it (torchrun waits the whole
  // exit_barrier_timeout). Read once a second.
  bool barrier_broken(const Round& r) {
    std::lock_guard lock(mu_);
    if (Clock::now() - last_read_ < seconds(1)) return false;
    try {
      sync(false);
    } catch (const std::exception&) {
      return true;  // the store is gone
    }
    return state_.closed || state_.round != r.round ||
           static_cast<int>(state_.participants.size()) < r.group_world_size;
  }

  RendezvousConfig c_;
  std::string host_;
  int port_ = 0;
  std::string key_;
  std::unique_ptr<comm::TcpStoreServer> server_;
  std::unique_ptr<comm::TcpStoreServer> agent_store_;  // the workers' store, when shared
  std::unique_ptr<comm::TcpStoreClient> store_;        // the round's keys (the agent's thread)
  std::unique_ptr<comm::TcpStoreClient> state_store_;  // the state key, under mu_
  TorchNode me_;
  TorchStateDialect fallback_;
  std::mutex mu_;  // the store client and the state, between the agent and the heartbeats
  TorchRdzvState state_;
  std::string token_;  // the base64 state last read: what compare-set expects
  Clock::time_point last_read_{};
  std::optional<Round> round_;
  std::thread heartbeat_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> make_c10d_rendezvous(const RendezvousConfig& config) {
  return std::make_unique<C10dRendezvous>(config);
}

}  // namespace gpuorch::launch
