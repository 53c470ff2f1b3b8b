#pragma once
// The cluster as `gpuorch scheduler` sees it, built from listed objects for doctor's
// explanations: the Nodes in a fresh k8s::ClusterMirror (nodes it cannot use are named), every
// pod that has not finished, the bound ones counted, the nodes' DRA GPUs and the claims
// allocated on them, and the PodGroups' minMember. Explanations
// try placements on it and undo them, so each is asked against the same state.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::doctor {

struct PodGroupView {
  int min_member = 1;
  std::string error;  // malformed: why
};

class ClusterView {
 public:
  ClusterView(const ClusterObjects& objects, const k8s::MirrorOptions& options);

  k8s::ClusterMirror mirror;
  k8s::DraState dra;  // the nodes' DRA GPUs and the claims holding them (counted in `mirror`)
  std::vector<k8s::PodObject> pods;                  // not finished, in listing order
  std::map<std::string, const nlohmann::json*> raw;  // by uid: the object as listed
  std::map<std::string, PodGroupView> groups;        // by "namespace/name"
  std::vector<std::string> left_out;                 // nodes the scheduler cannot use: why
  std::size_t node_count = 0;
  std::string build_error;  // the policy could not be built: what the scheduler reports
  // The mirror is built and holds the bound pods (false without nodes or pods, or on an error).
  [[nodiscard]] bool ready() const { return ready_; }

 private:
  bool ready_ = false;
};

}  // namespace gpuorch::doctor
