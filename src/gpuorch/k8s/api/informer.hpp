#pragma once
// An informer: a local cache of one resource type kept current by list + watch, which tells its
// handlers what changed. The scheduler reads Nodes, Pods and PodGroups through it instead of
// asking the API server on every decision.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s {

struct InformerHandlers {
  // Initialised members, so designated initialisers may leave any out (-Wextra).
  std::function<void(const nlohmann::json& obj)> on_add{};
  std::function<void(const nlohmann::json& obj)> on_update{};  // the new object
  std::function<void(const nlohmann::json& obj)> on_delete{};  // last known state
  std::function<void()> on_synced{};  // after each (re)list has been delivered
  // A failed list or watch, before the retry (the informer never gives up on its own).
  std::function<void(const std::string& what)> on_error{};
};

struct InformerOptions {
  int page_size = 500;                   // list pages (limit/continue)
  int watch_timeout_seconds = 300;       // the server ends each watch after about this long
  double backoff_initial_seconds = 0.2;  // after a transport error or 5xx, doubled up to max
  double backoff_max_seconds = 30.0;
};

// "ns/name", or "name" for a cluster-scoped object.
std::string object_key(const nlohmann::json& obj);

class Informer {
 public:
  // list_path: "/api/v1/nodes", "/api/v1/pods", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups";
  // the selectors go into every list and watch.
  Informer(ApiClient& api, std::string list_path, InformerHandlers handlers,
           std::string field_selector = "", std::string label_selector = "",
           InformerOptions options = {});

  // Blocks until `stop`: list, deliver the difference to the cache, watch from the list's
  // resourceVersion; relist on 410 Gone; back off and re-watch after errors. Handlers run on
  // this thread, never under the cache's lock (they may call get() and list()).
  void run(const std::atomic<bool>& stop);

  [[nodiscard]] bool synced() const { return synced_.load(); }  // the first list is delivered
  [[nodiscard]] std::optional<nlohmann::json> get(const std::string& key) const;
  [[nodiscard]] std::vector<nlohmann::json> list() const;
  [[nodiscard]] std::uint64_t relists() const { return relists_.load(); }  // after the first

 private:
  enum class WatchEnd { kExpired, kEnded, kStopped };
  std::string query(const std::string& extra) const;
  std::string relist(const std::atomic<bool>& stop);  // the new resourceVersion
  WatchEnd watch_from(std::string& resource_version, const std::atomic<bool>& stop);
  void upsert(const nlohmann::json& obj);
  void erase(const nlohmann::json& obj);
  void sleep_backoff(const std::atomic<bool>& stop);
  void report(const std::string& what) const;

  ApiClient& api_;
  std::string list_path_;
  InformerHandlers handlers_;
  std::string field_selector_, label_selector_;
  InformerOptions options_;

  mutable std::mutex mutex_;
  std::map<std::string, nlohmann::json> cache_;
  std::atomic<bool> synced_{false};
  std::atomic<std::uint64_t> relists_{0};
  double backoff_seconds_ = 0;
  bool progressed_ = false;  // the current watch delivered an event
  std::mt19937_64 jitter_;
};

}  // namespace gpuorch::k8s
