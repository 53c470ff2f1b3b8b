#include "gpuorch/sched/backoff.hpp"

#include <algorithm>

namespace gpuorch::sched {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
    : initial_(initial), max_(std::max(initial, max)) {}

Backoff::Clock::time_point Backoff::fail(const std::string& key, Clock::time_point now) {
  State& s = state_[key];
  s.failures = std::min(s.failures + 1, 62);
  auto wait = initial_;
  for (int i = 1; i < s.failures && wait < max_; ++i) wait *= 2;
  s.ready = now + std::min(wait, max_);
  if (parked(key)) {  // a parked key waits for its newest failure
    unpark(key);
    park(key);
  }
  return s.ready;
}

Backoff::Clock::time_point Backoff::ready_at(const std::string& key) const {
  const auto it = state_.find(key);
  return it == state_.end() ? Clock::time_point{} : it->second.ready;
}

void Backoff::park(const std::string& key) {
  if (parked(key)) return;
  parked_at_.emplace(key, parked_.emplace(ready_at(key), key));
}

void Backoff::unpark(const std::string& key) {
  const auto it = parked_at_.find(key);
  if (it == parked_at_.end()) return;
  parked_.erase(it->second);
  parked_at_.erase(it);
}

std::vector<std::string> Backoff::due(Clock::time_point now) {
  std::vector<std::string> out;
  while (!parked_.empty() && parked_.begin()->first <= now) {
    out.push_back(parked_.begin()->second);
    parked_at_.erase(out.back());
    parked_.erase(parked_.begin());
  }
  return out;
}

std::optional<Backoff::Clock::time_point> Backoff::next_due() const {
  if (parked_.empty()) return std::nullopt;
  return parked_.begin()->first;
}

void Backoff::forget(const std::string& key) {
  unpark(key);
  state_.erase(key);
}

int Backoff::failures(const std::string& key) const {
  const auto it = state_.find(key);
  return it == state_.end() ? 0 : it->second.failures;
}

}  // namespace gpuorch::sched
