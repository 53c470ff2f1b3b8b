#pragma once
// What the Node and Pod informers give a ClusterMirror, kept in one place for every process that
// decides from a mirror of its own (gpuorch extender, gpuorch admission-check): the node set the
// core sees (a Node update that changes nothing the core reads, such as a kubelet's status
// report, does not count as a change; a node the core cannot use is left out and its reason
// logged once), the bound pods counted on their nodes, the nodes' DRA GPUs and the claims
// allocated on them (dra_state.hpp), and the live pods' requests (with their claims' GPUs), the
// history efd estimates the target workload from when the options give none. Not thread-safe:
// callers hold their own lock.
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
  // A Node event. Returns the node's name when the core can use it and it is not deleted.
  std::optional<std::string> node(const nlohmann::json& obj, bool deleted);
  // A pod event (pod_from_json's): a live pod joins the history; a deleted or finished one leaves
  // it and is released from the mirror; a bound one is counted (once).
  void pod(const PodObject& p, bool deleted);
  // DRA objects (dra_state.hpp): slices make nodes' GPUs, allocated claims hold theirs.
  void slice(const nlohmann::json& obj, bool deleted);
  void device_class(const nlohmann::json& obj, bool deleted) { dra_.device_class(obj, deleted); }
  void claim(const nlohmann::json& obj, bool deleted) { dra_.claim(obj, deleted, mirror_); }
  [[nodiscard]] DraState& dra() { return dra_; }

  // Builds the mirror when the node set changed (or never was): "" or why the policy cannot be
  // built. `asking`, when given, joins the history of a first build (kube-scheduler may ask
  // about a pod before the watch delivers it, and on a new cluster it is all there is).
  std::string ensure_built(const PodObject* asking = nullptr);

  // The live pods' requests in a fixed order (plus `asking`): what a mirror with the same nodes
  // but nothing bound (a what-if on the empty cluster) is built with, so both estimate alike.
  [[nodiscard]] std::vector<workload::PodSpec> history(const PodObject* asking = nullptr) const;
  [[nodiscard]] const std::map<std::string, cluster::NodeSpec>& nodes() const { return nodes_; }
  [[nodiscard]] std::size_t live_pods() const { return seen_.size(); }

 private:
  std::string policy_;
  bool own_history_;
  base::LogSink log_;
  ClusterMirror mirror_;
  DraState dra_;
  std::map<std::string, cluster::NodeSpec> nodes_;
  std::map<std::string, std::string> bad_nodes_;
  bool nodes_dirty_ = true;
  std::unordered_map<std::string, workload::PodSpec> seen_;  // every live pod, for the history
};

}  // namespace gpuorch::k8s
