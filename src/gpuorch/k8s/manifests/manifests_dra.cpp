#include <fmt/format.h>

#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/manifests/manifest_parts.hpp"

namespace gpuorch::k8s::manifest_parts {
namespace {

constexpr const char* kAccount = "gpuorch-dra-driver";
constexpr const char* kRegistryDir = "/var/lib/kubelet/plugins_registry";
constexpr const char* kPluginsDir = "/var/lib/kubelet/plugins";
constexpr const char* kCdiDir = "/var/run/cdi";

// What the driver calls and nothing more: its slices (kept equal to the host), the claims it
// prepares (read only), and its Node (the slice's owner).
Json dra_cluster_role(const ManifestOptions& o) {
  Json role = rbac("ClusterRole", cluster_scoped(kAccount, o), o, false);
  role["rules"] = Json::array({
      rule({"resource.k8s.io"}, {"resourceslices"},
           {"get", "list", "watch", "create", "update", "patch", "delete"}),
      rule({"resource.k8s.io"}, {"resourceclaims"}, {"get"}),
      rule({""}, {"nodes"}, {"get"}),
  });
  return role;
}

// A class per kind of device the driver publishes; a claim names one and may narrow it with its
// own selectors (a product, a memory size) and constraints (one NVLink domain).
Json device_class(const std::string& name, const char* type) {
  Json c;
  c["apiVersion"] = "resource.k8s.io/v1";
  c["kind"] = "DeviceClass";
  c["metadata"]["name"] = name;
  c["metadata"]["labels"] = {{"app.kubernetes.io/part-of", "gpuorch"}};
  const std::string driver = dra::kDriverName;
  c["spec"]["selectors"] = Json::array(
      {{{"cel",
         {{"expression", fmt::format("device.driver == \"{}\" && device.attributes[\"{}\"].type "
                                     "== \"{}\"",
                                     driver, driver, type)}}}}});
  return c;
}

// The driver writes sockets and CDI specs into the host's kubelet and CDI folders, so it runs as
// root. It reads device nodes (which exist, for the CDI spec) through /dev mounted read-only.
// Sharing (docs/dra.md, "Sharing a GPU"): the container toolkit gives it nvidia-smi (`utility`)
// and nvidia-cuda-mps-control with the GPUs (`compute`); SYS_ADMIN, its one capability, lets
// it start a claim's MPS daemon in a mount namespace whose /dev/shm is the claim's folder. The
// MPS folders live under the plugin folder, at the same path on the host, where the claim's CDI
// mounts find them.
Json dra_daemonset(const ManifestOptions& o) {
  Json c;
  c["name"] = "dra-driver";
  c["image"] = o.image;
  c["args"] = Json::array({"dra-driver", "--plugins-registry", kRegistryDir, "--plugin-dir",
                           std::string(kPluginsDir) + "/" + dra::kDriverName, "--cdi-dir", kCdiDir,
                           "--dev-root", "/host-dev"});
  c["env"] = Json::array(
      {{{"name", "NODE_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
       {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
       {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "compute,utility"}}});
  c["securityContext"] = restricted_security();
  c["securityContext"]["runAsUser"] = 0;
  c["securityContext"]["capabilities"]["add"] = Json::array({"SYS_ADMIN"});
  c["resources"] = resources(o, "dra-driver");
  c["volumeMounts"] =
      Json::array({{{"name", "plugins-registry"}, {"mountPath", kRegistryDir}},
                   {{"name", "plugins"}, {"mountPath", kPluginsDir}},
                   {{"name", "cdi"}, {"mountPath", kCdiDir}},
                   {{"name", "dev"}, {"mountPath", "/host-dev"}, {"readOnly", true}}});
  Json spec;
  spec["serviceAccountName"] = kAccount;
  spec["priorityClassName"] = "system-node-critical";
  spec["nodeSelector"] = {{"kubernetes.io/os", "linux"}};
  spec["tolerations"] = gpu_tolerations();
  spec["containers"] = Json::array({c});
  spec["volumes"] = Json::array({host_path_volume("plugins-registry", kRegistryDir, "Directory"),
                                 host_path_volume("plugins", kPluginsDir, "DirectoryOrCreate"),
                                 host_path_volume("cdi", kCdiDir, "DirectoryOrCreate"),
                                 host_path_volume("dev", "/dev", "Directory")});
  return daemonset("gpuorch-dra-driver", o, spec);
}

}  // namespace

void add_dra_manifests(const ManifestOptions& o, std::vector<Manifest>& out) {
  out.push_back({fmt::format("01-serviceaccount-{}.yaml", kAccount), service_account(kAccount, o)});
  out.push_back({"08-clusterrole-dra-driver.yaml", dra_cluster_role(o)});
  out.push_back({"09-clusterrolebinding-dra-driver.yaml",
                 binding_of("ClusterRoleBinding", "ClusterRole", kAccount, kAccount, o, false)});
  out.push_back({"23-deviceclass-gpu.yaml", device_class(dra::kDriverName, "gpu")});
  out.push_back({"23-deviceclass-mig.yaml", device_class("mig.gpuorch.io", "mig")});
  out.push_back({"24-dra-driver.yaml", dra_daemonset(o)});
}

}  // namespace gpuorch::k8s::manifest_parts
