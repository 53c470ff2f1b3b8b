#pragma once
// What the Node and Pod informers give a ClusterMirror, kept in one place for every process that
// decides from a mirror of its own (gpuorch scheduler, gpuorch extender, gpuorch admission-check)
// and for `gpuorch doctor`, which feeds it the objects it listed: the node set the core sees (a
// Node update that changes nothing the core reads, such as a kubelet's status report, does not
// count as a change; a node the core cannot use is left out and its reason logged once), the
// bound pods counted on their nodes (once; released when they go or finish), the nodes' DRA GPUs
// and the claims allocated on them (dra_state.hpp), and the live pods, whose requests (with their
// claims' GPUs) are the history efd estimates the target workload from when the options give
// none. Not thread-safe: callers hold their own lock.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {

class MirrorFeed {
 public:
  MirrorFeed(const MirrorOptions& options, base::LogSink log);

  [[nodiscard]] ClusterMirror& mirror() { return mirror_; }
  [[nodiscard]] const ClusterMirror& mirror() const { return mirror_; }

  struct NodeChange {
    std::optional<std::string> usable;  // the node's name when the core can use it, not deleted
    bool changed = false;               // the node set the core sees changed
  };
  NodeChange node(const nlohmann::json& obj, bool deleted);
  // A pod event (pod_from_json's): a live pod is kept; a deleted or finished one is dropped and
  // released from the mirror; a bound one is counted once, and its updates refresh what the job
  // layer reads of it. True when a pod the mirror counted was released: what it held is free.
  bool pod(const PodObject& p, bool deleted);
  // DRA objects (dra_state.hpp): slices make nodes' GPUs (true: some node's GPUs changed),
  // allocated claims hold theirs.
  bool slice(const nlohmann::json& obj, bool deleted);
  void device_class(const nlohmann::json& obj, bool deleted) { dra_.device_class(obj, deleted); }
  void claim(const nlohmann::json& obj, bool deleted) { dra_.claim(obj, deleted, mirror_); }
  [[nodiscard]] DraState& dra() { return dra_; }
  [[nodiscard]] const DraState& dra() const { return dra_; }

  // Builds the mirror when the node set changed (or never was): "" or why the policy cannot be
  // built. `asking`, when given, joins the history of a build (kube-scheduler may ask about a
  // pod before the watch delivers it, and on a new cluster it is all there is).
  std::string ensure_built(const PodObject* asking = nullptr);

  // The live pods' requests with their claims' GPUs (allocated, else asked) in a fixed order
  // (plus `asking`): what every build is given, and what a mirror with the same nodes but
  // nothing bound (a what-if on the empty cluster) is built with, so both estimate alike.
  [[nodiscard]] std::vector<workload::PodSpec> history(const PodObject* asking = nullptr) const;
  [[nodiscard]] const std::map<std::string, cluster::NodeSpec>& nodes() const { return nodes_; }
  // Nodes the core cannot use, by name: why.
  [[nodiscard]] const std::map<std::string, std::string>& left_out() const { return bad_nodes_; }
  // Every pod that has not finished (bound or not), by uid, as last seen.
  [[nodiscard]] const std::unordered_map<std::string, PodObject>& pods() const { return pods_; }
  [[nodiscard]] std::size_t live_pods() const { return pods_.size(); }

 private:
  std::string policy_;
  bool own_history_;
  base::LogSink log_;
  ClusterMirror mirror_;
  DraState dra_;
  std::map<std::string, cluster::NodeSpec> nodes_;
  std::map<std::string, std::string> bad_nodes_;
  bool nodes_dirty_ = true;
  std::unordered_map<std::string, PodObject> pods_;
};

}  // namespace gpuorch::k8s
