#include "gpuorch/k8s/mirror/dra_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {
namespace {

constexpr std::string_view kHolderPrefix = "resourceclaim:";
// What a bridge pod's GPUs are held under until its claim exists: "extended:<pod uid>".
constexpr const char* kExtendedHold = "extended:";

// The claim's GPUs as a bound pod of the mirror: on its node, in `queue`.
PodObject holder_pod(const ClaimObject& claim, const std::string& node,
                     const std::vector<int>& gpus, const std::string& queue) {
  PodObject p;
  p.uid = claim_holder(claim.uid);
  p.ns = claim.ns;
  p.name = claim.name;
  p.node_name = node;
  p.queue = queue;
  p.spec.name = "resourceclaim/" + claim.key();
  p.spec.gpu_count = static_cast<int>(gpus.size());
  p.spec.gpu_milli = base::kMilliPerGpu;
  p.gpus = gpus;
  return p;
}

}  // namespace

std::string claim_holder(const std::string& claim_uid) {
  return std::string(kHolderPrefix) + claim_uid;
}

bool is_claim_holder(const std::string& uid) { return uid.starts_with(kHolderPrefix); }

bool DraState::slice(const nlohmann::json& obj, bool deleted, ClusterMirror& mirror) {
  if (!inventory_.update_slice(obj, deleted)) return false;
  eligibility_.clear();
  // Allocations name devices: where they are may only now be known.
  account_all(mirror);
  return true;
}

void DraState::device_class(const nlohmann::json& obj, bool deleted) {
  const std::string name = object_name(obj);
  if (name.empty()) return;
  if (deleted) {
    classes_.erase(name);
  } else {
    classes_[name] = device_class_from_json(obj);
  }
  eligibility_.clear();
}

void DraState::claim(const nlohmann::json& obj, bool deleted, ClusterMirror& mirror) {
  ClaimObject c = claim_from_json(obj);
  if (c.uid.empty() || c.name.empty()) return;
  // A bridge claim of ours arriving: what was held for it until now goes, the claim holds it.
  if (c.allocated && str(field(field(obj, "metadata"), "annotations"),
                         kExtendedResourceClaimAnnotation) == "true") {
    for (const std::string& owner : c.owners) mirror.release(claim_holder(kExtendedHold + owner));
  }
  if (deleted) {
    claims_.erase(c.key());
    in_flight_.erase(c.uid);
    mirror.release(claim_holder(c.uid));
    return;
  }
  account(c, mirror);
  claims_[c.key()] = std::move(c);
}

void DraState::pod(const PodObject& pod, bool deleted, ClusterMirror& mirror) {
  if (deleted || pod.claims.empty()) {
    queue_of_pod_.erase(pod.uid);
    return;
  }
  auto [it, added] = queue_of_pod_.try_emplace(pod.uid, pod.queue);
  if (!added && it->second == pod.queue) return;
  it->second = pod.queue;
  for (const auto& [key, c] : claims_) {
    if (std::find(c.reserved_uids.begin(), c.reserved_uids.end(), pod.uid) ==
        c.reserved_uids.end()) {
      continue;
    }
    const auto held = mirror.assumed(claim_holder(c.uid));
    if (!held) continue;
    mirror.release(claim_holder(c.uid));
    mirror.account(holder_pod(c, held->first, held->second, pod.queue));
  }
}

std::map<std::string, cluster::NodeSpec> DraState::apply(
    std::map<std::string, cluster::NodeSpec> nodes, ClusterMirror& mirror) {
  gpu_nodes_.clear();
  plugin_groups_.clear();
  for (auto& [name, spec] : nodes) {
    if (inventory_.apply(spec)) {
      gpu_nodes_.insert(name);
    } else if (spec.gpu_count > 0) {
      std::vector<int> all(static_cast<std::size_t>(spec.gpu_count));
      std::iota(all.begin(), all.end(), 0);
      plugin_groups_.push_back({name, {std::move(all)}});
    }
  }
  eligibility_.clear();
  account_all(mirror);
  return nodes;
}

void DraState::account_all(ClusterMirror& mirror) {
  for (const auto& [key, c] : claims_) account(c, mirror);
}

void DraState::account(const ClaimObject& claim, ClusterMirror& mirror) {
  const std::string holder = claim_holder(claim.uid);
  const auto gpus = claim.allocated ? allocated_gpus(claim, inventory_)
                                    : std::vector<std::pair<std::string, int>>{};
  // Our own allocation being written: the claim's older states do not undo it.
  if (in_flight_.contains(claim.uid)) {
    if (gpus.empty()) return;
    in_flight_.erase(claim.uid);
  }
  // Counted only where the node's GPUs are its DRA devices (never on a device plugin's GPUs).
  const std::string node =
      gpus.empty() || !gpu_nodes_.contains(gpus.front().first) ? std::string() : gpus.front().first;
  std::vector<int> on_node;
  for (const auto& [n, g] : gpus) {
    if (!node.empty() && n == node) on_node.push_back(g);
  }
  std::sort(on_node.begin(), on_node.end());
  std::string queue;
  for (const std::string& uid : claim.reserved_uids) {
    if (const auto q = queue_of_pod_.find(uid); q != queue_of_pod_.end()) {
      queue = q->second;
      break;
    }
  }
  // A victim's claim (--queues preemption): its GPUs are held until it is deallocated, then
  // they are the preemptor's; never counted again meanwhile.
  if (mirror.evicting(holder)) {
    if (on_node.empty()) mirror.release(holder);
    return;
  }
  const auto held = mirror.assumed(holder);
  if (held && held->first == node && held->second == on_node) return;
  if (!held && on_node.empty()) return;
  mirror.release(holder);
  if (on_node.empty()) return;
  mirror.account(holder_pod(claim, node, on_node, queue));
}

workload::PodSpec DraState::spec_with_claims(const PodObject& pod) const {
  workload::PodSpec spec = pod.spec;
  if (pod.claims.empty() || spec.gpu_count > 0) return spec;
  int gpus = 0;
  for (const PodClaim& pc : pod.claims) {
    const auto it = claims_.find(pod.ns + "/" + pc.claim);
    if (it == claims_.end()) continue;
    gpus += it->second.allocated ? static_cast<int>(allocated_gpus(it->second, inventory_).size())
                                 : requested_gpus(it->second);
  }
  if (gpus > 0) {
    spec.gpu_count = gpus;
    spec.gpu_milli = base::kMilliPerGpu;
  }
  return spec;
}

PodObject DraState::device_plugin_gpus_only(const PodObject& pod) const {
  if (!pod.claims.empty() || pod.spec.gpu_count == 0 || pod.spec.gpu_share() ||
      pod.spec.gpus_restricted) {
    return pod;
  }
  // A class's implicit resource name is no device plugin's: only the bridge gives it.
  const bool implicit = std::any_of(
      pod.gpu_resources.begin(), pod.gpu_resources.end(),
      [](const GpuResourceAsk& a) { return a.resource.starts_with(kImplicitClassPrefix); });
  if (gpu_nodes_.empty() && !implicit) return pod;
  PodObject out = pod;
  out.spec.gpus_restricted = true;
  if (!implicit) out.spec.gpu_groups = plugin_groups_;
  return out;
}

std::string DraState::device_plugin_note(const PodObject& pod) const {
  if (gpu_nodes_.empty() || !pod.claims.empty() || pod.spec.gpu_count == 0) return "";
  std::string mapped;
  for (const auto& [name, cls] : classes_) {
    // Which resource the pod names is not kept; a GPU resource of the mirror's is nvidia.com/gpu
    // or amd.com/gpu.
    if (cls.extended_resource_name == "nvidia.com/gpu" ||
        cls.extended_resource_name == "amd.com/gpu") {
      mapped = name;
      break;
    }
  }
  if (mapped.empty()) {
    return fmt::format(
        " ({} node(s) whose GPUs are DRA devices have none for a GPU resource request; ask "
        "through a ResourceClaim)",
        gpu_nodes_.size());
  }
  return fmt::format(
      " ({} node(s) whose GPUs are DRA devices are left out: DeviceClass {} maps the GPU "
      "resource to them (KEP-5004), which gpuorch scheduler allocates when all the pod's GPU "
      "resources map to one DeviceClass; docs/dra.md)",
      gpu_nodes_.size(), mapped);
}

std::string DraState::bridge_class(const PodObject& pod) const {
  if (gpu_nodes_.empty() || pod.gpu_resources.empty() || !pod.claims.empty()) return "";
  std::string found;
  for (const GpuResourceAsk& a : pod.gpu_resources) {
    std::string cls;
    if (a.resource.starts_with(kImplicitClassPrefix)) {
      const std::string name = a.resource.substr(std::string_view(kImplicitClassPrefix).size());
      if (classes_.contains(name)) cls = name;
    } else {
      // The first by name when several classes name it (kube-scheduler takes the newest).
      for (const auto& [name, c] : classes_) {
        if (c.extended_resource_name == a.resource) {
          cls = name;
          break;
        }
      }
    }
    if (cls.empty() || (!found.empty() && found != cls)) return "";
    found = cls;
  }
  return found;
}

nlohmann::json DraState::extended_claim(const PodObject& pod, const std::string& cls) const {
  nlohmann::json requests = nlohmann::json::array();
  for (const GpuResourceAsk& a : pod.gpu_resources) {
    requests.push_back(
        {{"name", a.request},
         {"exactly",
          {{"deviceClassName", cls}, {"allocationMode", "ExactCount"}, {"count", a.count}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata",
           {{"generateName", pod.name + "-extended-resources-"},
            {"namespace", pod.ns},
            {"annotations", {{kExtendedResourceClaimAnnotation, "true"}}},
            {"ownerReferences", nlohmann::json::array({{{"apiVersion", "v1"},
                                                        {"kind", "Pod"},
                                                        {"name", pod.name},
                                                        {"uid", pod.uid},
                                                        {"controller", true},
                                                        {"blockOwnerDeletion", true}}})}}},
          {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
}

DraState::Ask DraState::ask_with(const PodObject& pod, const std::vector<nlohmann::json>& claims) {
  std::vector<std::string> added;
  for (const nlohmann::json& obj : claims) {
    ClaimObject c = claim_from_json(obj);
    const std::string key = c.key();
    if (claims_.try_emplace(key, std::move(c)).second) added.push_back(key);
  }
  Ask out;
  try {
    out = ask(pod);
  } catch (...) {
    for (const std::string& key : added) claims_.erase(key);
    throw;
  }
  for (const std::string& key : added) claims_.erase(key);
  return out;
}

DraState::Ask DraState::ask_extended(const PodObject& pod, const nlohmann::json& claim) {
  // Planned as a claim of the pod's (its name and uid stand in until it is created), then
  // forgotten: it exists only once created.
  nlohmann::json planned = claim;
  planned["metadata"]["name"] = pod.name + "-extended-resources";
  planned["metadata"]["uid"] = kExtendedHold + pod.uid;
  PodObject asking = pod;
  asking.spec.gpu_count = 0;
  asking.spec.gpu_milli = 0;
  asking.claims = {{"extended-resources", pod.name + "-extended-resources", ""}};
  return ask_with(asking, {planned});
}

DraState::Placement DraState::place_extended(const PodObject& pod, const nlohmann::json& claim,
                                             ClusterMirror& mirror) {
  return place_ask(ask_extended(pod, claim), mirror);
}

nlohmann::json DraState::extended_status(const PodObject& pod, const Placement& placement,
                                         const nlohmann::json& created) const {
  const ClaimChoice& chosen = placement.plan.choices.at(static_cast<std::size_t>(placement.chosen));
  ClaimObject c = claim_from_json(created);
  std::vector<ClaimChoice::Part> parts = chosen.parts;
  for (auto& part : parts) part.claim = c.key();
  return claim_status_for(c, pod, placement.result.node,
                          device_results(chosen, placement.result.node,
                                         placement.result.decision.placement.gpus, inventory_),
                          parts, inventory_);
}

std::string DraState::hold_extended(const PodObject& pod, const Placement& placement,
                                    ClusterMirror& mirror) {
  const std::string id = kExtendedHold + pod.uid;
  mirror.release(pod.uid);
  PodObject bound = pod;
  bound.node_name = placement.result.node;
  bound.spec.gpu_count = 0;
  bound.spec.gpu_milli = 0;
  bound.gpus.clear();
  mirror.account(bound);
  ClaimObject c;
  c.uid = id;
  c.ns = pod.ns;
  c.name = pod.name + "-extended-resources";
  mirror.release(claim_holder(id));
  mirror.account(
      holder_pod(c, placement.result.node, placement.result.decision.placement.gpus, pod.queue));
  return id;
}

PodObject DraState::counted(const PodObject& pod) {
  if (pod.extended_claim.empty()) return pod;
  PodObject out = pod;
  out.spec.gpu_count = 0;
  out.spec.gpu_milli = 0;
  out.gpus.clear();
  return out;
}

DraState::Ask DraState::ask(const PodObject& pod, const std::vector<std::string>& among) {
  using Outcome = Placement::Outcome;
  Ask out;
  out.plan = plan_claims(pod, claims_, classes_, inventory_, gpu_nodes_, &eligibility_);
  const ClaimPlan& plan = out.plan;
  if (!plan.waiting.empty()) {
    out.outcome = Outcome::kWaiting;
    out.message = plan.waiting;
    return out;
  }
  if (!plan.refused.empty()) {
    out.outcome = plan.unevaluated ? Outcome::kUnevaluated : Outcome::kInfeasible;
    out.message = fmt::format("Infeasible: {}", plan.refused);
    return out;
  }
  if (pod.spec.gpu_count > 0 && !plan.choices.empty()) {
    out.outcome = Outcome::kUnevaluated;
    out.message =
        "Unsupported: GPUs asked both as a resource (nvidia.com/gpu, a share) and through "
        "spec.resourceClaims; ask in one way";
    return out;
  }
  PodObject ask = pod;
  if (!plan.pinned_node.empty()) {
    ask.spec.constraints.node_names = {plan.pinned_node};
    if (!among.empty() && std::find(among.begin(), among.end(), plan.pinned_node) == among.end()) {
      out.outcome = Outcome::kNoRoom;
      out.message = fmt::format("ResourceClaims {}: allocated on {}, which is not offered",
                                fmt::join(plan.claims, ", "), plan.pinned_node);
      return out;
    }
  } else if (!among.empty()) {
    ask.spec.constraints.node_names = among;
  }
  if (plan.choices.empty()) out.pods.push_back(ask);
  for (const ClaimChoice& choice : plan.choices) {
    ask.spec.gpu_count = choice.gpus;
    ask.spec.gpu_milli = base::kMilliPerGpu;
    ask.spec.gpus_restricted = true;
    ask.spec.gpu_groups = choice.groups;
    out.pods.push_back(ask);
  }
  return out;
}

DraState::Placement DraState::place(const PodObject& pod, ClusterMirror& mirror,
                                    const std::vector<std::string>& among) {
  return place_ask(ask(pod, among), mirror);
}

DraState::Placement DraState::place_ask(const Ask& ask, ClusterMirror& mirror) {
  using Outcome = Placement::Outcome;
  Placement out;
  out.plan = ask.plan;
  if (ask.outcome != Outcome::kPlaced) {
    out.outcome = ask.outcome;
    out.message = ask.message;
    return out;
  }
  std::string failure;
  bool infeasible = true;
  for (std::size_t i = 0; i < ask.pods.size(); ++i) {
    const PodObject& p = ask.pods[i];
    out.result = mirror.schedule(p);
    if (out.result.decision.outcome == sched::Outcome::kPlaced) {
      out.outcome = Outcome::kPlaced;
      if (!ask.plan.choices.empty()) out.chosen = static_cast<int>(i);
      return out;
    }
    infeasible = infeasible && out.result.decision.outcome == sched::Outcome::kInfeasible;
    if (failure.empty()) {
      sched::RequestResolver resolver(mirror.cluster());
      failure = unschedulable_message(out.result, resolver.resolve(p.spec),
                                      mirror.cluster().node_count());
    }
  }
  out.outcome = infeasible ? Outcome::kInfeasible : Outcome::kNoRoom;
  out.message = fmt::format("ResourceClaims {}: {}", fmt::join(ask.plan.claims, ", "), failure);
  return out;
}

std::vector<std::string> DraState::hold(const PodObject& pod, const Placement& placement,
                                        ClusterMirror& mirror) {
  const std::string& node = placement.result.node;
  const std::vector<int>& gpus = placement.result.decision.placement.gpus;
  // The pod holds its CPU and memory; the claim holds the GPUs.
  mirror.release(pod.uid);
  PodObject bound = pod;
  bound.node_name = node;
  bound.gpus.clear();
  mirror.account(bound);
  std::vector<std::string> allocating;
  if (placement.chosen < 0) return allocating;
  const ClaimChoice& chosen = placement.plan.choices[static_cast<std::size_t>(placement.chosen)];
  // Each claim it allocates holds its own GPUs, counted as used from now on, so no other pod is
  // given these devices meanwhile.
  const std::vector<DeviceResult> results = device_results(chosen, node, gpus, inventory_);
  std::map<std::string, std::vector<int>> by_claim;
  for (const DeviceResult& r : results) by_claim[chosen.parts.at(r.part).claim].push_back(r.gpu);
  for (auto& [key, claim_gpus] : by_claim) {
    const auto it = claims_.find(key);
    if (it == claims_.end()) continue;
    const ClaimObject& c = it->second;
    std::sort(claim_gpus.begin(), claim_gpus.end());
    in_flight_.insert(c.uid);
    mirror.release(claim_holder(c.uid));
    mirror.account(holder_pod(c, node, claim_gpus, pod.queue));
    allocating.push_back(c.uid);
  }
  return allocating;
}

void DraState::drop_assumed(const std::vector<std::string>& claim_uids, ClusterMirror& mirror) {
  for (const std::string& uid : claim_uids) {
    in_flight_.erase(uid);
    mirror.release(claim_holder(uid));
    for (const auto& [key, c] : claims_) {
      if (c.uid == uid) account(c, mirror);  // as the API server has it now
    }
  }
}

}  // namespace gpuorch::k8s
