#include "gpuorch/doctor/cluster_view.hpp"

#include <fmt/format.h>

#include <variant>

#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/pod_group.hpp"

namespace gpuorch::doctor {

ClusterView::ClusterView(const ClusterObjects& objects, const k8s::MirrorOptions& options)
    : mirror(options) {
  for (const auto& g : objects.podgroups) {
    const k8s::PodGroup parsed = k8s::podgroup_from_json(g);
    // A `basic` group (upstream) is no gang: its pods are explained one by one.
    if (parsed.gang) groups[parsed.key] = PodGroupView{parsed.min_member, parsed.error};
  }
  std::map<std::string, cluster::NodeSpec> nodes;
  for (const auto& n : objects.nodes) {
    const auto parsed = k8s::node_from_json(n);
    if (const auto* spec = std::get_if<cluster::NodeSpec>(&parsed)) {
      nodes[spec->name] = *spec;
    } else {
      left_out.push_back(std::get<std::string>(parsed));
    }
  }
  node_count = nodes.size();
  for (const auto& s : objects.resource_slices) dra.slice(s, false, mirror);
  for (const auto& c : objects.device_classes) dra.device_class(c, false);
  for (const auto& j : objects.pods) {
    k8s::PodObject p = k8s::pod_from_json(j);
    if (p.uid.empty() || p.terminal()) continue;
    dra.pod(p, false, mirror);  // its claims count in its queue
    raw[p.uid] = &j;
    pods.push_back(std::move(p));
  }
  for (const auto& c : objects.resource_claims) dra.claim(c, false, mirror);
  mirror.set_nodes(dra.apply(std::move(nodes), mirror));
  std::vector<workload::PodSpec> seen;
  for (const auto& p : pods) {
    if (p.error.empty()) seen.push_back(dra.spec_with_claims(p));
  }
  if (node_count == 0 || pods.empty()) return;
  try {
    mirror.ensure_built(seen);
  } catch (const std::exception& e) {
    // What gpuorch scheduler reports on the pod in this case, too.
    build_error = fmt::format("the scheduler cannot build its policy: {}", e.what());
    return;
  }
  for (const auto& p : pods) {
    if (!p.node_name.empty()) mirror.account(k8s::DraState::counted(p));
  }
  ready_ = true;
}

}  // namespace gpuorch::doctor
