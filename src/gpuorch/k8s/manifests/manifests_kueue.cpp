#include "gpuorch/k8s/kueue/workload.hpp"
#include "gpuorch/k8s/manifests/manifest_parts.hpp"

namespace gpuorch::k8s::manifest_parts {
namespace {

constexpr const char* kName = "gpuorch-admission-check";

// What `gpuorch admission-check` calls and nothing more: the cluster as the scheduler core sees
// it (nodes, pods, DRA's objects), Kueue's objects it reads, and the two status writes it makes
// (the verdict in a Workload's admissionChecks, the Active condition of its AdmissionChecks).
Json admission_check_cluster_role(const ManifestOptions& o) {
  Json role = rbac("ClusterRole", cluster_scoped(kName, o), o, false);
  role["rules"] = Json::array({
      rule({""}, {"nodes"}, {"get", "list", "watch"}),
      rule({""}, {"pods"}, {"get", "list", "watch"}),
      rule({"kueue.x-k8s.io"}, {"workloads", "admissionchecks", "resourceflavors"},
           {"get", "list", "watch"}),
      rule({"kueue.x-k8s.io"}, {"workloads/status", "admissionchecks/status"}, {"patch"}),
      // DRA: the devices, the classes, the claims allocated and the templates pods will claim by.
      rule({"resource.k8s.io"},
           {"resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"},
           {"get", "list", "watch"}),
  });
  return role;
}

// The AdmissionCheck a ClusterQueue lists under spec.admissionChecks to have its Workloads
// checked (docs/kueue.md); Kueue's CRD must be installed before it can be applied.
Json placeable_admission_check(const ManifestOptions& o) {
  Json check;
  check["apiVersion"] = "kueue.x-k8s.io/v1beta2";
  check["kind"] = "AdmissionCheck";
  check["metadata"] = metadata("gpuorch-placeable", o, false);
  check["spec"]["controllerName"] = kueue::kPlaceableController;
  return check;
}

}  // namespace

void add_kueue_manifests(const ManifestOptions& o, std::vector<Manifest>& out) {
  out.push_back({"01-serviceaccount-gpuorch-admission-check.yaml", service_account(kName, o)});
  out.push_back({"04-clusterrole-admission-check.yaml", admission_check_cluster_role(o)});
  out.push_back({"05-clusterrolebinding-admission-check.yaml",
                 binding_of("ClusterRoleBinding", "ClusterRole", kName, kName, o, false)});
  out.push_back({"06-role-admission-check-leader-election.yaml", lease_role(kName, o)});
  out.push_back(
      {"07-rolebinding-admission-check-leader-election.yaml",
       binding_of("RoleBinding", "Role", std::string(kName) + "-leader-election", kName, o, true)});
  out.push_back({"41-admission-check.yaml",
                 controller_deployment(kName, "admission-check", {"--policy", "efd"},
                                       kAdmissionCheckPort, o)});
  out.push_back({"50-admissioncheck-gpuorch-placeable.yaml", placeable_admission_check(o)});
}

}  // namespace gpuorch::k8s::manifest_parts
