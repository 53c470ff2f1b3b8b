// gpuorch scheduler's side of Dynamic Resource Allocation (docs/dra.md, "The scheduler side"):
// ResourceSlices of gpuorch's driver become the nodes' GPUs in the core's model; every claim's
// allocation (whoever made it) counts as used GPUs from the moment it is decided; a pod's claims
// become the core's request (dra_claims.hpp) and their status (allocation, reservedFor) is
// written through the status subresource before the pod's binding, as kube-scheduler does.
#include <fmt/format.h>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/scheduler/scheduler_service.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

// Claims' GPUs are held in the mirror under this id, apart from the pods that use them: a claim
// may outlive its pod or serve several.
std::string claim_holder(const std::string& claim_uid) { return "resourceclaim:" + claim_uid; }

std::string claim_status_path(const std::string& ns, const std::string& name) {
  return namespaced_path(kResourceApi, ns, "resourceclaims", name) + "/status";
}

}  // namespace

bool SchedulerService::discover_dra(const std::atomic<bool>& stop) {
  try {
    if (!patient_get(api_, kResourceApi, options_.startup_timeout, stop, options_.log,
                     [this] { beat(); })) {
      return false;
    }
    dra_served_ = true;
  } catch (const ApiError& e) {
    if (e.status() != 404) {
      throw std::runtime_error(
          fmt::format("the API server refused {}: {}", kResourceApi, e.what()));
    }
    log("no resource.k8s.io/v1 API: pods with resourceClaims wait", base::Severity::kWarning);
  }
  return true;
}

std::map<std::string, cluster::NodeSpec> SchedulerService::nodes_with_dra() {
  std::map<std::string, cluster::NodeSpec> out = nodes_;
  dra_gpu_nodes_.clear();
  for (auto& [name, spec] : out) {
    if (dra_.apply(spec)) dra_gpu_nodes_.insert(name);
  }
  eligibility_.clear();
  // Which nodes' GPUs are DRA devices decides which allocations are counted.
  for (const auto& [key, claim] : claims_) account_claim(claim);
  return out;
}

workload::PodSpec SchedulerService::history_spec(const PodObject& pod) const {
  workload::PodSpec spec = pod.spec;
  if (pod.claims.empty() || spec.gpu_count > 0) return spec;
  int gpus = 0;
  for (const PodClaim& pc : pod.claims) {
    const auto it = claims_.find(pod.ns + "/" + pc.claim);
    if (it == claims_.end()) continue;
    gpus += it->second.allocated ? static_cast<int>(allocated_gpus(it->second, dra_).size())
                                 : requested_gpus(it->second);
  }
  if (gpus > 0) {
    spec.gpu_count = gpus;
    spec.gpu_milli = base::kMilliPerGpu;
  }
  return spec;
}

void SchedulerService::handle_slice(const json& obj, bool deleted) {
  if (!dra_.update_slice(obj, deleted)) return;
  eligibility_.clear();
  nodes_dirty_ = true;
  cluster_changed_ = true;
  // Allocations name devices: where they are may only now be known.
  for (const auto& [key, claim] : claims_) account_claim(claim);
}

void SchedulerService::handle_device_class(const json& obj, bool deleted) {
  const std::string name = object_name(obj);
  if (name.empty()) return;
  if (deleted) {
    device_classes_.erase(name);
  } else {
    device_classes_[name] = device_class_from_json(obj);
  }
  eligibility_.clear();
  cluster_changed_ = true;
}

void SchedulerService::handle_claim(const json& obj, bool deleted) {
  ClaimObject c = claim_from_json(obj);
  if (c.uid.empty() || c.name.empty()) return;
  cluster_changed_ = true;
  if (deleted) {
    claims_.erase(c.key());
    claims_in_flight_.erase(c.uid);
    mirror_.release(claim_holder(c.uid));
    return;
  }
  account_claim(c);
  claims_[c.key()] = std::move(c);
}

void SchedulerService::account_claim(const ClaimObject& claim) {
  const std::string holder = claim_holder(claim.uid);
  const auto gpus =
      claim.allocated ? allocated_gpus(claim, dra_) : std::vector<std::pair<std::string, int>>{};
  // Our own allocation being written: the claim's older states do not undo it.
  if (claims_in_flight_.contains(claim.uid)) {
    if (gpus.empty()) return;
    claims_in_flight_.erase(claim.uid);
  }
  std::vector<int> on_node;
  // Counted only where the node's GPUs are its DRA devices (never on a device plugin's GPUs).
  const std::string node = gpus.empty() || !dra_gpu_nodes_.contains(gpus.front().first)
                               ? std::string()
                               : gpus.front().first;
  for (const auto& [n, g] : gpus) {
    if (!node.empty() && n == node) on_node.push_back(g);
  }
  std::sort(on_node.begin(), on_node.end());
  const auto held = mirror_.assumed(holder);
  if (held && held->first == node && held->second == on_node) return;
  if (!held && on_node.empty()) return;
  mirror_.release(holder);
  if (on_node.empty()) return;
  PodObject p;
  p.uid = holder;
  p.ns = claim.ns;
  p.name = claim.name;
  p.node_name = node;
  p.spec.name = "resourceclaim/" + claim.key();
  p.spec.gpu_count = static_cast<int>(on_node.size());
  p.spec.gpu_milli = base::kMilliPerGpu;
  p.gpus = on_node;
  mirror_.account(p);
}

void SchedulerService::drop_assumed_claims(const std::string& pod_uid) {
  const auto it = assumed_claims_.find(pod_uid);
  if (it == assumed_claims_.end()) return;
  for (const std::string& uid : it->second) {
    claims_in_flight_.erase(uid);
    mirror_.release(claim_holder(uid));
    for (const auto& [key, c] : claims_) {
      if (c.uid == uid) account_claim(c);  // as the API server has it now
    }
  }
  assumed_claims_.erase(it);
}

void SchedulerService::release_claims_of(const PodObject& pod) {
  assumed_claims_.erase(pod.uid);
  if (!ours(pod) || pod.claims.empty()) return;
  for (const auto& [key, c] : claims_) {
    if (std::find(c.reserved_uids.begin(), c.reserved_uids.end(), pod.uid) ==
        c.reserved_uids.end()) {
      continue;
    }
    // Read again at write time and written with its resourceVersion: a conflict (the resourceclaim
    // controller releasing it too, another pod reserving it) is retried from the new state.
    writes_.submit("claim-release/" + c.uid + "/" + pod.uid, [this, ns = c.ns, name = c.name,
                                                              pod_uid = pod.uid] {
      const std::string path = namespaced_path(kResourceApi, ns, "resourceclaims", name);
      json current;
      try {
        current = api_.get(path);
      } catch (const ApiError& e) {
        if (e.status() == 404) return;  // gone: nothing to release
        throw;
      }
      const json released = claim_released(claim_from_json(current), pod_uid);
      if (released.is_null()) return;
      api_.replace(path + "/status", released);
    });
  }
}

void SchedulerService::decide_with_claims(const PodObject& pod) {
  if (!dra_served_) {
    report_unschedulable(pod,
                         "the pod has resourceClaims and the API server does not serve "
                         "resource.k8s.io/v1; waiting");
    return;
  }
  if (options_.queues) {
    report_unschedulable(pod,
                         "Unsupported: spec.resourceClaims with --queues (the job layer does "
                         "not count DRA devices yet; docs/dra.md)");
    return;
  }
  if (!ensure_built(pod)) return;
  const ClaimPlan plan =
      plan_claims(pod, claims_, device_classes_, dra_, dra_gpu_nodes_, &eligibility_);
  if (!plan.waiting.empty()) {
    report_unschedulable(pod, plan.waiting);
    return;
  }
  if (!plan.refused.empty()) {
    report_unschedulable(pod, fmt::format("Infeasible: {}", plan.refused));
    return;
  }
  if (pod.spec.gpu_count > 0 && !plan.choices.empty()) {
    report_unschedulable(pod,
                         "Unsupported: GPUs asked both as a resource (nvidia.com/gpu, a "
                         "share) and through spec.resourceClaims; ask in one way");
    return;
  }
  PodObject ask = pod;
  if (!plan.pinned_node.empty()) ask.spec.constraints.node_names = {plan.pinned_node};
  ClusterMirror::Result r;
  const ClaimChoice* chosen = nullptr;
  std::string failure;
  auto explain = [&](const PodObject& p) {
    sched::RequestResolver resolver(mirror_.cluster());
    return unschedulable_message(r, resolver.resolve(p.spec), mirror_.cluster().node_count());
  };
  if (plan.choices.empty()) {
    r = mirror_.schedule(ask);
    if (r.decision.outcome != sched::Outcome::kPlaced) failure = explain(ask);
  } else {
    for (const ClaimChoice& choice : plan.choices) {
      ask.spec.gpu_count = choice.gpus;
      ask.spec.gpu_milli = base::kMilliPerGpu;
      ask.spec.gpus_restricted = true;
      ask.spec.gpu_groups = choice.groups;
      r = mirror_.schedule(ask);
      if (r.decision.outcome == sched::Outcome::kPlaced) {
        chosen = &choice;
        break;
      }
      if (failure.empty()) failure = explain(ask);
    }
  }
  if (r.decision.outcome != sched::Outcome::kPlaced) {
    report_unschedulable(
        pod, fmt::format("ResourceClaims {}: {}", fmt::join(plan.claims, ", "), failure));
    return;
  }
  const std::vector<int> gpus = r.decision.placement.gpus;
  // The pod holds its CPU and memory; the claim holds the GPUs.
  mirror_.release(pod.uid);
  PodObject bound = pod;
  bound.node_name = r.node;
  mirror_.account(bound);
  std::vector<ClaimWrite> writes;
  std::vector<std::string> allocating;
  try {
    for (const std::string& key : plan.claims) {
      const ClaimObject& c = claims_.at(key);
      const bool allocate =
          chosen != nullptr && !chosen->parts.empty() && chosen->parts.front().claim == key;
      const bool reserved = std::find(c.reserved_uids.begin(), c.reserved_uids.end(), pod.uid) !=
                            c.reserved_uids.end();
      if (!allocate && reserved) continue;
      const std::vector<int> claim_gpus = allocate ? gpus : std::vector<int>{};
      writes.push_back(
          {claim_status_path(c.ns, c.name),
           claim_status_for(c, pod, r.node, claim_gpus,
                            allocate ? chosen->parts : std::vector<ClaimChoice::Part>{}, dra_)});
      if (allocate) allocating.push_back(c.uid);
    }
  } catch (const std::exception& e) {
    mirror_.release(pod.uid);
    report_unschedulable(pod,
                         fmt::format("the claims' allocation could not be written: {}", e.what()));
    return;
  }
  // Counted as used from now on, so no other pod is given these devices meanwhile.
  for (const std::string& uid : allocating) {
    for (const auto& [key, c] : claims_) {
      if (c.uid != uid) continue;
      claims_in_flight_.insert(uid);
      PodObject p;
      p.uid = claim_holder(uid);
      p.ns = c.ns;
      p.name = c.name;
      p.node_name = r.node;
      p.spec.name = "resourceclaim/" + key;
      p.spec.gpu_count = static_cast<int>(gpus.size());
      p.spec.gpu_milli = base::kMilliPerGpu;
      p.gpus = gpus;
      mirror_.release(p.uid);
      mirror_.account(p);
    }
  }
  assumed_claims_[pod.uid] = allocating;
  queue_bind(pod, r.node, {}, std::move(writes));
}

}  // namespace gpuorch::k8s
