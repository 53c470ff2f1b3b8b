#include "gpuorch/k8s/manifests/manifests.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/manifests/manifest_parts.hpp"

namespace gpuorch::k8s {
namespace manifest_parts {

constexpr const char* kPluginDir = "/var/lib/kubelet/device-plugins";
constexpr const char* kPodResourcesDir = "/var/lib/kubelet/pod-resources";

Json metadata(const std::string& name, const ManifestOptions& o, bool namespaced) {
  Json m;
  m["name"] = name;
  if (namespaced) m["namespace"] = o.ns;
  m["labels"] = {{"app.kubernetes.io/name", name}, {"app.kubernetes.io/part-of", "gpuorch"}};
  return m;
}

// Nothing a GPU agent needs: no privilege escalation, no capabilities, a read-only root.
Json crd_column(const char* name, const char* type, const char* path) {
  return Json{{"name", name}, {"type", type}, {"jsonPath", path}};
}

Json custom_resource_definition(const std::string& group, Json names, const char* scope,
                                const char* version_name, Json schema, Json columns,
                                const ManifestOptions& o) {
  Json version;
  version["name"] = version_name;
  version["served"] = true;
  version["storage"] = true;
  version["subresources"] = {{"status", Json::object()}};
  version["additionalPrinterColumns"] = std::move(columns);
  version["schema"]["openAPIV3Schema"] = std::move(schema);
  Json crd;
  crd["apiVersion"] = "apiextensions.k8s.io/v1";
  crd["kind"] = "CustomResourceDefinition";
  crd["metadata"] =
      metadata(fmt::format("{}.{}", names["plural"].get<std::string>(), group), o, false);
  crd["spec"]["group"] = group;
  crd["spec"]["names"] = std::move(names);
  crd["spec"]["scope"] = scope;
  crd["spec"]["versions"] = Json::array({version});
  return crd;
}

Json restricted_security() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", Json::array({"ALL"})}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

Json gpu_tolerations() {
  return Json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
                      {{"key", "amd.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
                      {{"key", "CriticalAddonsOnly"}, {"operator", "Exists"}}});
}

Json host_path_volume(const std::string& name, const std::string& path, const char* type) {
  return {{"name", name}, {"hostPath", {{"path", path}, {"type", type}}}};
}

Json daemonset(const std::string& name, const ManifestOptions& o, Json pod_spec,
               Json pod_annotations) {
  Json ds;
  ds["apiVersion"] = "apps/v1";
  ds["kind"] = "DaemonSet";
  ds["metadata"] = metadata(name, o);
  ds["spec"]["selector"]["matchLabels"] = {{"app.kubernetes.io/name", name}};
  ds["spec"]["updateStrategy"] = {{"type", "RollingUpdate"}};
  Json tmpl;
  tmpl["metadata"]["labels"] = {{"app.kubernetes.io/name", name},
                                {"app.kubernetes.io/part-of", "gpuorch"}};
  if (!pod_annotations.is_null()) tmpl["metadata"]["annotations"] = pod_annotations;
  tmpl["spec"] = std::move(pod_spec);
  ds["spec"]["template"] = std::move(tmpl);
  return ds;
}

// The component's defaults with --requests/--limits merged (manifest_options.cpp).
Json resources(const ManifestOptions& o, const std::string& component) {
  const ResourceOverride r = merged_resources(o.pod, component);
  Json j;
  j["requests"] = Json::object();
  for (const auto& [k, v] : r.requests) j["requests"][k] = v;
  if (!r.limits.empty()) {
    j["limits"] = Json::object();
    for (const auto& [k, v] : r.limits) j["limits"][k] = v;
  }
  return j;
}

// NVIDIA's container runtime opens MIG monitoring (every MIG device's information) only to a
// container with CAP_SYS_ADMIN, and refuses to start one that asks without it, so both come
// together and only with a MIG strategy. Configuring MIG (NVIDIA_MIG_CONFIG_DEVICES) is not
// asked for: gpuorch reads the MIG layout, it never changes it.
void see_mig_devices(Json& container, const ManifestOptions& o) {
  if (o.mig_strategy == MigStrategy::kNone) return;
  container["env"].push_back({{"name", "NVIDIA_MIG_MONITOR_DEVICES"}, {"value", "all"}});
  container["securityContext"]["capabilities"]["add"] = Json::array({"SYS_ADMIN"});
}

std::string sharing_config(const ManifestOptions& o, const std::string& vendor) {
  // MIG is NVIDIA's: the AMD plugin's config keeps none.
  std::string c = fmt::format(
      "version: v1\nflags:\n  migStrategy: {}\n  plugin:\n"
      "    deviceListStrategy: envvar\n    deviceIDStrategy: uuid\n",
      vendor == "nvidia" ? to_string(o.mig_strategy) : "none");
  if (o.sharing == SharingKind::kNone) return c;
  const std::string name = vendor == "amd" ? "amd.com/gpu" : "nvidia.com/gpu";
  c += fmt::format("sharing:\n  {}:\n    resources:\n    - name: {}\n      replicas: {}\n",
                   o.sharing == SharingKind::kMps ? "mps" : "timeSlicing", name, o.replicas);
  return c;
}

Json config_map(const ManifestOptions& o, const std::string& vendor) {
  Json cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"] = metadata("gpuorch-device-plugin-" + vendor, o);
  cm["data"]["config.yaml"] = sharing_config(o, vendor);
  return cm;
}

Json plugin_daemonset(const ManifestOptions& o, const std::string& vendor) {
  const std::string name = "gpuorch-device-plugin-" + vendor;
  Json c;
  c["name"] = "device-plugin";
  c["image"] = o.image;
  c["args"] =
      Json::array({"device-plugin", "--vendor", vendor, "--config-file", "/etc/gpuorch/config.yaml",
                   "--device-plugin-path", std::string(kPluginDir) + "/"});
  // Allocate follows the scheduler (docs/device-plugin.md): the plugin finds the pod the kubelet
  // allocates for among the pods bound to its node, and marks it; without the node's name it
  // hands out the kubelet's own device choice instead of the GPUs gpuorch chose.
  Json env = Json::array(
      {{{"name", "NODE_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}}});
  if (vendor == "nvidia") {
    // The NVIDIA container runtime gives the plugin NVML and the device nodes to watch.
    env.push_back({{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}});
    env.push_back({{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}});
  }
  c["env"] = env;
  c["securityContext"] = restricted_security();
  if (vendor == "nvidia") see_mig_devices(c, o);
  c["resources"] = resources(o, "device-plugin");
  c["volumeMounts"] =
      Json::array({{{"name", "device-plugins"}, {"mountPath", kPluginDir}},
                   {{"name", "config"}, {"mountPath", "/etc/gpuorch"}, {"readOnly", true}}});
  Json spec;
  spec["priorityClassName"] = "system-node-critical";
  spec["serviceAccountName"] = "gpuorch-device-plugin";
  // It lists its node's pods and marks the one it allocated for (its ClusterRole).
  spec["automountServiceAccountToken"] = true;
  spec["nodeSelector"] = {{"gpuorch.io/gpu.vendor", vendor}};
  spec["tolerations"] = gpu_tolerations();
  spec["containers"] = Json::array({c});
  spec["volumes"] = Json::array(
      {host_path_volume("device-plugins", kPluginDir, "Directory"),
       {{"name", "config"}, {"configMap", {{"name", "gpuorch-device-plugin-" + vendor}}}}});
  return daemonset(name, o, spec);
}

// MPS clients need the node's MPS control daemon; its pipe and log directories are the ones the
// plugin's Allocate mounts into every MPS container.
Json mps_daemonset(const ManifestOptions& o) {
  const std::string base = std::string(kPluginDir) + "/mps";
  Json c;
  c["name"] = "mps-control-daemon";
  c["image"] = o.mps_image;
  c["command"] = Json::array({"nvidia-cuda-mps-control", "-f"});
  c["env"] =
      Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                   {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "compute,utility"}},
                   {{"name", "CUDA_MPS_PIPE_DIRECTORY"}, {"value", "/mps/nvidia.com/gpu/pipe"}},
                   {{"name", "CUDA_MPS_LOG_DIRECTORY"}, {"value", "/mps/nvidia.com/gpu/log"}},
                   {{"name", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"},
                    {"value", std::to_string(100 / o.replicas)}}});
  c["securityContext"] = restricted_security();
  c["resources"] = resources(o, "mps-control-daemon");
  c["volumeMounts"] = Json::array(
      {{{"name", "mps"}, {"mountPath", "/mps"}}, {{"name", "shm"}, {"mountPath", "/dev/shm"}}});
  Json spec;
  spec["priorityClassName"] = "system-node-critical";
  spec["automountServiceAccountToken"] = false;
  spec["hostIPC"] = true;  // MPS clients and server talk through shared memory
  spec["nodeSelector"] = {{"gpuorch.io/gpu.vendor", "nvidia"}};
  spec["tolerations"] = gpu_tolerations();
  spec["containers"] = Json::array({c});
  spec["volumes"] = Json::array({host_path_volume("mps", base, "DirectoryOrCreate"),
                                 host_path_volume("shm", base + "/shm", "DirectoryOrCreate")});
  return daemonset("gpuorch-mps-control-daemon", o, spec);
}

Json exporter_daemonset(const ManifestOptions& o) {
  Json c;
  c["name"] = "exporter";
  c["image"] = o.image;
  // -k: pod, namespace and container labels from the kubelet's pod-resources socket, as
  // dcgm-exporter's DaemonSet does (docs/telemetry.md); read-only, and the exporter keeps serving
  // without the labels if the socket cannot be reached.
  c["args"] = Json::array(
      {"exporter", "--listen", fmt::format("0.0.0.0:{}", o.exporter_port), "--kubernetes"});
  c["volumeMounts"] = Json::array(
      {{{"name", "pod-resources"}, {"mountPath", kPodResourcesDir}, {"readOnly", true}}});
  c["env"] = Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                          {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}}});
  c["ports"] = Json::array({{{"name", "metrics"}, {"containerPort", o.exporter_port}}});
  c["readinessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}}};
  c["securityContext"] = restricted_security();
  c["resources"] = resources(o, "exporter");
  Json spec;
  spec["priorityClassName"] = "system-node-critical";
  spec["serviceAccountName"] = "gpuorch-exporter";
  spec["automountServiceAccountToken"] = false;
  // Any node the labeller found a GPU on: gpu.vendor is set there.
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"] = Json::array(
          {{{"matchExpressions",
             Json::array({{{"key", "gpuorch.io/gpu.vendor"}, {"operator", "Exists"}}})}}});
  spec["tolerations"] = gpu_tolerations();
  spec["containers"] = Json::array({c});
  spec["volumes"] =
      Json::array({host_path_volume("pod-resources", kPodResourcesDir, "DirectoryOrCreate")});
  const Json scrape = {{"prometheus.io/scrape", "true"},
                       {"prometheus.io/port", std::to_string(o.exporter_port)},
                       {"prometheus.io/path", "/metrics"}};
  return daemonset("gpuorch-exporter", o, spec, scrape);
}

Json exporter_service(const ManifestOptions& o) {
  Json s;
  s["apiVersion"] = "v1";
  s["kind"] = "Service";
  s["metadata"] = metadata("gpuorch-exporter", o);
  s["metadata"]["annotations"] = {{"prometheus.io/scrape", "true"},
                                  {"prometheus.io/port", std::to_string(o.exporter_port)},
                                  {"prometheus.io/path", "/metrics"}};
  s["spec"]["selector"] = {{"app.kubernetes.io/name", "gpuorch-exporter"}};
  s["spec"]["ports"] = Json::array({{{"name", "metrics"},
                                     {"port", o.exporter_port},
                                     {"targetPort", "metrics"},
                                     {"protocol", "TCP"}}});
  return s;
}

// `gpuorch node-labeller` keeps the node's labels true: it re-reads the hardware every interval
// and the device plugin's ConfigMap (mounted here) whenever it changes. Needs nothing but get +
// patch on nodes.
Json labeller_daemonset(const ManifestOptions& o) {
  const std::string plugin_config =
      "gpuorch-device-plugin-" + (o.vendor == "amd" ? o.vendor : "nvidia");
  Json c;
  c["name"] = "node-labeller";
  c["image"] = o.image;
  c["args"] = Json::array(
      {"node-labeller", "--interval", "60", "--config-file", "/etc/gpuorch/config.yaml"});
  c["env"] = Json::array(
      {{{"name", "NODE_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
       {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
       {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}}});
  c["securityContext"] = restricted_security();
  // The MIG strategy comes with the plugin's ConfigMap; seeing the MIG devices takes more.
  see_mig_devices(c, o);
  c["resources"] = resources(o, "node-labeller");
  c["volumeMounts"] =
      Json::array({{{"name", "config"}, {"mountPath", "/etc/gpuorch"}, {"readOnly", true}}});
  Json spec;
  spec["serviceAccountName"] = "gpuorch-node-labeller";
  spec["nodeSelector"] = {{"kubernetes.io/os", "linux"}};
  spec["tolerations"] = gpu_tolerations();
  spec["containers"] = Json::array({c});
  spec["volumes"] = Json::array({{{"name", "config"}, {"configMap", {{"name", plugin_config}}}}});
  return daemonset("gpuorch-node-labeller", o, spec);
}

Json service_account(const std::string& name, const ManifestOptions& o) {
  Json sa;
  sa["apiVersion"] = "v1";
  sa["kind"] = "ServiceAccount";
  sa["metadata"] = metadata(name, o);
  return sa;
}

Json rule(std::initializer_list<const char*> groups, std::initializer_list<const char*> resources,
          std::initializer_list<const char*> verbs) {
  Json r;
  r["apiGroups"] = Json::array();
  for (const char* g : groups) r["apiGroups"].push_back(g);
  r["resources"] = Json::array();
  for (const char* x : resources) r["resources"].push_back(x);
  r["verbs"] = Json::array();
  for (const char* v : verbs) r["verbs"].push_back(v);
  return r;
}

// ClusterRoles and their bindings have no namespace: a second install in another --namespace must
// not take over (or, when removed, delete) the first one's, so outside the default namespace
// their names carry it.
std::string cluster_scoped(const std::string& name, const ManifestOptions& o) {
  return o.ns == ManifestOptions{}.ns ? name : name + "-" + o.ns;
}

Json rbac(const char* kind, const std::string& name, const ManifestOptions& o, bool namespaced) {
  Json j;
  j["apiVersion"] = "rbac.authorization.k8s.io/v1";
  j["kind"] = kind;
  j["metadata"] = metadata(name, o, namespaced);
  return j;
}

Json binding_of(const char* kind, const char* role_kind, const std::string& name,
                const std::string& account, const ManifestOptions& o, bool namespaced) {
  const std::string object = namespaced ? name : cluster_scoped(name, o);
  Json b = rbac(kind, object, o, namespaced);
  b["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", object}};
  b["subjects"] =
      Json::array({{{"kind", "ServiceAccount"}, {"name", account}, {"namespace", o.ns}}});
  return b;
}

// What `gpuorch scheduler` calls and nothing more (docs/manifests.md says which call needs which).
Json scheduler_cluster_role(const ManifestOptions& o) {
  Json role = rbac("ClusterRole", cluster_scoped("gpuorch-scheduler", o), o, false);
  role["rules"] = Json::array({
      rule({""}, {"nodes"}, {"get", "list", "watch"}),
      rule({""}, {"pods"}, {"get", "list", "watch"}),
      rule({""}, {"pods/binding"}, {"create"}),
      rule({""}, {"pods/status"}, {"patch", "update"}),
      rule({""}, {"pods/eviction"}, {"create"}),
      rule({""}, {"events"}, {"create", "patch"}),
      rule({"events.k8s.io"}, {"events"}, {"create", "patch"}),
      rule({"scheduling.x-k8s.io"}, {"podgroups", "podgroups/status"},
           {"get", "list", "watch", "update", "patch"}),
      // The upstream gang API (scheduling.k8s.io/v1beta1, v1.37 with GenericWorkload): read only.
      rule({"scheduling.k8s.io"}, {"podgroups"}, {"get", "list", "watch"}),
      rule({"scheduling.run.ai"}, {"queues"}, {"get", "list", "watch"}),
      rule({"scheduling.run.ai"}, {"queues/status"}, {"patch", "update"}),
      // DRA: the devices published, the classes, and the claims it allocates and releases.
      rule({"resource.k8s.io"}, {"resourceslices", "deviceclasses"}, {"get", "list", "watch"}),
      rule({"resource.k8s.io"}, {"resourceclaims"}, {"get", "list", "watch"}),
      rule({"resource.k8s.io"}, {"resourceclaims/status"}, {"update", "patch"}),
  });
  return role;
}

// Leader election: one Lease in the controller's own namespace.
Json lease_role(const std::string& name, const ManifestOptions& o) {
  Json role = rbac("Role", name + "-leader-election", o, true);
  role["rules"] =
      Json::array({rule({"coordination.k8s.io"}, {"leases"}, {"get", "create", "update"})});
  return role;
}

Json controller_deployment(const std::string& name, const std::string& component,
                           const std::vector<std::string>& args, int port,
                           const ManifestOptions& o) {
  Json c;
  c["name"] = component;
  c["image"] = o.image;
  c["args"] = Json::array({component, "--listen", fmt::format("0.0.0.0:{}", port)});
  for (const auto& a : args) c["args"].push_back(a);
  c["args"].push_back("--leader-elect");
  c["ports"] = Json::array({{{"name", "http"}, {"containerPort", port}}});
  c["livenessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", port}}},
                        {"initialDelaySeconds", 10},
                        {"periodSeconds", 10},
                        {"failureThreshold", 3}};
  c["readinessProbe"] = {{"httpGet", {{"path", "/readyz"}, {"port", port}}},
                         {"periodSeconds", 5},
                         {"failureThreshold", 3}};
  Json sc = restricted_security();
  // A numeric user, so the kubelet can check runAsNonRoot whatever the image's USER says.
  sc["runAsNonRoot"] = true;
  sc["runAsUser"] = 65532;
  sc["runAsGroup"] = 65532;
  c["securityContext"] = sc;
  // The informer caches hold every node and every unfinished pod: memory grows with the cluster.
  c["resources"] = resources(o, component);
  Json spec;
  spec["serviceAccountName"] = name;
  spec["automountServiceAccountToken"] = true;
  spec["priorityClassName"] = "system-cluster-critical";
  spec["nodeSelector"] = {{"kubernetes.io/os", "linux"}};
  // The standby on another node than the leader, so one node's loss does not stop the work.
  spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
      Json::array({{{"weight", 100},
                    {"podAffinityTerm",
                     {{"labelSelector", {{"matchLabels", {{"app.kubernetes.io/name", name}}}}},
                      {"topologyKey", "kubernetes.io/hostname"}}}}});
  spec["containers"] = Json::array({c});
  Json d;
  d["apiVersion"] = "apps/v1";
  d["kind"] = "Deployment";
  d["metadata"] = metadata(name, o);
  d["spec"]["replicas"] = 2;  // one leads, the other waits on the Lease
  d["spec"]["selector"]["matchLabels"] = {{"app.kubernetes.io/name", name}};
  Json tmpl;
  tmpl["metadata"]["labels"] = {{"app.kubernetes.io/name", name},
                                {"app.kubernetes.io/part-of", "gpuorch"}};
  tmpl["metadata"]["annotations"] = {{"prometheus.io/scrape", "true"},
                                     {"prometheus.io/port", std::to_string(port)},
                                     {"prometheus.io/path", "/metrics"}};
  tmpl["spec"] = std::move(spec);
  d["spec"]["template"] = std::move(tmpl);
  return d;
}

Json int32_field(const char* description) {
  return {{"type", "integer"}, {"format", "int32"}, {"minimum", 0}, {"description", description}};
}

// podgroups.scheduling.x-k8s.io v1alpha1 with the field names of scheduler-plugins' coscheduling
// API, so PodGroups written for it (and its controller) keep working; `scheduled` and
// `conditions` are additions its schema lacks. Only fields are typed; unknown ones are pruned.
Json podgroup_crd(const ManifestOptions& o) {
  Json spec_props;
  spec_props["minMember"] =
      int32_field("Pods that must be schedulable together before any of them is bound.");
  spec_props["minResources"] = {
      {"type", "object"},
      {"description", "Resources the group needs in total before any pod is bound."},
      {"additionalProperties",
       {{"anyOf", Json::array({{{"type", "integer"}}, {{"type", "string"}}})},
        {"pattern",
         R"(^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))?$)"},
        {"x-kubernetes-int-or-string", true}}}};
  spec_props["scheduleTimeoutSeconds"] =
      int32_field("How long members may wait for the rest of the group before all are rejected.");
  Json condition;
  condition["type"] = "object";
  condition["required"] = Json::array({"type", "status"});
  condition["properties"] = {
      {"type", {{"type", "string"}, {"maxLength", 316}}},
      {"status", {{"type", "string"}, {"enum", Json::array({"True", "False", "Unknown"})}}},
      {"reason", {{"type", "string"}, {"maxLength", 1024}}},
      {"message", {{"type", "string"}, {"maxLength", 32768}}},
      {"lastTransitionTime", {{"type", "string"}, {"format", "date-time"}}},
      {"observedGeneration", {{"type", "integer"}, {"format", "int64"}, {"minimum", 0}}}};
  Json status_props;
  status_props["phase"] = {
      {"type", "string"},
      {"description", "Current phase of the group."},
      // scheduler-plugins' phases, Unknown included so its controller's writes stay valid.
      {"enum", Json::array({"Pending", "PreScheduling", "Scheduling", "Scheduled", "Running",
                            "Finished", "Failed", "Unknown"})}};
  status_props["occupiedBy"] = {
      {"type", "string"},
      {"description", "UID of the workload (Deployment, Job, ...) whose pods use the group."}};
  status_props["scheduled"] = int32_field("Members bound to a node.");
  status_props["running"] = int32_field("Members running.");
  status_props["succeeded"] = int32_field("Members that reached phase Succeeded.");
  status_props["failed"] = int32_field("Members that reached phase Failed.");
  status_props["scheduleStartTime"] = {{"type", "string"},
                                       {"format", "date-time"},
                                       {"description", "When scheduling of the group began."}};
  status_props["conditions"] = {{"type", "array"},
                                {"items", condition},
                                {"x-kubernetes-list-type", "map"},
                                {"x-kubernetes-list-map-keys", Json::array({"type"})}};
  Json schema;
  schema["type"] = "object";
  schema["description"] = "A group of pods scheduled all or nothing (gang scheduling).";
  schema["properties"] = {{"apiVersion", {{"type", "string"}}},
                          {"kind", {{"type", "string"}}},
                          {"metadata", {{"type", "object"}}},
                          {"spec", {{"type", "object"}, {"properties", spec_props}}},
                          {"status", {{"type", "object"}, {"properties", status_props}}}};
  Json names = {{"kind", "PodGroup"},
                {"listKind", "PodGroupList"},
                {"plural", "podgroups"},
                {"singular", "podgroup"},
                {"shortNames", Json::array({"pg", "pgs"})}};
  return custom_resource_definition(
      "scheduling.x-k8s.io", std::move(names), "Namespaced", "v1alpha1", std::move(schema),
      Json::array({crd_column("Phase", "string", ".status.phase"),
                   crd_column("MinMember", "integer", ".spec.minMember"),
                   crd_column("Scheduled", "integer", ".status.scheduled"),
                   crd_column("Running", "integer", ".status.running"),
                   crd_column("Age", "date", ".metadata.creationTimestamp")}),
      o);
}

// NVIDIA's runtime acts on containers that set NVIDIA_VISIBLE_DEVICES; those get the RuntimeClass.
bool uses_nvidia_runtime(const Json& pod_spec) {
  for (const char* list : {"initContainers", "containers"}) {
    for (const auto& c : pod_spec.value(list, Json::array())) {
      for (const auto& e : c.value("env", Json::array())) {
        if (e.value("name", "") == "NVIDIA_VISIBLE_DEVICES") return true;
      }
    }
  }
  return false;
}

// The user's pod options on every workload once the components are made: pull secrets and
// policy everywhere; placement and the RuntimeClass on the node agents (the DaemonSets) only,
// since the scheduler runs wherever the default scheduler puts it.
void apply_pod_options(Json& obj, const ManifestOptions& o) {
  const std::string kind = obj["kind"];
  if (kind != "DaemonSet" && kind != "Deployment") return;
  Json& spec = obj["spec"]["template"]["spec"];
  const PodOptions& p = o.pod;
  if (!p.image_pull_secrets.empty()) {
    spec["imagePullSecrets"] = Json::array();
    for (const auto& s : p.image_pull_secrets) spec["imagePullSecrets"].push_back({{"name", s}});
  }
  if (!p.image_pull_policy.empty()) {
    for (const char* list : {"initContainers", "containers"}) {
      if (!spec.contains(list)) continue;
      for (auto& c : spec[list]) c["imagePullPolicy"] = p.image_pull_policy;
    }
  }
  if (kind != "DaemonSet") return;
  if (!p.runtime_class.empty() && uses_nvidia_runtime(spec)) {
    spec["runtimeClassName"] = p.runtime_class;
  }
  for (const auto& [k, v] : p.node_selector) spec["nodeSelector"][k] = v;
  for (const auto& t : p.tolerations) {
    Json j = {{"key", t.key}, {"operator", t.op}};
    if (t.op == "Equal") j["value"] = t.value;
    j["effect"] = t.effect;
    spec["tolerations"].push_back(j);
  }
}

bool reads_as_other_type(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789.-+eE_xXoOabcdefABCDEF") == std::string::npos) {
    return true;  // numbers in any YAML 1.1/1.2 spelling (hex included); quoting is harmless
  }
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}) {
    if (lower == w) return true;
  }
  return false;
}

void emit(YAML::Emitter& out, const Json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      emit(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& v : j) emit(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s.find('\n') != std::string::npos) {
      out << YAML::Literal << s;
    } else {
      // A string YAML would read back as something else ("true", "9400", "") must be quoted.
      if (!reads_as_other_type(s)) {
        out << s;
      } else {
        out << YAML::DoubleQuoted << s;
      }
    }
  } else if (j.is_boolean()) {
    out << (j.get<bool>() ? "true" : "false");
  } else if (j.is_number_integer()) {
    out << j.get<long long>();
  } else if (j.is_number()) {
    out << j.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace manifest_parts

using namespace manifest_parts;

std::string to_yaml(const Json& object) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, object);
  return std::string(out.c_str()) + "\n";
}

std::vector<Manifest> make_manifests(const ManifestOptions& o) {
  if (o.vendor != "nvidia" && o.vendor != "amd" && o.vendor != "both") {
    base::fail_input(fmt::format("--vendor {}: use nvidia, amd or both", o.vendor));
  }
  if (o.sharing != SharingKind::kNone && o.replicas < 2) {
    base::fail_input(fmt::format("--replicas {}: sharing needs at least 2", o.replicas));
  }
  if (o.sharing == SharingKind::kMps && o.vendor == "amd") {
    base::fail_input("--sharing mps: MPS is NVIDIA's; AMD GPUs can use time-slicing");
  }
  if (o.mig_strategy != MigStrategy::kNone && o.vendor == "amd") {
    base::fail_input(fmt::format("--mig-strategy {}: MIG is NVIDIA's; use --vendor nvidia or both",
                                 to_string(o.mig_strategy)));
  }
  if (o.dra && o.sharing != SharingKind::kNone) {
    base::fail_input(
        fmt::format("--sharing {} with --dra: with DRA a claim asks for sharing itself (a "
                    "GpuConfig in its config, docs/dra.md); leave --sharing out",
                    o.sharing == SharingKind::kMps ? "mps" : "time-slicing"));
  }
  check_pod_options(o.pod, o.ns);
  std::vector<Manifest> out;
  Json ns;
  ns["apiVersion"] = "v1";
  ns["kind"] = "Namespace";
  ns["metadata"] = metadata(o.ns, o, false);
  out.push_back({"00-namespace.yaml", ns});
  if (o.scheduler && o.podgroup_crd) out.push_back({"00-podgroup-crd.yaml", podgroup_crd(o)});
  if (o.scheduler && o.queue_crd) out.push_back({"00-queue-crd.yaml", queue_crd(o)});
  std::vector<std::string> accounts = {"gpuorch-device-plugin", "gpuorch-exporter",
                                       "gpuorch-node-labeller"};
  if (o.scheduler) accounts.emplace_back("gpuorch-scheduler");
  for (const auto& sa : accounts) {
    out.push_back({fmt::format("01-serviceaccount-{}.yaml", sa), service_account(sa, o)});
  }
  Json role = rbac("ClusterRole", cluster_scoped("gpuorch-node-labeller", o), o, false);
  role["rules"] = Json::array({rule({""}, {"nodes"}, {"get", "patch"})});
  out.push_back({"02-clusterrole-node-labeller.yaml", role});
  out.push_back({"03-clusterrolebinding-node-labeller.yaml",
                 binding_of("ClusterRoleBinding", "ClusterRole", "gpuorch-node-labeller",
                            "gpuorch-node-labeller", o, false)});
  if (!o.dra) {
    // Allocate follows the scheduler: list the pods bound to the node (a field selector on
    // spec.nodeName) and mark the one allocated for (gpuorch.io/gpus-allocated, a merge patch).
    Json plugin_role = rbac("ClusterRole", cluster_scoped("gpuorch-device-plugin", o), o, false);
    plugin_role["rules"] = Json::array({rule({""}, {"pods"}, {"list", "patch"})});
    out.push_back({"02-clusterrole-device-plugin.yaml", plugin_role});
    out.push_back({"03-clusterrolebinding-device-plugin.yaml",
                   binding_of("ClusterRoleBinding", "ClusterRole", "gpuorch-device-plugin",
                              "gpuorch-device-plugin", o, false)});
  }
  if (o.scheduler) {
    out.push_back({"04-clusterrole-scheduler.yaml", scheduler_cluster_role(o)});
    out.push_back({"05-clusterrolebinding-scheduler.yaml",
                   binding_of("ClusterRoleBinding", "ClusterRole", "gpuorch-scheduler",
                              "gpuorch-scheduler", o, false)});
    out.push_back({"06-role-scheduler-leader-election.yaml", lease_role("gpuorch-scheduler", o)});
    out.push_back({"07-rolebinding-scheduler-leader-election.yaml",
                   binding_of("RoleBinding", "Role", "gpuorch-scheduler-leader-election",
                              "gpuorch-scheduler", o, true)});
    // What `gpuorch launch` needs to publish a job's measured throughput on its own pod
    // (gpuorch.io/throughput, which the scheduler's --queues sizing reads): bound to nobody
    // here; a team binds it to its training pods' service account with a RoleBinding in its
    // own namespace (docs/launch.md).
    Json launch_role = rbac("ClusterRole", cluster_scoped("gpuorch-launch", o), o, false);
    launch_role["rules"] = Json::array({rule({""}, {"pods"}, {"patch"})});
    out.push_back({"08-clusterrole-launch.yaml", launch_role});
  }
  out.push_back({"10-node-labeller.yaml", labeller_daemonset(o)});
  std::vector<std::string> vendors;
  if (o.vendor == "both") {
    vendors = {"nvidia", "amd"};
  } else {
    vendors = {o.vendor};
  }
  for (const auto& v : vendors) {
    out.push_back({fmt::format("20-configmap-device-plugin-{}.yaml", v), config_map(o, v)});
    if (!o.dra) out.push_back({fmt::format("21-device-plugin-{}.yaml", v), plugin_daemonset(o, v)});
  }
  if (o.sharing == SharingKind::kMps)
    out.push_back({"22-mps-control-daemon.yaml", mps_daemonset(o)});
  if (o.dra) add_dra_manifests(o, out);
  out.push_back({"30-exporter.yaml", exporter_daemonset(o)});
  out.push_back({"31-exporter-service.yaml", exporter_service(o)});
  if (o.scheduler) {
    out.push_back(
        {"40-scheduler.yaml", controller_deployment("gpuorch-scheduler", "scheduler",
                                                    {"--policy", "efd"}, kSchedulerPort, o)});
  }
  if (o.kueue) add_kueue_manifests(o, out);
  for (auto& m : out) apply_pod_options(m.object, o);
  return out;
}

}  // namespace gpuorch::k8s
