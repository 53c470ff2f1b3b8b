#pragma once
// Kueue's Workload (kueue.x-k8s.io/v1beta2) as the placeability check reads it: its pod sets
// (a pod template and a count each), the flavors Kueue assigned them when it reserved quota, the
// state of each admission check, and the pods it stands for. Kueue writes these objects; like
// everything from the API server, a field of the wrong shape is read as absent and a Workload
// that cannot be used says why, never throws.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s::kueue {

inline constexpr const char* kGroupVersion = "/apis/kueue.x-k8s.io/v1beta2";
// The controllerName of gpuorch's AdmissionCheck (docs/kueue.md).
inline constexpr const char* kPlaceableController = "gpuorch.io/placeable";

struct CheckState {
  std::string name;
  std::string state;  // Pending | Ready | Retry | Rejected
  std::string message;
  int retry_count = 0;    // Kueue counts the Retry transitions
  std::size_t index = 0;  // its place in status.admissionChecks (the JSON patch addresses it)
};

struct PodSet {
  std::string name;
  int count = 0;  // the assignment's count when Kueue gave one (partial admission), else the spec's
  nlohmann::json tmpl;                         // spec.podSets[].template (a PodTemplateSpec)
  std::map<std::string, std::string> flavors;  // resource -> ResourceFlavor, once quota is reserved
};

struct Workload {
  std::string uid, ns, name, created, resource_version;
  bool quota_reserved = false;  // condition QuotaReserved True
  bool admitted = false;        // condition Admitted True
  bool finished = false;        // condition Finished True
  bool evicted = false;         // condition Evicted True
  std::vector<PodSet> pod_sets;
  std::vector<CheckState> checks;
  // ownerReferences' uids: the pod itself (the pod integration) or the Job, JobSet, ... whose
  // pods carry the same owner.
  std::vector<std::string> owners;
  std::string error;  // set: the object cannot be used (why, one line)

  [[nodiscard]] std::string key() const { return ns + "/" + name; }
  [[nodiscard]] const CheckState* check(const std::string& name) const;
};

Workload workload_from_json(const nlohmann::json& obj);

// A ResourceFlavor's part in placement: Kueue adds its nodeLabels to the pods' nodeSelector and
// its tolerations to theirs when it admits them.
struct Flavor {
  std::map<std::string, std::string> node_labels;
  nlohmann::json tolerations = nlohmann::json::array();
};
Flavor flavor_from_json(const nlohmann::json& obj);

// The pods `w` stands for, as Kueue will release them: each pod set's template `count` times,
// with the nodeSelector and tolerations of the flavors assigned to it. Their uids are
// "<prefix><workload uid>/<pod set>/<i>", so a what-if placement cannot collide with a real pod.
// A template the mirror cannot read gives pods with `error` set (pod_from_json's reason).
std::vector<PodObject> pods_of(const Workload& w, const std::map<std::string, Flavor>& flavors,
                               const std::string& prefix);

}  // namespace gpuorch::k8s::kueue
