#pragma once
// Status writes the scheduler owes the cluster (a pod's PodScheduled condition and its Event, a
// PodGroup's status) that the API server did not take (a 503 while it restarts, a dropped
// connection): kept by key and tried again with a growing wait until they succeed, or until
// the caller withdraws them (the pod changed: bound, deleted, given a new verdict). Without this
// a pod whose one report was lost showed no condition for as long as nothing changed.
#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "gpuorch/sched/backoff.hpp"

namespace gpuorch::k8s {

class RetriedWrites {
 public:
  using Clock = std::chrono::steady_clock;
  using Write = std::function<void()>;  // throws when the server did not take it
  using Log = std::function<void(const std::string& key, const std::string& error, int attempt)>;

  explicit RetriedWrites(Log log = {}, std::chrono::milliseconds initial = std::chrono::seconds(1),
                         std::chrono::milliseconds max = std::chrono::seconds(30));

  // Tries `write` now; on failure keeps it under `key` (replacing what was there) for a retry.
  // True when it was written.
  bool submit(const std::string& key, Write write, Clock::time_point now = Clock::now());
  void withdraw(const std::string& key);
  // Tries again the writes whose wait is over; returns how many succeeded.
  int retry_due(Clock::time_point now = Clock::now());
  [[nodiscard]] bool pending(const std::string& key) const { return writes_.contains(key); }
  [[nodiscard]] std::size_t size() const { return writes_.size(); }

 private:
  bool attempt(const std::string& key, const Write& write, Clock::time_point now);

  Log log_;
  sched::Backoff backoff_;
  std::map<std::string, Write> writes_;
};

}  // namespace gpuorch::k8s
