#pragma once
// Per-pod backoff after a failed attempt, as kube-scheduler keeps it (podInitialBackoffSeconds 1,
// podMaxBackoffSeconds 10): the n-th failure in a row makes the pod wait initial * 2^(n-1), at
// most `max`. Whatever failed (a bind the API server refused, a decision that threw, no room), a
// pod is never tried again before its wait is over, so no failure can become a busy loop.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpuorch::sched {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Backoff(std::chrono::milliseconds initial = std::chrono::seconds(1),
                   std::chrono::milliseconds max = std::chrono::seconds(10));

  // One more failure of `key` at `now`; returns when it may be tried again.
  Clock::time_point fail(const std::string& key, Clock::time_point now);
  // The time its last failure allows it again (the past when it has not failed).
  [[nodiscard]] Clock::time_point ready_at(const std::string& key) const;
  // Parks `key` until ready_at(key); due() hands it back then.
  void park(const std::string& key);
  // The parked keys whose wait is over, taken out of the parked set, earliest first.
  std::vector<std::string> due(Clock::time_point now);
  [[nodiscard]] std::optional<Clock::time_point> next_due() const;
  [[nodiscard]] bool parked(const std::string& key) const { return parked_at_.contains(key); }
  void unpark(const std::string& key);
  // A success or a pod gone: its count starts again from nothing.
  void forget(const std::string& key);
  [[nodiscard]] int failures(const std::string& key) const;
  [[nodiscard]] std::size_t parked_count() const { return parked_at_.size(); }

 private:
  struct State {
    int failures = 0;
    Clock::time_point ready{};
  };
  std::chrono::milliseconds initial_, max_;
  std::unordered_map<std::string, State> state_;
  std::multimap<Clock::time_point, std::string> parked_;
  std::unordered_map<std::string, std::multimap<Clock::time_point, std::string>::iterator>
      parked_at_;
};

}  // namespace gpuorch::sched
