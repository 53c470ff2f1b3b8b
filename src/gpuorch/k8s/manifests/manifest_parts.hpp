#pragma once
// The pieces every set of gpuorch's deployment objects is made of (manifests.cpp defines them):
// metadata with gpuorch's labels, DaemonSets, RBAC, the restricted security context, the GPU
// taints' tolerations, per-component resources. Shared so the DRA driver's objects
// (manifests_dra.cpp) are made the same way as the device plugin's.
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/manifests/manifests.hpp"

namespace gpuorch::k8s::manifest_parts {

using Json = nlohmann::ordered_json;

Json metadata(const std::string& name, const ManifestOptions& o, bool namespaced = true);
Json restricted_security();
Json gpu_tolerations();
Json host_path_volume(const std::string& name, const std::string& path, const char* type);
Json daemonset(const std::string& name, const ManifestOptions& o, Json pod_spec,
               Json pod_annotations = Json());
Json resources(const ManifestOptions& o, const std::string& component);
Json service_account(const std::string& name, const ManifestOptions& o);
Json rule(std::initializer_list<const char*> groups, std::initializer_list<const char*> resources,
          std::initializer_list<const char*> verbs);
std::string cluster_scoped(const std::string& name, const ManifestOptions& o);
Json rbac(const char* kind, const std::string& name, const ManifestOptions& o, bool namespaced);
Json binding_of(const char* kind, const char* role_kind, const std::string& name,
                const std::string& account, const ManifestOptions& o, bool namespaced);

// Leader election for `name`'s replicas: get, create and update of Leases in its namespace.
Json lease_role(const std::string& name, const ManifestOptions& o);
// A controller gpuorch runs as two replicas, one leading (`gpuorch <component> --listen ...
// --leader-elect`): probes on /healthz and /readyz, Prometheus scrape annotations, the restricted
// security context as a numeric user, the standby preferably on another node.
Json controller_deployment(const std::string& name, const std::string& component,
                           const std::vector<std::string>& args, int port,
                           const ManifestOptions& o);

// One printer column of a CRD version (`kubectl get` shows it).
Json crd_column(const char* name, const char* type, const char* path);
// A CRD named plural.group with one served and stored version, with a status subresource.
Json custom_resource_definition(const std::string& group, Json names, const char* scope,
                                const char* version_name, Json schema, Json columns,
                                const ManifestOptions& o);

// queues.scheduling.run.ai (KAI-Scheduler's Queue, v2), cluster-scoped (manifests_queue.cpp).
Json queue_crd(const ManifestOptions& o);

// The DRA driver's objects (`gpuorch manifests --dra`, docs/dra.md): its ServiceAccount,
// ClusterRole(Binding), the DeviceClasses gpu.gpuorch.io and mig.gpuorch.io, and the DaemonSet.
void add_dra_manifests(const ManifestOptions& o, std::vector<Manifest>& out);

// `gpuorch admission-check`'s objects (`gpuorch manifests --kueue`, docs/kueue.md): its
// ServiceAccount, ClusterRole(Binding), leader-election Role(Binding), Deployment, and the
// AdmissionCheck gpuorch-placeable (kueue.x-k8s.io/v1beta2).
void add_kueue_manifests(const ManifestOptions& o, std::vector<Manifest>& out);

}  // namespace gpuorch::k8s::manifest_parts
