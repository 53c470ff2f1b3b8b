#include "gpuorch/k8s/mirror/mirror_feed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <variant>
#include <vector>

#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {

MirrorFeed::MirrorFeed(const MirrorOptions& options, base::LogSink log)
    : policy_(options.policy),
      own_history_(options.history.empty()),
      log_(std::move(log)),
      mirror_(options) {}

MirrorFeed::NodeChange MirrorFeed::node(const nlohmann::json& obj, bool deleted) {
  const auto parsed = node_from_json(obj);
  NodeChange out;
  if (const auto* spec = std::get_if<cluster::NodeSpec>(&parsed)) {
    bad_nodes_.erase(spec->name);
    if (deleted) {
      out.changed = nodes_.erase(spec->name) > 0;
    } else {
      // Only a change the core sees counts: the next build hands the whole set to the mirror,
      // a copy and a comparison of every node (about 11 ms at 5,000 nodes), and kubelets'
      // status reports, which change nothing here, arrive many times a second.
      auto [it, added] = nodes_.try_emplace(spec->name, *spec);
      out.changed = added || !ClusterMirror::same_node(it->second, *spec);
      if (!added) it->second = *spec;  // what the core ignores is kept current for the next build
      out.usable = spec->name;
    }
    nodes_dirty_ = nodes_dirty_ || out.changed;
    return out;
  }
  const std::string name = object_name(obj);
  out.changed = nodes_.erase(name) > 0;
  nodes_dirty_ = nodes_dirty_ || out.changed;
  const std::string& why = std::get<std::string>(parsed);
  if (!deleted && bad_nodes_[name] != why) {
    bad_nodes_[name] = why;
    if (log_) {
      log_(base::Severity::kWarning, fmt::format("left out {}", why),
           base::SourceLocation::current());
    }
  }
  return out;
}

bool MirrorFeed::slice(const nlohmann::json& obj, bool deleted) {
  if (!dra_.slice(obj, deleted, mirror_)) return false;
  nodes_dirty_ = true;
  return true;
}

bool MirrorFeed::pod(const PodObject& p, bool deleted) {
  if (p.uid.empty()) return false;
  dra_.pod(p, deleted || p.terminal(), mirror_);  // its claims count in its queue
  if (deleted || p.terminal()) {
    pods_.erase(p.uid);
    const bool counted = mirror_.accounted(p.uid);
    mirror_.release(p.uid);
    return counted;
  }
  pods_.insert_or_assign(p.uid, p);
  if (p.node_name.empty()) return false;
  if (mirror_.accounted(p.uid)) {
    mirror_.refresh(p);
  } else {
    mirror_.account(DraState::counted(p));  // a bridge claim holds its GPUs
  }
  return false;
}

std::string MirrorFeed::ensure_built(const PodObject* asking) {
  if (nodes_dirty_) {
    mirror_.set_nodes(dra_.apply(nodes_, mirror_));
    nodes_dirty_ = false;
  }
  // The history is copied and sorted only for a build: per call it would cost O(pods) (at 5,000
  // nodes, tens of thousands of pods) for nothing.
  std::vector<workload::PodSpec> seen;
  if (own_history_ && mirror_.needs_build()) seen = history(asking);
  try {
    if (mirror_.ensure_built(seen) && log_) {
      log_(base::Severity::kInfo,
           fmt::format("cluster: {} nodes, {} GPUs", mirror_.cluster().node_count(),
                       mirror_.cluster().gpu_total()),
           base::SourceLocation::current());
    }
  } catch (const std::exception& e) {
    return fmt::format("cannot build the {} policy: {}", policy_, e.what());
  }
  return {};
}

std::vector<workload::PodSpec> MirrorFeed::history(const PodObject* asking) const {
  std::vector<workload::PodSpec> seen;
  seen.reserve(pods_.size() + 1);
  // With their claims' GPUs as known now, not when the pod was last seen: a claim allocated
  // since counts what it holds.
  for (const auto& [uid, p] : pods_) {
    if (p.error.empty()) seen.push_back(dra_.spec_with_claims(p));
  }
  if (asking != nullptr && asking->error.empty() && !pods_.contains(asking->uid)) {
    seen.push_back(asking->spec);
  }
  // A fixed order, so a rebuild does not depend on the hash map's.
  std::sort(seen.begin(), seen.end(),
            [](const workload::PodSpec& a, const workload::PodSpec& b) { return a.name < b.name; });
  return seen;
}

}  // namespace gpuorch::k8s
