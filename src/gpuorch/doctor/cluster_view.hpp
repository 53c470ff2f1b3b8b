#pragma once
// The cluster as `gpuorch scheduler` sees it, built from listed objects for doctor's
// explanations: the objects go through the scheduler's own k8s::MirrorFeed (the Nodes it can
// use, every pod that has not finished, the bound ones counted, the nodes' DRA GPUs and the
// claims allocated on them), plus the PodGroups' minMember. Explanations try placements on it
// and undo them, so each is asked against the same state.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/mirror_feed.hpp"
#include "gpuorch/k8s/mirror/pod_group.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::doctor {

class ClusterView {
 public:
  ClusterView(const ClusterObjects& objects, const k8s::MirrorOptions& options);

  [[nodiscard]] k8s::ClusterMirror& mirror() { return feed_.mirror(); }
  [[nodiscard]] const k8s::ClusterMirror& mirror() const { return feed_.mirror(); }
  // The nodes' DRA GPUs and the claims holding them (counted in mirror()).
  [[nodiscard]] k8s::DraState& dra() { return feed_.dra(); }
  [[nodiscard]] const k8s::DraState& dra() const { return feed_.dra(); }
  std::vector<k8s::PodObject> pods;                  // not finished, in listing order
  std::map<std::string, const nlohmann::json*> raw;  // by uid: the object as listed
  std::map<std::string, k8s::PodGroup> groups;       // gangs by "namespace/name"
  std::vector<std::string> left_out;                 // nodes the scheduler cannot use: why
  std::size_t node_count = 0;
  std::string build_error;  // the policy could not be built: what the scheduler reports
  // The mirror is built and holds the bound pods (false without nodes or pods, or on an error).
  [[nodiscard]] bool ready() const { return ready_; }

 private:
  k8s::MirrorFeed feed_;
  bool ready_ = false;
};

}  // namespace gpuorch::doctor
