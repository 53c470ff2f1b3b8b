#pragma once
// `gpuorch extender`: the scheduler core behind kube-scheduler's HTTP extender protocol
// (filter, prioritize, bind; reference k8s-apis.md §6.1). The extender is nodeCacheCapable: its
// own informers keep Nodes and Pods in a ClusterMirror (the same core, policies and tie-break
// ranking as `gpuorch scheduler` and `gpuorch sim fill`), and kube-scheduler sends only node
// names. Filter decides with the core among the nodes kube-scheduler found feasible and keeps
// only the chosen one; the decision is assumed (counted) until its bind or until it goes stale;
// prioritize gives that node the top score; bind writes the chosen GPUs onto the pod in the
// same Binding that binds it, exactly as `gpuorch scheduler` does.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/extender/extender_answer.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/mirror_feed.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {

// The fractional resource: a pod asks for a share of one GPU as `gpuorch.io/gpu-milli: 500`
// (kube-scheduler sends it to the extender, which manages it; ignoredByScheduler, since no node
// advertises it). Whole GPUs stay nvidia.com/gpu, which kube-scheduler counts as well.
inline constexpr const char* kGpuMilliResource = "gpuorch.io/gpu-milli";

struct ExtenderOptions {
  MirrorOptions mirror;
  // A filter decision that kube-scheduler neither binds nor asks again about within this long is
  // forgotten (another extender or a permit plugin turned it down).
  std::chrono::seconds assume_ttl{30};
  base::LogSink log;  // may be empty
};

struct ExtenderCounters {
  std::atomic<std::uint64_t> filters{0}, prioritizes{0}, binds{0};
  std::atomic<std::uint64_t> bind_errors{0}, bad_requests{0}, unschedulable{0};
  std::atomic<std::uint64_t> unknown_nodes{0};  // offered names the cache does not know, dropped
  std::atomic<std::uint64_t> filter_us{0};      // summed time inside filter
};

// Thrown for a request body that is not what the verb takes; the server answers 400.
struct BadExtenderRequest : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

class ExtenderService {
 public:
  ExtenderService(ApiClient& api, ExtenderOptions options);
  ExtenderService(const ExtenderService&) = delete;
  ExtenderService& operator=(const ExtenderService&) = delete;

  // Blocks until `stop`: the Node and Pod informers.
  void run(const std::atomic<bool>& stop);
  [[nodiscard]] bool synced() const {
    return synced_nodes_.load() && synced_pods_.load() && synced_dra_.load() >= dra_informers_;
  }

  // The verbs, on parsed JSON (keys matched case-insensitively, as Go's decoder does). They throw
  // BadExtenderRequest for a body that is not an ExtenderArgs / ExtenderBindingArgs; every other
  // failure is answered in the protocol's Error field. filter and prioritize return the answer's
  // JSON text (k8s/extender/extender_answer.hpp says why); node_names, when given, are the
  // NodeNames that split_node_names took out of the body (args then holds `[]`;
  // k8s/extender/extender_request.hpp).
  std::string filter(const nlohmann::json& args,
                     const std::vector<std::string_view>* node_names = nullptr);
  std::string prioritize(const nlohmann::json& args,
                         const std::vector<std::string_view>* node_names = nullptr);
  nlohmann::json bind(const nlohmann::json& args);

  // verb "filter" | "prioritize" | "bind" with the raw request body: the HTTP status and body.
  struct Reply {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
  };
  Reply call(std::string_view verb, std::string_view body);

  [[nodiscard]] const ExtenderCounters& counters() const { return counters_; }
  [[nodiscard]] std::string metrics() const;

  // What the informers deliver, public so that a benchmark can fill the cache with objects it
  // made, without an API server (bench/extender_latency.cpp); mark_synced then opens the verbs.
  void on_node(const nlohmann::json& obj, bool deleted);
  void on_pod(const nlohmann::json& obj, bool deleted);
  // ResourceSlices, DeviceClasses, ResourceClaims (resource.k8s.io/v1, where served).
  void on_dra(const nlohmann::json& obj, bool deleted, std::string_view kind);
  // `dra_served`: as where resource.k8s.io/v1 is served (the DRA objects come through on_dra).
  void mark_synced(bool dra_served = false) {
    synced_nodes_ = synced_pods_ = true;
    dra_informers_ = synced_dra_ = dra_served ? 3 : 0;
  }
  // What the informers' objects made (not locked: for a caller that delivers them itself), so a
  // test can check that the scheduler's feed holds the same.
  [[nodiscard]] const MirrorFeed& feed() const { return feed_; }

 private:
  struct Decision {
    PodObject pod;
    std::string node;
    std::vector<int> gpus;
    std::chrono::steady_clock::time_point when;
    std::vector<std::string> claims;  // the claims whose devices it holds meanwhile (assumed)
  };
  // filter for a pod with claims (docs/extender.md, "Pods with ResourceClaims").
  void filter_claims_locked(const PodObject& pod, const std::vector<std::string_view>& offered,
                            FilterAnswer& a);
  // Builds the mirror if its nodes changed; the reason when the policy cannot be built, else "".
  std::string ensure_built_locked(const PodObject& asking);
  void forget_locked(const std::string& uid);
  void expire_locked();
  void log(const std::string& line, base::Severity severity = base::Severity::kInfo,
           base::SourceLocation where = base::SourceLocation::current()) const;
  // The offered names that are nodes of the cache, each once, in the order offered. Runs before
  // the mutex: one legal filter naming 690k unknown nodes held it 4.7-9.4 s and was answered
  // with 105 MB (issue 30); the answer now names at most the cache's nodes.
  std::vector<std::string_view> known_nodes(const std::vector<std::string_view>& offered);

  ApiClient& api_;
  ExtenderOptions options_;
  ExtenderCounters counters_;
  std::atomic<bool> synced_nodes_{false}, synced_pods_{false};
  std::atomic<int> synced_dra_{0};
  int dra_informers_ = 0;  // 3 where resource.k8s.io/v1 is served

  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::shared_mutex names_mutex_;  // the node names alone, read by every filter before mutex_
  std::unordered_set<std::string, NameHash, std::equal_to<>> node_names_;

  std::mutex mutex_;  // everything below; the HTTP threads and the informers share it
  MirrorFeed feed_;
  std::unordered_map<std::string, PodObject> pending_;   // unbound pods by uid
  std::unordered_map<std::string, Decision> decisions_;  // filtered, not yet bound
};

}  // namespace gpuorch::k8s
