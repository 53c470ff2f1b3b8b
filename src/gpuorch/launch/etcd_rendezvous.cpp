// Elastic rendezvous through etcd (v3 API over its HTTP/JSON gateway). One JSON record per job,
// <prefix>/state, changed only by compare-and-swap on its mod_revision, holds the current round:
//
//   {"round": r, "status": "joining"|"closed", "participants": [{id, addr, port, prev_rank}],
//    "last_call_ms": t, "expected": [ids]}
//
// Each agent keeps <prefix>/alive/<id> under a lease it keeps alive; a node that dies loses the
// key when its lease expires. A round closes when max nodes joined, or when at least min joined,
// the last-call time passed and every node of the previous round that is still alive has joined
// (so a running group is never left out of the round a newcomer opens). Group ranks: nodes of
// the previous round keep their order, newcomers follow in join order; node 0 hosts the workers'
// store. A node that needs a new round (its workers failed, or it is new while the group has
// room) opens round r+1; the running agents see the round number move and restart their workers
// into it, which does not count as a failure (TorchElastic's membership change).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "gpuorch/base/error.hpp"
#include "gpuorch/launch/etcd_client.hpp"
#include "gpuorch/launch/net.hpp"
#include "gpuorch/launch/rendezvous.hpp"

namespace gpuorch::launch {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Participant {
  std::string id;
  std::string addr;
  int port = 0;
  int prev_rank = -1;
};

struct State {
  int round = 0;
  bool closed = false;
  std::vector<Participant> participants;
  std::int64_t last_call_ms = 0;
  std::vector<std::string> expected;

  [[nodiscard]] int index_of(const std::string& id) const {
    for (std::size_t i = 0; i < participants.size(); ++i) {
      if (participants[i].id == id) return static_cast<int>(i);
    }
    return -1;
  }
};

std::string to_text(const State& s) {
  Json j;
  j["round"] = s.round;
  j["status"] = s.closed ? "closed" : "joining";
  j["participants"] = Json::array();
  for (const auto& p : s.participants) {
    j["participants"].push_back(
        {{"id", p.id}, {"addr", p.addr}, {"port", p.port}, {"prev_rank", p.prev_rank}});
  }
  j["last_call_ms"] = s.last_call_ms;
  j["expected"] = s.expected;
  return j.dump();
}

State parse_state(const std::string& text) {
  const auto j = Json::parse(text, nullptr, false);
  State s;
  if (j.is_discarded() || !j.is_object()) throw EtcdError("rendezvous state is not JSON: " + text);
  try {  // written by a peer: a field of the wrong type is an error to report, not a crash
    s.round = j.value("round", 0);
    s.closed = j.value("status", std::string()) == "closed";
    for (const auto& p : j.value("participants", Json::array())) {
      s.participants.push_back({p.value("id", std::string()), p.value("addr", std::string()),
                                p.value("port", 0), p.value("prev_rank", -1)});
    }
    s.last_call_ms = j.value("last_call_ms", std::int64_t{0});
    s.expected = j.value("expected", std::vector<std::string>{});
  } catch (const Json::exception&) {
    throw EtcdError("rendezvous state has a field of the wrong type: " + text.substr(0, 200));
  }
  return s;
}

std::string make_node_id() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  return fmt::format("{}-{}-{:08x}", host, ::getpid(), rd());
}

class EtcdRendezvous final : public Rendezvous {
 public:
  explicit EtcdRendezvous(RendezvousConfig c)
      : c_(std::move(c)),
        prefix_("/gpuorch/rdzv/" + c_.run_id + "/"),
        id_(make_node_id()),
        etcd_(make_client()) {
    if (c_.min_nodes < 1 || c_.max_nodes < c_.min_nodes) {
      base::fail_input(
          fmt::format("--nnodes {}:{}: need 1 <= MIN <= MAX", c_.min_nodes, c_.max_nodes));
    }
    if (c_.local_addr.empty()) c_.local_addr = local_address_towards(etcd_.host(), etcd_.port());
    connect();
    keeper_ = std::thread([this] { keep_alive_loop(); });
  }

  ~EtcdRendezvous() override {
    stop_keeper();
    if (lease_) {
      try {
        etcd_.revoke_lease(lease_);
      } catch (const std::exception&) {  // the lease expires by itself
      }
    }
  }
  EtcdRendezvous(const EtcdRendezvous&) = delete;
  EtcdRendezvous& operator=(const EtcdRendezvous&) = delete;

  Round next_round(const std::function<bool()>& cancelled) override {
    const auto start = Clock::now();
    for (;;) {
      if (cancelled()) throw RendezvousCancelled();
      if (Clock::now() - start > c_.join_timeout) throw std::runtime_error(timeout_message());
      if (lease_lost_.exchange(false)) connect();
      const auto kv = etcd_.get(key("state"));
      if (!kv) {
        State s;
        s.round = 0;
        join(s);
        etcd_.put_if(key("state"), to_text(s), 0);
        continue;
      }
      State s = parse_state(kv->value);
      last_seen_ = describe_state(s);
      const int me = s.index_of(id_);
      if (!s.closed) {
        if (me < 0) {
          if (static_cast<int>(s.participants.size()) < c_.max_nodes) {
            join(s);
            etcd_.put_if(key("state"), to_text(s), kv->mod_revision);
            continue;
          }
        } else if (ready_to_close(s)) {
          close(s, kv->mod_revision);
          continue;
        }
        wait(kv->mod_revision, start);
        continue;
      }
      if (me >= 0 && s.round > round_) return adopt(s, me);
      // This node needs a new round: it took part in this one (its workers stopped) or it is new
      // and the group has room. A full, running group is left alone until it opens a round.
      if (me >= 0 || static_cast<int>(s.participants.size()) < c_.max_nodes || has_lost_member(s)) {
        State next;
        next.round = s.round + 1;
        for (const auto& p : s.participants) {
          if (p.id != id_ && alive(p.id) && !done(s.round, p.id)) next.expected.push_back(p.id);
        }
        join(next);
        etcd_.put_if(key("state"), to_text(next), kv->mod_revision);
        continue;
      }
      wait(kv->mod_revision, start);
    }
  }

  bool membership_changed() override {
    try {
      const auto kv = etcd_.get(key("state"));
      if (!kv) return true;
      const State s = parse_state(kv->value);
      if (s.round > round_) return true;
      return s.closed && has_lost_member(s);
    } catch (const std::exception&) {
      return false;  // etcd briefly away: keep training, the lease has slack
    }
  }

  void finish(bool succeeded) override {
    try {
      if (succeeded && round_ >= 0) etcd_.put(key(fmt::format("done/{}/{}", round_, id_)), "1");
    } catch (const std::exception&) {
    }
    stop_keeper();
    try {
      if (lease_) etcd_.revoke_lease(lease_);
    } catch (const std::exception&) {
    }
    lease_ = 0;
  }

  [[nodiscard]] std::string describe() const override {
    return fmt::format("etcd {}:{}, run {}, nodes {}:{}, node id {}", etcd_.host(), etcd_.port(),
                       c_.run_id, c_.min_nodes, c_.max_nodes, id_);
  }

 private:
  EtcdClient make_client() const {
    try {
      return EtcdClient(c_.endpoint, std::chrono::seconds(3));
    } catch (const EtcdError& e) {
      base::fail_input(std::string("--rdzv-endpoint ") + e.what());
    }
  }

  std::string key(const std::string& rest) const { return prefix_ + rest; }

  // A lease and the alive key; retried until connect_timeout, then a one-line error.
  void connect() {
    const auto start = Clock::now();
    std::string last_error;
    for (;;) {
      try {
        lease_ = etcd_.grant_lease(c_.lease_ttl_s);
        etcd_.put(key("alive/" + id_), c_.local_addr, lease_);
        return;
      } catch (const EtcdError& e) {
        last_error = e.what();
      }
      if (Clock::now() - start >= c_.connect_timeout) {
        base::fail_input(
            fmt::format("--rdzv-endpoint {}: etcd unreachable after {:.0f} s ({})", c_.endpoint,
                        std::chrono::duration<double>(c_.connect_timeout).count(), last_error));
      }
      std::this_thread::sleep_for(milliseconds(250));
    }
  }

  void keep_alive_loop() {
    EtcdClient client(c_.endpoint, std::chrono::seconds(2));
    const auto period = milliseconds(std::max(200, c_.lease_ttl_s * 1000 / 3));
    std::unique_lock lock(keeper_mutex_);
    while (!keeper_stop_) {
      keeper_cv_.wait_for(lock, period, [this] { return keeper_stop_; });
      if (keeper_stop_) break;
      try {
        if (!client.keep_alive(lease_)) lease_lost_ = true;
      } catch (const std::exception&) {
        // etcd away for a moment; the TTL has room for a few missed beats
      }
    }
  }

  void stop_keeper() {
    {
      std::lock_guard lock(keeper_mutex_);
      keeper_stop_ = true;
    }
    keeper_cv_.notify_all();
    if (keeper_.joinable()) keeper_.join();
  }

  void join(State& s) {
    Participant p;
    p.id = id_;
    p.addr = c_.local_addr;
    p.port = pick_free_port(c_.local_addr);
    p.prev_rank = rank_;
    s.participants.push_back(p);
    if (static_cast<int>(s.participants.size()) >= c_.min_nodes && s.last_call_ms == 0) {
      s.last_call_ms = wall_ms() + c_.last_call_timeout.count();
    }
  }

  bool alive(const std::string& id) { return etcd_.get(key("alive/" + id)).has_value(); }
  bool done(int round, const std::string& id) {
    return etcd_.get(key(fmt::format("done/{}/{}", round, id))).has_value();
  }

  bool has_lost_member(const State& s) {
    for (const auto& p : s.participants) {
      if (p.id != id_ && !alive(p.id) && !done(s.round, p.id)) return true;
    }
    return false;
  }

  bool ready_to_close(const State& s) {
    const int n = static_cast<int>(s.participants.size());
    if (n >= c_.max_nodes) return true;
    if (n < c_.min_nodes || s.last_call_ms == 0 || wall_ms() < s.last_call_ms) return false;
    for (const auto& id : s.expected) {
      if (s.index_of(id) < 0 && alive(id)) return false;
    }
    return true;
  }

  void close(State s, std::int64_t mod_revision) {
    std::vector<Participant> living;
    for (const auto& p : s.participants) {
      if (p.id == id_ || alive(p.id)) living.push_back(p);
    }
    std::stable_sort(living.begin(), living.end(), [](const Participant& a, const Participant& b) {
      const int ra = a.prev_rank < 0 ? INT_MAX : a.prev_rank;
      const int rb = b.prev_rank < 0 ? INT_MAX : b.prev_rank;
      return ra < rb;
    });
    s.participants = living;
    if (static_cast<int>(living.size()) >= c_.min_nodes) {
      s.closed = true;
    } else {
      s.last_call_ms = 0;
    }
    etcd_.put_if(key("state"), to_text(s), mod_revision);
  }

  Round adopt(const State& s, int me) {
    Round r;
    r.round = s.round;
    r.group_rank = me;
    r.group_world_size = static_cast<int>(s.participants.size());
    r.master_addr = s.participants.front().addr;
    r.master_port = s.participants.front().port;
    for (const auto& p : s.participants) r.members.push_back(p.id);
    round_ = s.round;
    rank_ = me;
    return r;
  }

  void wait(std::int64_t mod_revision, Clock::time_point start) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(c_.join_timeout - (Clock::now() - start));
    const auto step = std::clamp(left, milliseconds(50), milliseconds(250));
    etcd_.wait_for_change(key("state"), mod_revision, step);
  }

  static std::string describe_state(const State& s) {
    return fmt::format("round {} {} with {} node(s)", s.round, s.closed ? "closed" : "joining",
                       s.participants.size());
  }

  std::string timeout_message() const {
    return fmt::format(
        "rendezvous {} at {}: no round with this node closed within {:.0f} s "
        "(--nnodes {}:{}; last seen: {})",
        c_.run_id, c_.endpoint, std::chrono::duration<double>(c_.join_timeout).count(),
        c_.min_nodes, c_.max_nodes, last_seen_.empty() ? "nothing" : last_seen_);
  }

  RendezvousConfig c_;
  std::string prefix_;
  std::string id_;
  EtcdClient etcd_;
  std::atomic<std::int64_t> lease_{0};
  std::atomic<bool> lease_lost_{false};
  int round_ = -1;
  int rank_ = -1;
  std::string last_seen_;
  std::thread keeper_;
  std::mutex keeper_mutex_;
  std::condition_variable keeper_cv_;
  bool keeper_stop_ = false;
};

}  // namespace

std::unique_ptr<Rendezvous> make_etcd_rendezvous(const RendezvousConfig& config) {
  if (config.endpoint.empty())
    base::fail_input("--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT");
  return std::make_unique<EtcdRendezvous>(config);
}

}  // namespace gpuorch::launch
