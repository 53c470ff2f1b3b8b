#pragma once
// The small TCP exchange that bootstraps one process per GPU: rank 0 listens at MASTER_ADDR:
// MASTER_PORT, every other rank connects and says who it is; then rank 0 hands out the NCCL
// unique id, and the ranks sum their per-size results (time, #wrong) through it. A star, not a
// collective library: a few hundred bytes per size point. Every wait is bounded; a peer that
// never comes, closes its connection or stops answering is named in a PeerError.
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuorch::comm {

class PeerError : public std::runtime_error {
 public:
  explicit PeerError(const std::string& message) : std::runtime_error(message) {}
};

class PeerGroup {
 public:
  // Rank 0 listens on `port` (0: any free one; on_listening gets the bound port) on every
  // address; the others connect to addr:port, retrying until rank 0 is there. Returns once all
  // `world` ranks have joined, or throws PeerError after `timeout`.
  PeerGroup(int rank, int world, const std::string& addr, int port,
            std::chrono::milliseconds timeout, const std::function<void(int)>& on_listening = {});
  ~PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  // Rank 0's bytes, at every rank (the others' argument is ignored).
  std::string broadcast(const std::string& bytes_at_root);
  // Every rank's string, in rank order, at every rank.
  std::vector<std::string> all_gather(const std::string& mine);
  // Element-wise sum over every rank's vector (same length everywhere), at every rank.
  std::vector<double> sum(const std::vector<double>& values);
  void barrier() { sum({}); }

  // Without blocking: the first peer whose connection is closed (it exited or died), as
  // "rank N", or "" when all are there. Rank 0 watches every peer; the others watch rank 0
  // (which leaves as soon as it sees a peer gone, so everyone learns within one check).
  std::string lost_peer() const;

 private:
  void send_frame(int fd, const std::string& payload, int peer);
  std::string recv_frame(int fd, int peer);

  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::vector<int> fds_;  // rank 0: fds_[r] for peer r (fds_[0] unused); others: fds_[0] = root
};

// While armed, a thread checks every 50 ms that no peer is gone and that the caller made
// progress (beat()) within `timeout`; if not, it calls on_fire once with one line saying what
// happened. The default prints "gpuorch: <line>" on stderr and ends the process with exit code 1,
// since a rank blocked inside NCCL cannot be unblocked from outside. Used around the NCCL phases
// (init, collectives), never during the TCP exchange (which bounds its own waits).
class PeerWatchdog {
 public:
  PeerWatchdog(const PeerGroup& group, std::chrono::milliseconds timeout,
               std::function<void(const std::string&)> on_fire = {});
  ~PeerWatchdog();
  PeerWatchdog(const PeerWatchdog&) = delete;
  PeerWatchdog& operator=(const PeerWatchdog&) = delete;
  void arm(const std::string& phase);
  void disarm();
  void beat();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpuorch::comm
