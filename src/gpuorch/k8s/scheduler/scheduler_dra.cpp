// gpuorch scheduler's side of Dynamic Resource Allocation (docs/dra.md, "The scheduler side"):
// ResourceSlices of gpuorch's driver become the nodes' GPUs in the core's model; every claim's
// allocation (whoever made it) counts as used GPUs from the moment it is decided; a pod's claims
// become the core's request (dra_claims.hpp) and their status (allocation, reservedFor) is
// written through the status subresource before the pod's binding, as kube-scheduler does.
#include <fmt/format.h>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/mirror/extended_resources.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/scheduler/scheduler_service.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

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

void SchedulerService::handle_claim(const json& obj, bool deleted) {
  feed_.claim(obj, deleted);
  cluster_changed_ = true;
  // A victim's claim deallocated (or gone): its devices are the preemptor's now.
  const std::string holder = claim_holder(str(field(obj, "metadata"), "uid"));
  if (evicted_.contains(holder) && !mirror_.accounted(holder)) victim_gone(holder);
}

void SchedulerService::drop_assumed_claims(const std::string& pod_uid) {
  const auto it = assumed_claims_.find(pod_uid);
  if (it == assumed_claims_.end()) return;
  dra_.drop_assumed(it->second, mirror_);
  assumed_claims_.erase(it);
}

void SchedulerService::release_claims_of(const PodObject& pod) {
  assumed_claims_.erase(pod.uid);
  if (!ours(pod) || pod.claims.empty()) return;
  for (const auto& [key, c] : dra_.claims()) {
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
  if (!ensure_built(pod)) return;
  if (options_.queues) {
    MemberAsk a;
    a.claims = true;
    a.ask = dra_.ask(pod);
    std::string why;
    if (!place_claimed_job(pod, a, why)) report_unschedulable(pod, why);
    return;
  }
  const DraState::Placement placement = dra_.place(pod, mirror_);
  if (!placement.placed()) {
    report_unschedulable(pod, placement.message);
    return;
  }
  std::vector<ClaimWrite> writes;
  try {
    writes = claim_writes(pod, placement);
  } catch (const std::exception& e) {
    mirror_.release(pod.uid);
    report_unschedulable(pod,
                         fmt::format("the claims' allocation could not be written: {}", e.what()));
    return;
  }
  assumed_claims_[pod.uid] = dra_.hold(pod, placement, mirror_);
  queue_bind(pod, placement.result.node, {}, std::move(writes));
}

bool SchedulerService::decide_extended(const PodObject& pod, std::string& why) {
  if (!pod.extended_claim.empty() && dra_served_) {
    // Its claim exists (made by a bind that failed later, or by kube-scheduler): the pod is placed
    // as one with that claim, which pins it to the claim's node.
    PodObject with = pod;
    with.spec.gpu_count = 0;
    with.spec.gpu_milli = 0;
    with.claims = {{"extended-resources", pod.extended_claim, ""}};
    decide_with_claims(with);
    return true;
  }
  if (!dra_served_ || pod.spec.gpu_count == 0) return false;
  const std::string cls = dra_.bridge_class(pod);
  if (cls.empty()) return false;
  MemberAsk a;
  a.claims = true;
  a.extended = dra_.extended_claim(pod, cls);
  if (options_.queues) {
    a.ask = dra_.ask_extended(pod, a.extended);
    return place_claimed_job(pod, a, why);
  }
  const DraState::Placement placement = dra_.place_extended(pod, a.extended, mirror_);
  if (!placement.placed()) {
    why = placement.message;
    return false;
  }
  a.ask.plan = placement.plan;
  std::vector<ClaimWrite> writes;
  try {
    writes = keep_claims(pod, a, static_cast<std::size_t>(std::max(placement.chosen, 0)),
                         placement.result.node, placement.result.decision.placement.gpus);
  } catch (const std::exception& e) {
    mirror_.release(pod.uid);
    report_unschedulable(pod,
                         fmt::format("the claim's allocation could not be written: {}", e.what()));
    return true;
  }
  queue_bind(pod, placement.result.node, {}, std::move(writes));
  return true;
}

json SchedulerService::write_claim(const PodObject& pod, const ClaimWrite& w) {
  if (!w.create) return api_.replace(w.path, w.claim);
  // As kube-scheduler's PreBind does for the bridge: the claim, its allocation through the status
  // subresource, then the pod's status names it; a later step refused takes the claim back.
  json created = api_.create(w.path, w.claim);
  const std::string name = object_name(created);
  const std::string path = namespaced_path(kResourceApi, pod.ns, "resourceclaims", name);
  try {
    created["status"] = w.status;
    api_.replace(path + "/status", created);
    json status = w.pod_status;
    status["resourceClaimName"] = name;
    api_.patch(pod_path(pod.ns, pod.name, "status"),
               {{"status", {{"extendedResourceClaimStatus", status}}}});
    return created;
  } catch (...) {
    try {
      api_.remove(path);
    } catch (const std::exception&) {
      // Owned by the pod: the garbage collector removes it with the pod.
    }
    throw;
  }
}

}  // namespace gpuorch::k8s
