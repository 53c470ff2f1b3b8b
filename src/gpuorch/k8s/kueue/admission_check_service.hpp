#pragma once
// `gpuorch admission-check` (docs/kueue.md): Kueue's AdmissionCheck controller for
// controllerName gpuorch.io/placeable. Informers keep Nodes, Pods, Kueue's Workloads,
// AdmissionChecks and ResourceFlavors current; a MirrorFeed gives the scheduler core the cluster
// as it is, and a second mirror the same nodes empty; PlaceableChecks decides; this loop writes
// the verdicts into the Workloads' status (a JSON patch that tests the entry it replaces) and
// marks the AdmissionChecks Active. A verdict the API server did not take is decided again after
// a backoff (1 s doubling to 30 s), never in a busy loop.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/kueue/placeable.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/mirror_feed.hpp"

namespace gpuorch::k8s::kueue {

struct AdmissionCheckOptions {
  MirrorOptions mirror;
  PlaceableOptions placeable;
  // The informers must have listed within this long, else run() throws.
  std::chrono::seconds sync_timeout{120};
  // The loop counts as stuck (alive() false) when it has not come round for this long.
  std::chrono::seconds stale_after{30};
  base::LogSink log;  // one line per verdict; may be empty
};

class AdmissionCheckService {
 public:
  AdmissionCheckService(ApiClient& api, AdmissionCheckOptions options);
  AdmissionCheckService(const AdmissionCheckService&) = delete;
  AdmissionCheckService& operator=(const AdmissionCheckService&) = delete;

  // Blocks until `stop`. Throws std::runtime_error (one line) when Kueue's API is not served or
  // the informers do not sync within sync_timeout.
  void run(const std::atomic<bool>& stop);
  [[nodiscard]] std::uint64_t verdicts_written() const { return written_.load(); }
  // For the liveness and readiness probes of a Deployment (gpuorch manifests --kueue): the loop
  // came round lately; the informers have listed everything.
  [[nodiscard]] bool alive() const;
  [[nodiscard]] bool synced() const { return synced_.load() >= informers_.load(); }
  // Prometheus text: verdicts written, writes refused, passes.
  [[nodiscard]] std::string metrics() const;

 private:
  void on_node(const nlohmann::json& obj, bool deleted);
  void on_pod(const nlohmann::json& obj, bool deleted);
  // ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates.
  void on_dra(const nlohmann::json& obj, bool deleted, std::string_view kind);
  // One pass: build what changed, decide, write. Returns false when a write failed.
  bool pass();
  void log(const std::string& line, base::Severity severity = base::Severity::kInfo,
           base::SourceLocation where = base::SourceLocation::current()) const;

  // Nodes, pods, workloads, admission checks, flavors; and the DRA kinds where served.
  std::atomic<int> informers_{5};

  ApiClient& api_;
  AdmissionCheckOptions options_;
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> passes_{0};
  std::atomic<std::int64_t> heartbeat_ns_{0};  // steady clock of the loop's last turn
  std::atomic<int> synced_{0};

  std::mutex mutex_;  // the informers' threads and the loop share everything below
  MirrorFeed feed_;
  ClusterMirror empty_;
  PlaceableChecks checks_;
  bool dirty_ = true;
  bool empty_stale_ = true;  // empty_'s nodes are to be set again (a slice changed)
};

}  // namespace gpuorch::k8s::kueue
