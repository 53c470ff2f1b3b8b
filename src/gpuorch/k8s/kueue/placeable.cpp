#include "gpuorch/k8s/kueue/placeable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "gpuorch/k8s/api/object_fields.hpp"

namespace gpuorch::k8s::kueue {

namespace {

using nlohmann::json;

constexpr const char* kWhatIf = "placeable/";

std::string node_summary(const std::vector<std::string>& nodes) {
  std::map<std::string, int> per_node;
  for (const auto& n : nodes) ++per_node[n];
  std::string out;
  for (const auto& [n, k] : per_node) {
    if (!out.empty()) out += ", ";
    out += k > 1 ? fmt::format("{} x{}", n, k) : n;
  }
  return out;
}

// The controller owner's uid (a Job's pods), else "".
std::string controller_owner(const json& pod) {
  const json& owners = field(field(pod, "metadata"), "ownerReferences");
  if (!owners.is_array()) return "";
  for (const json& o : owners) {
    if (field(o, "controller").is_boolean() && o["controller"].get<bool>()) return str(o, "uid");
  }
  return "";
}

}  // namespace

json check_patch(const Verdict& v, const std::string& now_rfc3339) {
  const std::string at = fmt::format("/status/admissionChecks/{}", v.index);
  json ops = json::array(
      {{{"op", "test"}, {"path", at + "/name"}, {"value", v.check}},
       {{"op", "replace"}, {"path", at + "/state"}, {"value", v.state}},
       {{"op", "replace"}, {"path", at + "/message"}, {"value", v.message}},
       {{"op", "replace"}, {"path", at + "/lastTransitionTime"}, {"value", now_rfc3339}}});
  if (v.state == "Retry") {
    ops.push_back(
        {{"op", "add"}, {"path", at + "/requeueAfterSeconds"}, {"value", v.requeue_after_s}});
  }
  return ops;
}

json active_status(const json& admission_check, const std::string& now_rfc3339) {
  const json& gen = field(field(admission_check, "metadata"), "generation");
  json cond = {{"type", "Active"},
               {"status", "True"},
               {"reason", "Active"},
               {"message", "gpuorch scheduler answers this check with the scheduler core"},
               {"lastTransitionTime", now_rfc3339}};
  if (gen.is_number_integer()) cond["observedGeneration"] = gen;
  return {{"status", {{"conditions", json::array({cond})}}}};
}

PlaceableChecks::PlaceableChecks(PlaceableOptions options) : options_(options) {}

bool PlaceableChecks::admission_check(const json& obj, bool deleted) {
  const std::string name = str(field(obj, "metadata"), "name");
  if (name.empty()) return false;
  if (deleted || str(field(obj, "spec"), "controllerName") != kPlaceableController) {
    active_.erase(name);
    return checks_.erase(name) > 0;
  }
  const bool added = !checks_.contains(name);
  checks_[name] = obj;
  // Marked Active once per process: a condition someone else set is written over only then.
  return added;
}

bool PlaceableChecks::workload(const json& obj, bool deleted) {
  Workload w = workload_from_json(obj);
  if (w.uid.empty()) return false;
  if (deleted) {
    written_.erase(w.uid);
    return workloads_.erase(w.uid) > 0;
  }
  workloads_[w.uid] = std::move(w);
  return true;
}

bool PlaceableChecks::flavor(const json& obj, bool deleted) {
  const std::string name = str(field(obj, "metadata"), "name");
  if (name.empty()) return false;
  if (deleted) return flavors_.erase(name) > 0;
  flavors_[name] = flavor_from_json(obj);
  return true;
}

void PlaceableChecks::pod(const json& obj, const PodObject& parsed, bool deleted) {
  if (parsed.uid.empty()) return;
  const auto it = pods_.find(parsed.uid);
  if (it != pods_.end()) {
    if (it->second.terminating) --terminating_;
    if (const auto o = by_owner_.find(it->second.owner); o != by_owner_.end()) {
      o->second.erase(parsed.uid);
      if (o->second.empty()) by_owner_.erase(o);
    }
  }
  if (deleted || parsed.terminal()) {
    if (it != pods_.end()) pods_.erase(it);
    return;
  }
  PodEntry e;
  e.owner = controller_owner(obj);
  if (!e.owner.empty()) by_owner_[e.owner].insert(parsed.uid);
  e.bound = !parsed.node_name.empty();
  e.terminating = e.bound && parsed.deleting;
  if (!e.bound) e.parsed = parsed;  // only pending pods are ever placed here
  if (e.terminating) ++terminating_;
  pods_[parsed.uid] = std::move(e);
}

bool PlaceableChecks::claim_template(const json& obj, bool deleted) {
  const json& meta = field(obj, "metadata");
  const std::string key = str(meta, "namespace") + "/" + str(meta, "name");
  if (deleted) return templates_.erase(key) > 0;
  templates_[key] = field(field(obj, "spec"), "spec");
  return true;
}

std::vector<PodObject> PlaceableChecks::with_claims(std::vector<PodObject> pods,
                                                    ClaimOutcome& outcome, std::string& why) {
  outcome = ClaimOutcome::kPlaced;
  for (PodObject& p : pods) {
    if (p.claims.empty()) continue;
    if (dra_ == nullptr) {
      outcome = ClaimOutcome::kWaiting;
      why = fmt::format("pod {} has resourceClaims and the API server does not serve {}", p.key(),
                        "resource.k8s.io/v1");
      return {};
    }
    // A template's claim not made yet (Kueue has not released the pods): as the resourceclaim
    // controller will make it, owned by the pod.
    std::vector<json> made;
    for (PodClaim& pc : p.claims) {
      if (!pc.claim.empty() || pc.template_name.empty()) continue;
      const auto t = templates_.find(p.ns + "/" + pc.template_name);
      if (t == templates_.end()) {
        outcome = ClaimOutcome::kWaiting;
        why = fmt::format("ResourceClaimTemplate {}/{} (pod {}, claim {}) does not exist", p.ns,
                          pc.template_name, p.key(), pc.name);
        return {};
      }
      pc.claim = fmt::format("{}-{}-{}", p.name, pc.name, kWhatIf);
      made.push_back({{"metadata",
                       {{"name", pc.claim},
                        {"namespace", p.ns},
                        {"uid", p.uid + "/" + pc.name},
                        {"ownerReferences", json::array({{{"kind", "Pod"}, {"uid", p.uid}}})}}},
                      {"spec", t->second}});
    }
    const DraState::Ask a = dra_->ask_with(p, made);
    if (a.outcome != ClaimOutcome::kPlaced || a.pods.empty()) {
      outcome = a.outcome;
      why = fmt::format("pod {}: {}", p.key(), a.message);
      return {};
    }
    p = a.pods.front();
  }
  return pods;
}

std::vector<json> PlaceableChecks::inactive_checks() const {
  std::vector<json> out;
  for (const auto& [name, obj] : checks_) {
    if (!active_.contains(name)) out.push_back(obj);
  }
  return out;
}

bool PlaceableChecks::waiting() const {
  for (const auto& [uid, w] : workloads_) {
    if (!w.quota_reserved || w.finished || w.evicted) continue;
    for (const CheckState& c : w.checks) {
      if (ours(c.name) && c.state == "Pending") return true;
    }
  }
  return false;
}

bool PlaceableChecks::place(ClusterMirror& mirror, std::vector<PodObject> pods,
                            std::vector<std::string>& placed, std::string& why) {
  std::erase_if(pods, [&](const PodObject& p) { return mirror.accounted(p.uid); });
  if (pods.empty()) return true;
  const ClusterMirror::GangResult r = mirror.schedule_gang(pods);
  if (!r.placed) {
    why = r.message;
    return false;
  }
  placed.insert(placed.end(), r.uids.begin(), r.uids.end());
  why = node_summary(r.nodes);
  return true;
}

std::vector<PodObject> PlaceableChecks::in_flight(const Workload& w) const {
  std::size_t expected = 0;
  for (const PodSet& s : w.pod_sets) expected += static_cast<std::size_t>(s.count);
  // Its pods: the owners themselves (the pod integration) and the pods they own (a Job's).
  std::set<std::string> mine;
  for (const std::string& owner : w.owners) {
    if (pods_.contains(owner)) mine.insert(owner);
    if (const auto o = by_owner_.find(owner); o != by_owner_.end()) {
      mine.insert(o->second.begin(), o->second.end());
    }
  }
  std::vector<PodObject> pending;
  const std::size_t known = mine.size();
  for (const std::string& uid : mine) {
    const PodEntry& e = pods_.at(uid);
    if (!e.bound) pending.push_back(e.parsed);
  }
  // Pods the owner has not made yet (a Job's controller creates them once Kueue unsuspends it).
  if (known < expected) {
    std::vector<PodObject> templates = pods_of(w, flavors_, kWhatIf);
    templates.resize(std::min(templates.size(), expected - known));
    pending.insert(pending.end(), templates.begin(), templates.end());
  }
  return pending;
}

std::vector<Verdict> PlaceableChecks::evaluate(ClusterMirror& now, ClusterMirror& empty) {
  std::vector<std::string> placed;
  std::vector<const Workload*> candidates;
  for (const auto& [uid, w] : workloads_) {
    if (!w.quota_reserved || w.finished || w.evicted || !w.error.empty()) {
      if (!w.error.empty() && w.quota_reserved) candidates.push_back(&w);
      continue;
    }
    bool ready = false, pending = false;
    for (const CheckState& c : w.checks) {
      if (!ours(c.name)) continue;
      ready = ready || c.state == "Ready";
      pending = pending || c.state == "Pending";
    }
    if (pending) {
      candidates.push_back(&w);
    } else if (ready) {
      // Told Ready: its pods keep their room until they are bound.
      std::string ignored;
      ClaimOutcome outcome;
      place(now, with_claims(in_flight(w), outcome, ignored), placed, ignored);
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Workload* a, const Workload* b) {
    return std::tie(a->created, a->ns, a->name) < std::tie(b->created, b->ns, b->name);
  });

  std::vector<Verdict> out;
  for (const Workload* w : candidates) {
    const CheckState* check = nullptr;
    for (const CheckState& c : w->checks) {
      if (ours(c.name) && c.state == "Pending") check = &c;
    }
    if (check == nullptr) continue;
    Verdict v{w->ns, w->name, w->uid, check->name, check->index, "", "", 0};
    std::vector<PodObject> pods;
    if (w->error.empty()) pods = pods_of(*w, flavors_, kWhatIf);
    const auto bad =
        std::find_if(pods.begin(), pods.end(), [](const PodObject& p) { return !p.error.empty(); });
    const std::string bad_error = bad == pods.end() ? "" : bad->error;
    std::string why;
    ClaimOutcome claims = ClaimOutcome::kPlaced;
    if (w->error.empty() && bad_error.empty()) pods = with_claims(std::move(pods), claims, why);
    if (!w->error.empty()) {
      v.state = "Rejected";
      v.message = w->error;
    } else if (!bad_error.empty()) {
      v.state = "Rejected";
      v.message = fmt::format("a pod of this workload cannot be placed: {}", bad_error);
    } else if (claims == ClaimOutcome::kWaiting) {
      v.state = "Retry";
      v.requeue_after_s = static_cast<int>(options_.retry_after.count())
                          << std::min(check->retry_count, 3);
      v.message = fmt::format("its claims cannot be planned yet (retry in {} s): {}",
                              v.requeue_after_s, why);
    } else if (claims == ClaimOutcome::kUnevaluated) {
      // Outside what gpuorch evaluates (docs/dra.md): the scheduler that allocates decides.
      v.state = "Ready";
      v.message = fmt::format("not checked: {}", why);
    } else if (claims != ClaimOutcome::kPlaced) {
      v.state = "Rejected";
      v.message = fmt::format("its claims cannot be met: {}", why);
    } else if (place(now, pods, placed, why)) {
      v.state = "Ready";
      v.message = pods.empty() ? "nothing to place"
                               : fmt::format("placeable now: {} pods on {}", pods.size(), why);
    } else if (terminating_ > 0) {
      v.state = "Pending";
      v.message =
          fmt::format("does not fit until {} terminating pods are gone (asked again then): {}",
                      terminating_, why);
    } else {
      std::vector<std::string> trial;
      std::string why_empty;
      if (place(empty, pods, trial, why_empty)) {
        for (const auto& uid : trial) empty.release(uid);
        const int doublings = std::min(check->retry_count, 3);
        v.state = "Retry";
        v.requeue_after_s = static_cast<int>(options_.retry_after.count()) << doublings;
        v.message = fmt::format(
            "not placeable now, though it fits this cluster when room frees up (retry in {} s): {}",
            v.requeue_after_s, why);
      } else {
        v.state = "Rejected";
        v.message = fmt::format("does not fit even on the empty cluster: {}", why_empty);
      }
    }
    // Said already (a Pending message), or written on this version of the object: the update
    // that follows the write answers it, and writing again would only loop.
    if (v.state == "Pending" && check->message == v.message) continue;
    if (const auto it = written_.find(w->uid);
        it != written_.end() && it->second == w->resource_version) {
      continue;
    }
    written_[w->uid] = w->resource_version;
    out.push_back(std::move(v));
  }
  for (auto it = placed.rbegin(); it != placed.rend(); ++it) now.release(*it);
  return out;
}

}  // namespace gpuorch::k8s::kueue
