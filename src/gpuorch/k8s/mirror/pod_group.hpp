#pragma once
// A gang's group object, read in one place for the scheduler and `doctor`: scheduler-plugins'
// and Volcano's PodGroup (scheduling.x-k8s.io/v1alpha1: spec.minMember, scheduleTimeoutSeconds),
// named by a pod's label or annotation, and the upstream gang API of Kubernetes v1.37
// (scheduling.k8s.io/v1beta1 PodGroup, KEP-4671, feature gate GenericWorkload: spec.
// schedulingPolicy.gang.minCount, or `basic`: no gang), named by a pod's spec.schedulingGroup.
// podGroupName. Both are keyed "namespace/name"; the pods of a group find it through
// PodObject::gang either way.
#include <nlohmann/json.hpp>
#include <string>

namespace gpuorch::k8s {

inline constexpr const char* kUpstreamPodGroups = "/apis/scheduling.k8s.io/v1beta1/podgroups";
inline constexpr const char* kPluginsPodGroups = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups";

struct PodGroup {
  std::string key;        // "namespace/name"
  bool upstream = false;  // scheduling.k8s.io's: its status is not scheduler-plugins' (phase, ...)
  bool gang = true;       // false: the upstream `basic` policy, each pod placed on its own
  int min_member = 1;
  int timeout_seconds = 0;  // scheduler-plugins' scheduleTimeoutSeconds; 0: none
  std::string error;        // set: the object cannot be used (why, one line); its pods wait
};

// Either kind, told apart by apiVersion (a list's items of a built-in kind carry none: then by
// spec.schedulingPolicy, which only the upstream kind has). Never throws: a field of the wrong
// shape is an error.
PodGroup podgroup_from_json(const nlohmann::json& obj);

}  // namespace gpuorch::k8s
