// `gpuorch manifests` options (k8s/manifests/manifest_options.hpp): the spellings each flag takes,
// the one-line refusals, and where each option lands in the objects. manifests_dry_run_test.cpp
// sends their combinations to a real API server.
#include "gpuorch/k8s/manifests/manifest_options.hpp"

#include <gtest/gtest.h>

#include "gpuorch/k8s/manifests/manifests.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using Json = nlohmann::ordered_json;

TEST(ManifestOptions, TolerationsInKubectlTaintSpelling) {
  Toleration t = parse_toleration("dedicated=gpu:NoSchedule");
  EXPECT_EQ(t.key, "dedicated");
  EXPECT_EQ(t.op, "Equal");
  EXPECT_EQ(t.value, "gpu");
  EXPECT_EQ(t.effect, "NoSchedule");
  t = parse_toleration("example.com/maintenance:NoExecute");
  EXPECT_EQ(t.key, "example.com/maintenance");
  EXPECT_EQ(t.op, "Exists");
  EXPECT_EQ(t.value, "");
  EXPECT_EQ(t.effect, "NoExecute");
  t = parse_toleration("spot:Exists:PreferNoSchedule");
  EXPECT_EQ(t.key, "spot");
  EXPECT_EQ(t.op, "Exists");
  EXPECT_EQ(t.effect, "PreferNoSchedule");
  t = parse_toleration("empty=:NoSchedule");  // the empty value, exactly
  EXPECT_EQ(t.op, "Equal");
  EXPECT_EQ(t.value, "");

  EXPECT_EQ(test::input_error([] { parse_toleration("dedicated=gpu:NoScheduled"); }),
            "--toleration 'dedicated=gpu:NoScheduled': the effect must be NoSchedule, "
            "PreferNoSchedule or NoExecute");
  EXPECT_EQ(test::input_error([] { parse_toleration("dedicated"); }),
            "--toleration 'dedicated': use KEY=VALUE:EFFECT, KEY:EFFECT or KEY:Exists:EFFECT");
  EXPECT_EQ(test::input_error([] { parse_toleration("a=b:Exists:NoSchedule"); }),
            "--toleration 'a=b:Exists:NoSchedule': Exists takes no value");
  EXPECT_EQ(test::input_error([] { parse_toleration("a:Equal:NoSchedule"); }),
            "--toleration 'a:Equal:NoSchedule': use KEY=VALUE:EFFECT, KEY:EFFECT or "
            "KEY:Exists:EFFECT");
  EXPECT_EQ(test::input_error([] { parse_toleration("bad key:NoSchedule"); }),
            "--toleration 'bad key:NoSchedule': 'bad key' is not a valid key ([prefix/]name, as "
            "a label key)");
  EXPECT_FALSE(test::input_error([] { parse_toleration(":NoSchedule"); }).empty());
  EXPECT_FALSE(test::input_error([] { parse_toleration("k=v w:NoSchedule"); }).empty());
  EXPECT_FALSE(test::input_error([] { parse_toleration("Bad_Prefix/k:NoSchedule"); }).empty());
}

TEST(ManifestOptions, NodeSelectorsAndResources) {
  EXPECT_EQ(parse_node_selector("example.com/tier=training"),
            (std::pair<std::string, std::string>{"example.com/tier", "training"}));
  EXPECT_EQ(parse_node_selector("gpu="), (std::pair<std::string, std::string>{"gpu", ""}));
  EXPECT_EQ(test::input_error([] { parse_node_selector("pool"); }),
            "--node-selector 'pool': use KEY=VALUE");
  EXPECT_EQ(test::input_error([] { parse_node_selector("pool=a b"); }),
            "--node-selector 'pool=a b': 'a b' is not a valid label value");

  std::map<std::string, ResourceOverride> r;
  parse_resources("exporter:cpu=0.1,memory=256Mi", "--requests", r);
  parse_resources("exporter:memory=512Mi", "--limits", r);
  EXPECT_EQ(r["exporter"].requests.at("cpu"), "0.1");
  EXPECT_EQ(r["exporter"].requests.at("memory"), "256Mi");
  EXPECT_EQ(r["exporter"].limits.at("memory"), "512Mi");
  EXPECT_EQ(test::input_error([&] { parse_resources("gpu:cpu=1", "--requests", r); }),
            "--requests 'gpu:cpu=1': no component 'gpu' (device-plugin, exporter, "
            "node-labeller, mps-control-daemon, scheduler, dra-driver, admission-check)");
  EXPECT_EQ(test::input_error([&] { parse_resources("exporter:cpu=lots", "--limits", r); }),
            "--limits 'exporter:cpu=lots': cpu 'lots' is not a Kubernetes quantity (100m, 0.5, "
            "128Mi, 1Gi)");
  EXPECT_EQ(test::input_error([&] { parse_resources("exporter:gpu=1", "--requests", r); }),
            "--requests 'exporter:gpu=1': 'gpu': the resource must be cpu, memory or "
            "ephemeral-storage");
  EXPECT_FALSE(test::input_error([&] { parse_resources("exporter", "--requests", r); }).empty());
  EXPECT_FALSE(test::input_error([&] { parse_resources("exporter:", "--requests", r); }).empty());
  EXPECT_FALSE(
      test::input_error([&] { parse_resources("exporter:cpu=-1", "--requests", r); }).empty());

  // A request above its limit, the default limit included, is refused with what to set.
  PodOptions o;
  o.resources["exporter"].requests["memory"] = "256Mi";
  EXPECT_EQ(test::input_error([&] { check_pod_options(o, "gpuorch"); }),
            "exporter: the memory request 256Mi is above its limit 128Mi (set both: --requests "
            "exporter:memory=... --limits exporter:memory=...)");
  o.resources["exporter"].limits["memory"] = "0.25Gi";
  EXPECT_NO_THROW(check_pod_options(o, "gpuorch"));
}

TEST(ManifestOptions, NamesThePodsReferToAreChecked) {
  PodOptions o;
  EXPECT_EQ(test::input_error([&] { check_pod_options(o, "GPU_system"); }),
            "--namespace 'GPU_system': not a valid namespace (lower-case letters, digits and "
            "'-', at most 63)");
  o.image_pull_secrets = {"regcred", "Bad_Secret"};
  EXPECT_EQ(test::input_error([&] { check_pod_options(o, "gpuorch"); }),
            "--image-pull-secret 'Bad_Secret': not a valid Secret name");
  o.image_pull_secrets = {"regcred"};
  o.image_pull_policy = "Sometimes";
  EXPECT_EQ(test::input_error([&] { check_pod_options(o, "gpuorch"); }),
            "--image-pull-policy 'Sometimes': use Always, IfNotPresent or Never");
  o.image_pull_policy = "Never";
  o.runtime_class = "nvidia runtime";
  EXPECT_EQ(test::input_error([&] { check_pod_options(o, "gpuorch"); }),
            "--runtime-class 'nvidia runtime': not a valid RuntimeClass name");
}

const Json* find(const std::vector<Manifest>& ms, const std::string& kind,
                 const std::string& name) {
  for (const auto& m : ms) {
    if (m.object["kind"] == kind && m.object["metadata"]["name"] == name) return &m.object;
  }
  return nullptr;
}

const Json& pod_spec(const std::vector<Manifest>& ms, const std::string& kind,
                     const std::string& name) {
  const Json* o = find(ms, kind, name);
  if (o == nullptr) throw std::runtime_error(kind + " " + name + " missing");
  return (*o)["spec"]["template"]["spec"];
}

TEST(ManifestOptions, WhereEachOptionLands) {
  ManifestOptions o;
  o.vendor = "both";
  o.sharing = SharingKind::kMps;
  o.ns = "gpu-system";
  o.pod.image_pull_secrets = {"regcred", "mirror"};
  o.pod.image_pull_policy = "Always";
  o.pod.node_selector = {{"pool", "gpu"}};
  o.pod.tolerations = {parse_toleration("dedicated=gpu:NoSchedule")};
  o.pod.runtime_class = "nvidia";
  parse_resources("device-plugin:cpu=20m,memory=96Mi", "--requests", o.pod.resources);
  parse_resources("device-plugin:memory=128Mi", "--limits", o.pod.resources);
  const auto ms = make_manifests(o);

  std::size_t workloads = 0;
  for (const auto& m : ms) {
    // --namespace: on every namespaced object, and every account a binding names.
    const std::string kind = m.object["kind"];
    const bool cluster_wide = kind == "Namespace" || kind == "ClusterRole" ||
                              kind == "ClusterRoleBinding" || kind == "CustomResourceDefinition";
    EXPECT_EQ(m.object["metadata"].contains("namespace"), !cluster_wide) << m.file;
    if (!cluster_wide) {
      EXPECT_EQ(m.object["metadata"]["namespace"], "gpu-system") << m.file;
    }
    for (const auto& s : m.object.value("subjects", Json::array())) {
      EXPECT_EQ(s["namespace"], "gpu-system") << m.file;
    }
    if (kind != "DaemonSet" && kind != "Deployment") continue;
    ++workloads;
    const Json& spec = m.object["spec"]["template"]["spec"];
    EXPECT_EQ(spec["imagePullSecrets"], Json::parse(R"([{"name": "regcred"}, {"name": "mirror"}])"))
        << m.file;
    for (const char* list : {"initContainers", "containers"}) {
      for (const auto& c : spec.value(list, Json::array())) {
        EXPECT_EQ(c["imagePullPolicy"], "Always") << m.file;
      }
    }
    const bool agent = kind == "DaemonSet";
    // Placement only for the node agents; the default GPU-node selection is kept.
    EXPECT_EQ(spec.contains("nodeSelector") && spec["nodeSelector"].contains("pool"), agent)
        << m.file;
    const Json last =
        spec.value("tolerations", Json::array()).empty() ? Json() : spec["tolerations"].back();
    EXPECT_EQ(last == Json::parse(R"({"key": "dedicated", "operator": "Equal", "value": "gpu",
                                      "effect": "NoSchedule"})"),
              agent)
        << m.file;
  }
  EXPECT_EQ(workloads, 6u);  // labeller, 2 plugins, MPS, exporter, scheduler
  EXPECT_EQ(pod_spec(ms, "DaemonSet", "gpuorch-device-plugin-nvidia")["nodeSelector"],
            Json::parse(R"({"gpuorch.io/gpu.vendor": "nvidia", "pool": "gpu"})"));
  EXPECT_EQ(pod_spec(ms, "DaemonSet", "gpuorch-node-labeller")["nodeSelector"],
            Json::parse(R"({"kubernetes.io/os": "linux", "pool": "gpu"})"));
  // The RuntimeClass on the pods NVIDIA's runtime serves: not the AMD plugin, not the scheduler.
  for (const char* ds : {"gpuorch-device-plugin-nvidia", "gpuorch-mps-control-daemon",
                         "gpuorch-exporter", "gpuorch-node-labeller"}) {
    EXPECT_EQ(pod_spec(ms, "DaemonSet", ds)["runtimeClassName"], "nvidia") << ds;
  }
  EXPECT_FALSE(pod_spec(ms, "DaemonSet", "gpuorch-device-plugin-amd").contains("runtimeClassName"));
  EXPECT_FALSE(pod_spec(ms, "Deployment", "gpuorch-scheduler").contains("runtimeClassName"));
  // Resources: what was given replaced, the rest kept.
  EXPECT_EQ(pod_spec(ms, "DaemonSet", "gpuorch-device-plugin-amd")["containers"][0]["resources"],
            Json::parse(R"({"requests": {"cpu": "20m", "memory": "96Mi"},
                            "limits": {"memory": "128Mi"}})"));
  EXPECT_EQ(pod_spec(ms, "DaemonSet", "gpuorch-exporter")["containers"][0]["resources"],
            Json::parse(R"({"requests": {"cpu": "50m", "memory": "128Mi"},
                            "limits": {"memory": "128Mi"}})"));
  EXPECT_EQ(pod_spec(ms, "Deployment", "gpuorch-scheduler")["containers"][0]["resources"],
            Json::parse(R"({"requests": {"cpu": "100m", "memory": "256Mi"},
                            "limits": {"memory": "1Gi"}})"));
}

// Every environment variable of a container, by name.
std::map<std::string, std::string> env_of(const Json& c) {
  std::map<std::string, std::string> out;
  for (const auto& e : c.value("env", Json::array())) out[e["name"]] = e.value("value", "");
  return out;
}

TEST(ManifestOptions, MigStrategyReachesThePluginAndTheLabeller) {
  ManifestOptions o;
  o.vendor = "both";
  auto ms = make_manifests(o);
  // Without MIG nothing asks for MIG monitoring: NVIDIA's runtime refuses to start a container
  // that does without CAP_SYS_ADMIN.
  for (const auto& m : ms) {
    if (m.object["kind"] != "DaemonSet") continue;
    const Json& spec = m.object["spec"]["template"]["spec"];
    for (const char* list : {"initContainers", "containers"}) {
      for (const auto& c : spec.value(list, Json::array())) {
        EXPECT_FALSE(env_of(c).contains("NVIDIA_MIG_MONITOR_DEVICES")) << m.file;
        EXPECT_FALSE(c["securityContext"]["capabilities"].contains("add")) << m.file;
      }
    }
  }

  o.mig_strategy = MigStrategy::kMixed;
  ms = make_manifests(o);
  const Json* cm = find(ms, "ConfigMap", "gpuorch-device-plugin-nvidia");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ(parse_config((*cm)["data"]["config.yaml"].get<std::string>(), "cm").mig_strategy,
            MigStrategy::kMixed);
  const Json* amd = find(ms, "ConfigMap", "gpuorch-device-plugin-amd");
  EXPECT_EQ(parse_config((*amd)["data"]["config.yaml"].get<std::string>(), "cm").mig_strategy,
            MigStrategy::kNone);
  const Json& plugin = pod_spec(ms, "DaemonSet", "gpuorch-device-plugin-nvidia")["containers"][0];
  EXPECT_EQ(env_of(plugin)["NVIDIA_MIG_MONITOR_DEVICES"], "all");
  EXPECT_EQ(plugin["securityContext"]["capabilities"],
            Json::parse(R"({"drop": ["ALL"], "add": ["SYS_ADMIN"]})"));
  EXPECT_EQ(plugin["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_FALSE(plugin["securityContext"].contains("privileged"));
  // The labeller reads the strategy from the NVIDIA plugin's ConfigMap, mounted into it.
  const Json& labeller = pod_spec(ms, "DaemonSet", "gpuorch-node-labeller");
  EXPECT_EQ(labeller["volumes"][0]["configMap"]["name"], "gpuorch-device-plugin-nvidia");
  EXPECT_EQ(env_of(labeller["containers"][0])["NVIDIA_MIG_MONITOR_DEVICES"], "all");
  EXPECT_EQ(labeller["containers"][0]["securityContext"]["capabilities"]["add"],
            Json::array({"SYS_ADMIN"}));
  const Json& amd_plugin = pod_spec(ms, "DaemonSet", "gpuorch-device-plugin-amd")["containers"][0];
  EXPECT_FALSE(amd_plugin["securityContext"]["capabilities"].contains("add"));
  // Nothing configures MIG: gpuorch reads the layout, it never changes it.
  for (const auto& m : ms) {
    EXPECT_EQ(m.object.dump().find("NVIDIA_MIG_CONFIG_DEVICES"), std::string::npos) << m.file;
  }

  o.vendor = "amd";
  EXPECT_EQ(test::input_error([&] { make_manifests(o); }),
            "--mig-strategy mixed: MIG is NVIDIA's; use --vendor nvidia or both");
}

TEST(ManifestOptions, CommandLine) {
  test::TempDir dir;
  auto r = test::run_cli({"manifests", "--help"}, dir);
  ASSERT_EQ(r.exit_code, 0);
  for (const char* s :
       {"  gpuorch manifests --vendor nvidia --image", "--toleration", "KEY=VALUE:EFFECT",
        "--mig-strategy TEXT", "(default: none)", "--image-pull-secret", "--runtime-class",
        "--requests", "device-plugin cpu=10m,memory=64Mi"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  r = test::run_cli({"manifests",
                     "--json",
                     "--toleration",
                     "a=b:NoSchedule",
                     "--toleration",
                     "c:NoExecute",
                     "--node-selector",
                     "pool=gpu",
                     "--image-pull-secret",
                     "x",
                     "--image-pull-secret",
                     "y",
                     "--requests",
                     "exporter:cpu=1",
                     "--limits",
                     "exporter:cpu=2",
                     "--mig-strategy",
                     "single",
                     "--runtime-class",
                     "nvidia",
                     "--image-pull-policy",
                     "IfNotPresent"},
                    dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json all = Json::parse(r.out);
  bool seen = false;
  for (const auto& obj : all) {
    if (obj["metadata"]["name"] != "gpuorch-exporter" || obj["kind"] != "DaemonSet") continue;
    seen = true;
    const Json& spec = obj["spec"]["template"]["spec"];
    EXPECT_EQ(spec["imagePullSecrets"].size(), 2u);
    EXPECT_EQ(spec["tolerations"].size(), 5u);  // 3 of its own, 2 given
    EXPECT_EQ(spec["containers"][0]["resources"]["limits"]["cpu"], "2");
  }
  EXPECT_TRUE(seen);
  // Bad values: one line, exit 2.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"manifests", "--toleration", "a=b:Never"},
        {"manifests", "--node-selector", "novalue"},
        {"manifests", "--requests", "exporter:cpu=fast"},
        {"manifests", "--limits", "exporter:memory=1Mi"},
        {"manifests", "--mig-strategy", "partial"},
        {"manifests", "--image-pull-policy", "always"},
        {"manifests", "--image-pull-secret", "UPPER"},
        {"manifests", "--runtime-class", "a/b"},
        {"manifests", "--namespace", "Kube_System"}}) {
    r = test::run_cli(bad, dir);
    EXPECT_EQ(r.exit_code, 2) << bad[1];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad[1] << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpuorch::k8s
