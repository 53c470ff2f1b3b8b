#include "gpuorch/k8s/cluster_queues.hpp"

#include <fmt/format.h>

#include "gpuorch/base/error.hpp"
#include "gpuorch/io/queue_yaml.hpp"

namespace gpuorch::k8s {
namespace {

sched::jobs::QueueTree with_default(std::vector<workload::QueueSpec> specs) {
  bool has_default = false;
  for (const auto& q : specs) has_default = has_default || q.name == kDefaultQueue;
  if (!has_default) {
    workload::QueueSpec q;
    q.name = kDefaultQueue;
    specs.push_back(std::move(q));
  }
  return sched::jobs::QueueTree(std::move(specs));
}

}  // namespace

ClusterQueues::ClusterQueues() : tree_(with_default({})) {}

std::string ClusterQueues::update(const nlohmann::json& queue, bool deleted) {
  if (!queue.is_object() || !queue.contains("metadata") || !queue["metadata"].is_object() ||
      !queue["metadata"].contains("name") || !queue["metadata"]["name"].is_string()) {
    return "a Queue without metadata.name is left out";
  }
  const std::string name = queue["metadata"]["name"].get<std::string>();
  if (deleted) {
    objects_.erase(name);
  } else {
    objects_[name] = queue;
  }
  // The objects as one YAML stream (JSON is YAML), read as a queue file is: every check of the
  // simulator's reader applies, with the object's position as its "line".
  std::string text;
  for (const auto& [n, o] : objects_) text += o.dump() + "\n---\n";
  try {
    tree_ = with_default(objects_.empty() ? std::vector<workload::QueueSpec>{}
                                          : io::parse_queues(text, "the cluster's Queues"));
    refused_.clear();
    return {};
  } catch (const base::InputError& e) {
    const std::string line =
        fmt::format("the cluster's Queues are refused, the last good set stays: {}", e.what());
    if (line == refused_) return {};
    refused_ = line;
    return line;
  }
}

std::optional<std::size_t> ClusterQueues::leaf(const std::string& name) const {
  const auto q = tree_.find(name.empty() ? kDefaultQueue : name);
  if (!q || !tree_.leaf(*q)) return std::nullopt;
  return q;
}

}  // namespace gpuorch::k8s
