#include "gpuorch/k8s/scheduler/retried_writes.hpp"

#include <exception>

namespace gpuorch::k8s {

RetriedWrites::RetriedWrites(Log log, std::chrono::milliseconds initial,
                             std::chrono::milliseconds max)
    : log_(std::move(log)), backoff_(initial, max) {}

bool RetriedWrites::attempt(const std::string& key, const Write& write, Clock::time_point now) {
  try {
    write();
  } catch (const std::exception& e) {
    backoff_.fail(key, now);
    backoff_.park(key);
    if (log_) log_(key, e.what(), backoff_.failures(key));
    return false;
  }
  return true;
}

bool RetriedWrites::submit(const std::string& key, Write write, Clock::time_point now) {
  withdraw(key);
  if (attempt(key, write, now)) return true;
  writes_.emplace(key, std::move(write));
  return false;
}

void RetriedWrites::withdraw(const std::string& key) {
  writes_.erase(key);
  backoff_.forget(key);
}

int RetriedWrites::retry_due(Clock::time_point now) {
  int written = 0;
  for (const std::string& key : backoff_.due(now)) {
    const auto it = writes_.find(key);
    if (it == writes_.end()) continue;
    if (attempt(key, it->second, now)) {
      writes_.erase(it);
      backoff_.forget(key);
      ++written;
    }
  }
  return written;
}

}  // namespace gpuorch::k8s
