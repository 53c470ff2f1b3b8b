#include "gpuorch/k8s/kueue/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "gpuorch/k8s/api/object_fields.hpp"

namespace gpuorch::k8s::kueue {

namespace {

using nlohmann::json;

// Kueue bounds a pod set's count by int32; a what-if placement makes one pod object per count, so
// an object claiming more than any cluster holds is refused rather than allocated.
constexpr std::int64_t kMaxPods = 100'000;

bool condition_true(const json& obj, const char* type) {
  const json& conds = field(field(obj, "status"), "conditions");
  if (!conds.is_array()) return false;
  for (const json& c : conds) {
    if (str(c, "type") == type) return str(c, "status") == "True";
  }
  return false;
}

std::map<std::string, std::string> string_map(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace

const CheckState* Workload::check(const std::string& check_name) const {
  for (const CheckState& c : checks) {
    if (c.name == check_name) return &c;
  }
  return nullptr;
}

Workload workload_from_json(const json& obj) {
  Workload w;
  const json& meta = field(obj, "metadata");
  w.uid = str(meta, "uid");
  w.ns = str(meta, "namespace");
  w.name = str(meta, "name");
  w.created = str(meta, "creationTimestamp");
  w.resource_version = str(meta, "resourceVersion");
  w.quota_reserved = condition_true(obj, "QuotaReserved");
  w.admitted = condition_true(obj, "Admitted");
  w.finished = condition_true(obj, "Finished");
  w.evicted = condition_true(obj, "Evicted");
  if (const json& owners = field(meta, "ownerReferences"); owners.is_array()) {
    for (const json& o : owners) {
      if (!str(o, "uid").empty()) w.owners.push_back(str(o, "uid"));
    }
  }
  const json& status = field(obj, "status");
  if (const json& checks = field(status, "admissionChecks"); checks.is_array()) {
    for (std::size_t i = 0; i < checks.size(); ++i) {
      const json& retries = field(checks[i], "retryCount");
      w.checks.push_back(
          {str(checks[i], "name"), str(checks[i], "state"), str(checks[i], "message"),
           retries.is_number_integer() ? static_cast<int>(std::clamp<std::int64_t>(
                                             retries.get<std::int64_t>(), 0, 1'000'000))
                                       : 0,
           i});
    }
  }
  // What Kueue assigned, by pod set name: the flavors per resource and the admitted count.
  std::map<std::string, std::pair<std::map<std::string, std::string>, std::int64_t>> assigned;
  if (const json& psa = field(field(status, "admission"), "podSetAssignments"); psa.is_array()) {
    for (const json& a : psa) {
      const json& count = field(a, "count");
      assigned[str(a, "name")] = {string_map(field(a, "flavors")),
                                  count.is_number_integer() ? count.get<std::int64_t>() : -1};
    }
  }
  const json& sets = field(field(obj, "spec"), "podSets");
  if (!sets.is_array() || sets.empty()) {
    w.error = fmt::format("workload {} has no spec.podSets", w.key());
    return w;
  }
  for (const json& s : sets) {
    PodSet p;
    p.name = str(s, "name");
    const json& count = field(s, "count");
    std::int64_t n = count.is_number_integer() ? count.get<std::int64_t>() : 1;
    if (const auto it = assigned.find(p.name); it != assigned.end()) {
      p.flavors = it->second.first;
      if (it->second.second >= 0) n = it->second.second;
    }
    if (n < 0 || n > kMaxPods) {
      w.error = fmt::format("workload {}: pod set '{}' has count {} (0..{} taken)", w.key(), p.name,
                            n, kMaxPods);
      return w;
    }
    p.count = static_cast<int>(n);
    p.tmpl = field(s, "template");
    if (!p.tmpl.is_object() || !field(p.tmpl, "spec").is_object()) {
      w.error = fmt::format("workload {}: pod set '{}' has no template.spec", w.key(), p.name);
      return w;
    }
    w.pod_sets.push_back(std::move(p));
  }
  return w;
}

Flavor flavor_from_json(const json& obj) {
  Flavor f;
  const json& spec = field(obj, "spec");
  f.node_labels = string_map(field(spec, "nodeLabels"));
  if (const json& t = field(spec, "tolerations"); t.is_array()) f.tolerations = t;
  return f;
}

std::vector<PodObject> pods_of(const Workload& w, const std::map<std::string, Flavor>& flavors,
                               const std::string& prefix) {
  std::vector<PodObject> pods;
  for (const PodSet& set : w.pod_sets) {
    json spec = field(set.tmpl, "spec");
    spec.erase("schedulingGates");  // Kueue's own gate: it goes with the admission checked here
    spec.erase("nodeName");
    // Kueue's admission adds every assigned flavor's node labels and tolerations to the pods.
    for (const auto& [resource, flavor_name] : set.flavors) {
      const auto f = flavors.find(flavor_name);
      if (f == flavors.end()) continue;
      for (const auto& [k, v] : f->second.node_labels) spec["nodeSelector"][k] = v;
      for (const json& t : f->second.tolerations) spec["tolerations"].push_back(t);
    }
    const json& tmeta = field(set.tmpl, "metadata");
    for (int i = 0; i < set.count; ++i) {
      json meta = {{"namespace", w.ns},
                   {"name", fmt::format("{}-{}-{}", w.name, set.name, i)},
                   {"uid", fmt::format("{}{}/{}/{}", prefix, w.uid, set.name, i)},
                   {"creationTimestamp", w.created}};
      if (tmeta.is_object()) {
        if (field(tmeta, "labels").is_object()) meta["labels"] = tmeta["labels"];
        if (field(tmeta, "annotations").is_object()) meta["annotations"] = tmeta["annotations"];
      }
      pods.push_back(pod_from_json({{"apiVersion", "v1"},
                                    {"kind", "Pod"},
                                    {"metadata", std::move(meta)},
                                    {"spec", spec},
                                    {"status", {{"phase", "Pending"}}}}));
    }
  }
  return pods;
}

}  // namespace gpuorch::k8s::kueue
