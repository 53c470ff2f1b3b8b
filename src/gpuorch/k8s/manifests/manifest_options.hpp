#pragma once
// What a user may change in `gpuorch manifests` beyond the components: pull secrets and policy,
// where the node agents run (nodeSelector, tolerations), container resources, the RuntimeClass
// and the MIG strategy (docs/manifests.md, "Options"). The parsers take the command-line spelling
// and throw base::InputError with one line naming the flag; check_pod_options validates the whole.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuorch::k8s {

// A pod toleration. op is "Exists" (any value) or "Equal" (exactly value).
struct Toleration {
  std::string key;
  std::string op = "Exists";
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule or NoExecute
};

// One component's container resources, by resource name (cpu, memory, ephemeral-storage); what
// is given replaces that resource's default, the rest keep theirs.
struct ResourceOverride {
  std::map<std::string, std::string> requests;
  std::map<std::string, std::string> limits;
};

// The components whose containers --requests/--limits name.
inline constexpr const char* kManifestComponents[] = {
    "device-plugin", "exporter",   "node-labeller",  "mps-control-daemon",
    "scheduler",     "dra-driver", "admission-check"};

struct PodOptions {
  std::vector<std::string> image_pull_secrets;  // every pod
  std::string image_pull_policy;                // every container; empty: Kubernetes' default
  // Added to each node-side DaemonSet's own selection (GPU vendor label, Linux); a key given
  // here replaces that DaemonSet's value for the key.
  std::vector<std::pair<std::string, std::string>> node_selector;
  std::vector<Toleration> tolerations;  // added to the node-side DaemonSets' GPU tolerations
  std::map<std::string, ResourceOverride> resources;  // by component (kManifestComponents)
  std::string runtime_class;                          // runtimeClassName of the GPU pods
};

// kubectl's taint spelling: "key=value:Effect" (Equal), "key:Effect" (Exists: the key with any
// value, the empty value `kubectl taint node N key:Effect` writes included), "key:Exists:Effect".
Toleration parse_toleration(std::string_view text);
// "key=value", a label as `kubectl label` takes it.
std::pair<std::string, std::string> parse_node_selector(std::string_view text);
// "COMPONENT:cpu=100m,memory=128Mi" into resources[COMPONENT].requests (or .limits); flag is
// "--requests" or "--limits", for the message.
void parse_resources(std::string_view text, std::string_view flag,
                     std::map<std::string, ResourceOverride>& resources);

// Throws base::InputError for a name the API server would refuse (pull secret, RuntimeClass,
// namespace), an unknown pull policy, or a request above its limit once the defaults are merged.
void check_pod_options(const PodOptions& o, const std::string& ns);

// A component's defaults with the overrides merged: {"requests": {...}, "limits": {...}}; the
// caller turns them into the container's resources.
ResourceOverride merged_resources(const PodOptions& o, const std::string& component);
// The defaults, for --help: "device-plugin cpu=10m,memory=64Mi (limits memory=64Mi); ...".
std::string default_resources_text();

}  // namespace gpuorch::k8s
