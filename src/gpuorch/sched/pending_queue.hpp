#pragma once
// The order pending pods are decided in: higher priority first, then earlier arrival, then the
// pod's key (kube-scheduler's PrioritySort, FIFO within a priority). Every driver of the core
// that queues pods (the Kubernetes scheduler today, a time-based simulator tomorrow) uses it, so
// they agree on who goes first.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

namespace gpuorch::sched {

class PendingQueue {
 public:
  // Adds or re-adds a pod; `arrival` orders pods of equal priority (a creation timestamp, or a
  // sequence number as text that sorts); a pod already queued keeps its place.
  void push(const std::string& key, int priority, const std::string& arrival) {
    if (where_.contains(key)) return;
    const auto it = order_.emplace(-static_cast<std::int64_t>(priority), arrival, key).first;
    where_.emplace(key, it);
  }
  // Removes a pod wherever it is; false when it was not queued.
  bool erase(const std::string& key) {
    const auto it = where_.find(key);
    if (it == where_.end()) return false;
    order_.erase(it->second);
    where_.erase(it);
    return true;
  }
  // The first pod, taken out of the queue.
  std::optional<std::string> pop() {
    if (order_.empty()) return std::nullopt;
    std::string key = std::get<2>(*order_.begin());
    erase(key);
    return key;
  }
  [[nodiscard]] bool contains(const std::string& key) const { return where_.contains(key); }
  [[nodiscard]] bool empty() const { return order_.empty(); }
  [[nodiscard]] std::size_t size() const { return order_.size(); }

 private:
  using Entry = std::tuple<std::int64_t, std::string, std::string>;  // -priority, arrival, key
  std::set<Entry> order_;
  std::unordered_map<std::string, std::set<Entry>::iterator> where_;
};

}  // namespace gpuorch::sched
