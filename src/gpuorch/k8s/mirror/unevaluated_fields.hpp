#pragma once
// The parts of a pod spec that constrain placement and that `gpuorch scheduler` does not evaluate
// (inter-pod affinity, topology spread, host ports, volumes that bind to nodes,
// resources the core does not account). A scheduler that ignored them would bind the pod where
// kube-scheduler's default filters would refuse it, so a required one makes the pod
// Unschedulable with its name; a soft one (a preference) is logged once and ignored.
// `gpuorch extender` does not use this: there kube-scheduler evaluates all of them itself.
// docs/scheduler.md has the table (field, evaluated or refused, test).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::k8s {

struct UnevaluatedFields {
  // Each names the field and why it matters ("spec.affinity.podAntiAffinity.required...: ...").
  std::vector<std::string> required;
  std::vector<std::string> preferred;
};

UnevaluatedFields unevaluated_fields(const nlohmann::json& pod);

// The one message an Unschedulable pod gets for its first required field: what to do about it.
std::string unevaluated_message(const std::string& field);

}  // namespace gpuorch::k8s
