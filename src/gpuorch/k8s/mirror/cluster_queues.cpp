#include "gpuorch/k8s/mirror/cluster_queues.hpp"

#include <fmt/format.h>

#include <set>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/sched/jobs/resources.hpp"

namespace gpuorch::k8s {
namespace {

// The spec fields io::parse_queues reads (KAI's names).
const std::set<std::string> kKnownSpecKeys = {"parentQueue", "priority", "resources",
                                              "displayName"};

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

// GPUs as the API writes the quantity: "2", "1.5".
std::string gpus(std::int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000)
                           : fmt::format("{}", double(milli) / 1000.0);
}

// A resource list as the API writes quantities: "2" or "1500m" CPUs, "4096Mi", "1.5" GPUs.
nlohmann::json resource_list(const sched::jobs::Resources& r) {
  const auto milli = [](std::int64_t m) {
    return m % 1000 == 0 ? std::to_string(m / 1000) : std::to_string(m) + "m";
  };
  return {{"cpu", milli(r.v[1])},
          {"memory", fmt::format("{}Mi", r.v[2])},
          {"nvidia.com/gpu", gpus(r.v[0])}};
}

}  // namespace

ClusterQueues::ClusterQueues() : tree_(with_default({})) {}

std::string ClusterQueues::update(const nlohmann::json& queue, bool deleted) {
  ++generation_;
  if (!queue.is_object() || !queue.contains("metadata") || !queue["metadata"].is_object() ||
      !queue["metadata"].contains("name") || !queue["metadata"]["name"].is_string()) {
    return "a Queue without metadata.name is left out";
  }
  const std::string name = queue["metadata"]["name"].get<std::string>();
  std::string ignored;
  if (deleted) {
    objects_.erase(name);
  } else {
    // A cluster's Queue may carry fields of KAI's that gpuorch does not act on (minimum
    // runtimes before preemption, ...): the reader is strict for files, where an unknown key is
    // a typo, but a cluster's objects are what KAI's users wrote, so those keys are left out
    // here, and named once in the log.
    nlohmann::json kept = queue;
    if (kept.contains("spec") && kept["spec"].is_object()) {
      for (auto it = kept["spec"].begin(); it != kept["spec"].end();) {
        if (kKnownSpecKeys.contains(it.key())) {
          ++it;
          continue;
        }
        ignored += (ignored.empty() ? "" : ", ") + it.key();
        it = kept["spec"].erase(it);
      }
    }
    objects_[name] = std::move(kept);
  }
  // The objects as one YAML stream (JSON is YAML), read as a queue file is: every check of the
  // simulator's reader applies, with the object's position as its "line".
  std::string text;
  for (const auto& [n, o] : objects_) text += o.dump() + "\n---\n";
  try {
    tree_ = with_default(objects_.empty() ? std::vector<workload::QueueSpec>{}
                                          : io::parse_queues(text, "the cluster's Queues"));
    refused_.clear();
    if (ignored.empty() || ignored_[name] == ignored) return {};
    ignored_[name] = ignored;
    return fmt::format("queue {}: spec fields gpuorch does not act on are left out: {}",
                       base::printable(name), base::printable(ignored));
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

std::vector<sched::jobs::Resources> ClusterQueues::holdings(
    const std::vector<const PodObject*>& pods, const DraState* dra,
    const NodeModel& model_of) const {
  std::vector<sched::jobs::Resources> out(tree_.size());
  const bool by_model = model_of && !tree_.gpu_models().empty();
  for (const PodObject* p : pods) {
    const auto q = leaf(p->queue);
    if (!q) continue;
    std::optional<std::size_t> slot;
    if (by_model && !p->node_name.empty()) {
      slot = tree_.model_slot(model_of(p->node_name));
    } else if (by_model && p->spec.allowed_models.size() == 1) {
      slot = tree_.model_slot(p->spec.allowed_models.front());
    }
    const sched::jobs::Resources r = sched::jobs::request_of(
        dra != nullptr && !p->claims.empty() ? dra->spec_with_claims(*p) : p->spec, slot);
    for (int at = int(*q); at >= 0; at = tree_.parent(std::size_t(at))) out[std::size_t(at)] += r;
  }
  return out;
}

std::map<std::string, nlohmann::json> ClusterQueues::statuses(
    const std::vector<const PodObject*>& bound, const std::vector<const PodObject*>& pending,
    const DraState* dra, const NodeModel& model_of) const {
  const auto allocated = holdings(bound, dra, model_of);
  auto requested = holdings(pending, dra, model_of);
  for (std::size_t q = 0; q < requested.size(); ++q) requested[q] += allocated[q];
  std::map<std::string, nlohmann::json> out;
  for (std::size_t q = 0; q < tree_.size(); ++q) {
    const std::string& name = tree_.spec(q).name;
    if (!objects_.contains(name)) continue;
    out[name] = {{"allocated", resource_list(allocated[q])},
                 {"requested", resource_list(requested[q])}};
    if (!model_of) continue;
    for (const auto& m : tree_.spec(q).gpu_models) {
      const std::size_t k = *tree_.model_slot(m.model);
      out[name]["gpuModels"][m.model] = {{"allocated", gpus(allocated[q].v[k])},
                                         {"requested", gpus(requested[q].v[k])}};
    }
  }
  return out;
}

}  // namespace gpuorch::k8s
