// Pods with ResourceClaims (and KEP-5004's bridge) placed with others: a gang's members together
// through sched::place_gang, and any job through the job layer with --queues (docs/dra.md,
// "Claims in gangs and queues"). Each member is asked of the core as a pod restricted to the GPUs
// its claims may get (DraState::Ask), so the gang is admitted whole and each member's devices are
// chosen by the GPU picker on its node; a gang's claims are all written before any member is
// bound, and taken back when one write is refused, so no gang is ever half bound.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/scheduler/scheduler_service.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

constexpr const char* kClaimsApi = "/apis/resource.k8s.io/v1";

// The pod as its claims are planned: a pod whose bridge claim exists has that claim.
PodObject with_extended_claim(const PodObject& pod) {
  PodObject with = pod;
  with.spec.gpu_count = 0;
  with.spec.gpu_milli = 0;
  with.claims = {{"extended-resources", pod.extended_claim, ""}};
  return with;
}

}  // namespace

std::string SchedulerService::member_asks(const std::vector<PodObject>& members, bool bridge,
                                          std::vector<MemberAsk>& out) {
  out.clear();
  out.reserve(members.size());
  // Claims to allocate, by the members that would allocate them: one claim can be allocated once.
  std::map<std::string, std::vector<std::string>> allocating;
  for (const PodObject& p : members) {
    MemberAsk& a = out.emplace_back();
    if (!p.claims.empty() || !p.extended_claim.empty()) {
      if (!dra_served_) {
        return fmt::format(
            "member {} has resourceClaims and the API server does not serve resource.k8s.io/v1",
            p.key());
      }
      a.claims = true;
      a.ask = dra_.ask(p.claims.empty() ? with_extended_claim(p) : p);
    } else if (const std::string cls =
                   bridge && dra_served_ && p.spec.gpu_count > 0 ? dra_.bridge_class(p) : "";
               !cls.empty()) {
      a.claims = true;
      a.extended = dra_.extended_claim(p, cls);
      a.ask = dra_.ask_extended(p, a.extended);
    } else {
      a.ask.pods.push_back(dra_.device_plugin_gpus_only(p));
      continue;
    }
    if (a.ask.outcome != DraState::Placement::Outcome::kPlaced) {
      return fmt::format("member {}: {}", p.key(), a.ask.message);
    }
    for (const ClaimChoice& c : a.ask.plan.choices) {
      for (const ClaimChoice::Part& part : c.parts) {
        auto& who = allocating[part.claim];
        if (std::find(who.begin(), who.end(), p.key()) == who.end()) who.push_back(p.key());
      }
    }
  }
  for (const auto& [claim, who] : allocating) {
    if (who.size() < 2) continue;
    // Allocated first (a pod alone, or kube-scheduler), it pins every member to its node.
    return fmt::format(
        "Unsupported: ResourceClaim {} is not allocated yet and is named by {} members ({}): "
        "gpuorch scheduler allocates a claim with one pod, so it cannot keep them on one node "
        "while placing the gang; give each member its own claim (a ResourceClaimTemplate), or "
        "have the claim allocated first",
        claim, who.size(), fmt::join(who, ", "));
  }
  return "";
}

std::vector<PodObject> SchedulerService::asked(const std::vector<PodObject>& members,
                                               const std::vector<MemberAsk>& asks, std::size_t way,
                                               bool bridged) const {
  std::vector<PodObject> out;
  out.reserve(members.size());
  for (std::size_t i = 0; i < members.size() && i < asks.size(); ++i) {
    const MemberAsk& a = asks[i];
    if (!bridged && !a.extended.is_null()) {
      out.push_back(dra_.device_plugin_gpus_only(members[i]));
    } else {
      out.push_back(a.ask.pods[std::min(way, a.ways() - 1)]);
    }
  }
  return out;
}

std::vector<SchedulerService::ClaimWrite> SchedulerService::claim_writes(
    const PodObject& pod, const DraState::Placement& placement) const {
  const ClaimPlan& plan = placement.plan;
  const std::string& node = placement.result.node;
  const std::vector<int>& gpus = placement.result.decision.placement.gpus;
  const ClaimChoice* chosen =
      placement.chosen < 0 ? nullptr : &plan.choices[static_cast<std::size_t>(placement.chosen)];
  const std::vector<DeviceResult> results =
      chosen == nullptr ? std::vector<DeviceResult>{}
                        : device_results(*chosen, node, gpus, dra_.inventory());
  std::vector<ClaimWrite> writes;
  for (const std::string& key : plan.claims) {
    const ClaimObject& c = dra_.claims().at(key);
    const bool allocate = chosen != nullptr &&
                          std::any_of(chosen->parts.begin(), chosen->parts.end(),
                                      [&](const ClaimChoice::Part& p) { return p.claim == key; });
    const bool reserved =
        std::find(c.reserved_uids.begin(), c.reserved_uids.end(), pod.uid) != c.reserved_uids.end();
    if (!allocate && reserved) continue;
    ClaimWrite w;
    w.path = namespaced_path(kClaimsApi, c.ns, "resourceclaims", c.name) + "/status";
    w.claim = claim_status_for(c, pod, node, allocate ? results : std::vector<DeviceResult>{},
                               chosen != nullptr ? chosen->parts : std::vector<ClaimChoice::Part>{},
                               dra_.inventory());
    writes.push_back(std::move(w));
  }
  return writes;
}

std::vector<SchedulerService::ClaimWrite> SchedulerService::keep_claims(
    const PodObject& pod, const MemberAsk& a, std::size_t way, const std::string& node,
    const std::vector<int>& gpus) {
  if (!a.claims) return {};
  DraState::Placement placement;
  placement.outcome = DraState::Placement::Outcome::kPlaced;
  placement.plan = a.ask.plan;
  placement.result.node = node;
  placement.result.decision.outcome = sched::Outcome::kPlaced;
  placement.result.decision.placement.gpus = gpus;
  if (!placement.plan.choices.empty()) {
    placement.chosen = static_cast<int>(std::min(way, placement.plan.choices.size() - 1));
  }
  if (a.extended.is_null()) {
    std::vector<ClaimWrite> writes = claim_writes(pod, placement);
    assumed_claims_[pod.uid] = dra_.hold(pod, placement, mirror_);
    return writes;
  }
  ClaimWrite w;
  w.create = true;
  w.path = namespaced_path(kClaimsApi, pod.ns, "resourceclaims");
  w.claim = a.extended;
  json planned = a.extended;
  planned["metadata"]["name"] = pod.name + "-extended-resources";
  w.status = dra_.extended_status(pod, placement, planned)["status"];
  w.pod_status = extended_claim_status(pod.gpu_resources, "");
  assumed_claims_[pod.uid] = {dra_.hold_extended(pod, placement, mirror_)};
  return {std::move(w)};
}

bool SchedulerService::keep_gang_claims(
    const std::vector<PodObject>& pending, const std::vector<MemberAsk>& asks, std::size_t way,
    bool bridged, const ClusterMirror::GangResult& r,
    std::unordered_map<std::string, std::vector<ClaimWrite>>& writes) {
  std::map<std::string, std::size_t> at;  // uid -> its index in r
  for (std::size_t i = 0; i < r.uids.size(); ++i) at[r.uids[i]] = i;
  std::vector<std::string> kept;
  try {
    for (std::size_t i = 0; i < pending.size() && i < asks.size(); ++i) {
      const MemberAsk& a = asks[i];
      const auto placed = at.find(pending[i].uid);
      if (!a.claims || (!bridged && !a.extended.is_null()) || placed == at.end()) continue;
      writes[pending[i].uid] =
          keep_claims(pending[i], a, way, r.nodes[placed->second], r.gpus[placed->second]);
      kept.push_back(pending[i].uid);
    }
  } catch (const std::exception& e) {
    for (const std::string& uid : kept) drop_assumed_claims(uid);
    for (const std::string& uid : r.uids) mirror_.release(uid);
    writes.clear();
    for (const PodObject& p : pending) {
      report_unschedulable(
          p, fmt::format("gang {}: the claims' allocation could not be written: {}", p.gang,
                         e.what()));
    }
    return false;
  }
  return true;
}

bool SchedulerService::place_claimed_job(const PodObject& pod, const MemberAsk& a,
                                         std::string& why) {
  if (a.ask.outcome != DraState::Placement::Outcome::kPlaced) {
    why = a.ask.message;
    return false;
  }
  for (std::size_t way = 0; way < a.ways(); ++way) {
    const PodObject& asking = a.ask.pods[way];
    const JobDecision d = place_job({asking});
    if (!d.placement.placed) {
      if (why.empty()) why = d.placement.message;
      // Its claims are not nominated on what a shrink frees: it waits for them to be gone.
      if (way + 1 == a.ways()) shrink_for({asking}, 0, false);
      continue;
    }
    if (d.nominated) {
      // Its claims are written when its victims are gone (victim_gone), from the state then.
      nominated_claims_[pod.uid] = {a, way};
      return true;
    }
    std::vector<ClaimWrite> writes;
    try {
      writes = keep_claims(pod, a, way, d.placement.nodes.front(), d.placement.gpus.front());
    } catch (const std::exception& e) {
      mirror_.release(pod.uid);
      why = fmt::format("the claims' allocation could not be written: {}", e.what());
      return false;
    }
    queue_bind(pod, d.placement.nodes.front(), {}, std::move(writes));
    return true;
  }
  return false;
}

void SchedulerService::take_back(const PodObject& pod, const ClaimWrite& w, const json& written) {
  const std::string name = object_name(written);
  const std::string path = namespaced_path(kClaimsApi, pod.ns, "resourceclaims", name);
  try {
    if (w.create) {
      // The bridge's claim goes, and the pod's status names none again, so its next decision
      // makes a new one.
      api_.patch(pod_path(pod.ns, pod.name, "status"),
                 {{"status", {{"extendedResourceClaimStatus", nullptr}}}});
      api_.remove(path);
      return;
    }
    const json released = claim_released(claim_from_json(api_.get(path)), pod.uid);
    if (!released.is_null()) api_.replace(path + "/status", released);
  } catch (const std::exception& e) {
    // Left reserved for a pod that is not bound: its next decision finds the claim allocated
    // (pinned to that node), and the pod's deletion releases it (release_claims_of).
    log(fmt::format("{}: taking back ResourceClaim {}/{} failed: {}", pod.key(), pod.ns, name,
                    e.what()),
        base::Severity::kWarning);
  }
}

void SchedulerService::bind_gang(const std::vector<BindJob>& members) {
  std::vector<std::pair<const BindJob*, std::pair<const ClaimWrite*, json>>> written;
  try {
    for (const BindJob& m : members) {
      for (const ClaimWrite& w : m.claims) {
        try {
          written.push_back({&m, {&w, write_claim(m.pod, w)}});
        } catch (const ApiError& e) {
          throw std::runtime_error(
              fmt::format("gang {}: ResourceClaim {}/{} of member {}: status write refused: {}",
                          m.pod.gang, m.pod.ns, object_name(w.claim), m.pod.key(), e.what()));
        }
      }
    }
  } catch (const ApiCancelled&) {
    return;
  } catch (const std::exception& e) {
    ++counters_.bind_errors;
    log(fmt::format("gang bind failed, no member bound: {}", e.what()), base::Severity::kError);
    for (auto it = written.rbegin(); it != written.rend(); ++it) {
      take_back(it->first->pod, *it->second.first, it->second.second);
    }
    for (const BindJob& m : members) {
      push(
          {Event::Kind::kBindFailed, Event::Type::kUpsert, json(std::string(e.what())), m.pod.uid});
    }
    return;
  }
  for (const BindJob& m : members) {
    if (!m.claims.empty()) {
      push({Event::Kind::kClaimsWritten, Event::Type::kUpsert, {}, m.pod.uid});
    }
  }
  for (const BindJob& m : members) {
    BindJob pod_only = m;
    pod_only.claims.clear();
    bind_pod(pod_only);
  }
}

}  // namespace gpuorch::k8s
