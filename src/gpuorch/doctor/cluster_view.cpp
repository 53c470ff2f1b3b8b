#include "gpuorch/doctor/cluster_view.hpp"

namespace gpuorch::doctor {

ClusterView::ClusterView(const ClusterObjects& objects, const k8s::MirrorOptions& options)
    : feed_(options, {}) {
  for (const auto& g : objects.podgroups) {
    const k8s::PodGroup parsed = k8s::podgroup_from_json(g);
    // A `basic` group (upstream) is no gang: its pods are explained one by one.
    if (parsed.gang) groups[parsed.key] = parsed;
  }
  // In the order the scheduler's informers would have them: the nodes' GPUs before the claims
  // that hold some, the pods before the claims reserved for them.
  for (const auto& n : objects.nodes) feed_.node(n, false);
  for (const auto& s : objects.resource_slices) feed_.slice(s, false);
  for (const auto& c : objects.device_classes) feed_.device_class(c, false);
  for (const auto& j : objects.pods) {
    k8s::PodObject p = k8s::pod_from_json(j);
    if (p.uid.empty() || p.terminal()) continue;
    feed_.pod(p, false);
    raw[p.uid] = &j;
    pods.push_back(std::move(p));
  }
  for (const auto& c : objects.resource_claims) feed_.claim(c, false);
  for (const auto& [name, why] : feed_.left_out()) left_out.push_back(why);
  node_count = feed_.nodes().size();
  if (node_count == 0 || pods.empty()) return;
  if (const std::string why = feed_.ensure_built(); !why.empty()) {
    build_error = "the scheduler " + why;  // what gpuorch scheduler reports on the pod, too
    return;
  }
  ready_ = true;
}

}  // namespace gpuorch::doctor
