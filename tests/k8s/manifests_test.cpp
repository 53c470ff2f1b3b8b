// `gpuorch manifests`: every object valid against the Kubernetes OpenAPI schemas (the npm package
// kubernetes-models, offline), the security settings the issue asks for, and the scheduler's
// objects (exact RBAC, Deployment, PodGroup CRD). tests/k8s/manifests_apply_test.cpp sends them
// all to a real API server.
#include "gpuorch/k8s/manifests/manifests.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using Json = nlohmann::ordered_json;

const Json* find(const std::vector<Manifest>& ms, const std::string& kind,
                 const std::string& name) {
  for (const auto& m : ms) {
    if (m.object["kind"] == kind && m.object["metadata"]["name"] == name) return &m.object;
  }
  return nullptr;
}

TEST(Manifests, DevicePluginDaemonSetIsLockedDown) {
  ManifestOptions o;
  o.vendor = "both";
  o.sharing = SharingKind::kTimeSlicing;
  const auto ms = make_manifests(o);
  for (const char* v : {"nvidia", "amd"}) {
    const Json* ds = find(ms, "DaemonSet", std::string("gpuorch-device-plugin-") + v);
    ASSERT_NE(ds, nullptr) << v;
    const Json& pod = (*ds)["spec"]["template"]["spec"];
    EXPECT_EQ(pod["priorityClassName"], "system-node-critical");
    EXPECT_EQ(pod["nodeSelector"]["gpuorch.io/gpu.vendor"], v);
    EXPECT_FALSE(pod["tolerations"].empty());
    const Json& sc = pod["containers"][0]["securityContext"];
    EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
    EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
    EXPECT_EQ(sc["capabilities"]["drop"], Json::array({"ALL"}));
    EXPECT_FALSE(sc.contains("privileged"));
    EXPECT_EQ(pod["volumes"][0]["hostPath"]["path"], "/var/lib/kubelet/device-plugins");
    EXPECT_EQ(pod["containers"][0]["volumeMounts"][0]["mountPath"],
              "/var/lib/kubelet/device-plugins");
  }
  const Json* cm = find(ms, "ConfigMap", "gpuorch-device-plugin-nvidia");
  ASSERT_NE(cm, nullptr);
  // The ConfigMap is the plugin's own config format, so it must load.
  const auto cfg = parse_config((*cm)["data"]["config.yaml"].get<std::string>(), "cm");
  EXPECT_EQ(cfg.sharing, SharingKind::kTimeSlicing);
  EXPECT_EQ(cfg.replicated.resources.at(0).replicas, 4);
}

TEST(Manifests, RbacIsGetAndPatchNodesOnly) {
  const auto ms = make_manifests({});
  const Json* role = find(ms, "ClusterRole", "gpuorch-node-labeller");
  ASSERT_NE(role, nullptr);
  ASSERT_EQ((*role)["rules"].size(), 1u);
  EXPECT_EQ((*role)["rules"][0]["resources"], Json::array({"nodes"}));
  EXPECT_EQ((*role)["rules"][0]["verbs"], Json::array({"get", "patch"}));
  std::vector<std::string> roles;
  for (const auto& m : ms) {
    if (m.object["kind"] == "ClusterRole" || m.object["kind"] == "Role") {
      roles.push_back(m.object["metadata"]["name"].get<std::string>());
    }
  }
  EXPECT_EQ(roles, (std::vector<std::string>{
                       "gpuorch-node-labeller", "gpuorch-device-plugin", "gpuorch-scheduler",
                       "gpuorch-scheduler-leader-election", "gpuorch-launch"}))
      << "the exporter needs no API access";
  // The launcher's own pod annotation (gpuorch.io/throughput): patch on pods, bound by no one
  // here (a team's RoleBinding gives it to its training pods).
  const Json* launch_role = find(ms, "ClusterRole", "gpuorch-launch");
  ASSERT_NE(launch_role, nullptr);
  EXPECT_EQ((*launch_role)["rules"], Json::parse(R"([{"apiGroups": [""], "resources": ["pods"],
                                                       "verbs": ["patch"]}])"));
  for (const auto& m : ms) {
    if (m.object["kind"] == "ClusterRoleBinding" || m.object["kind"] == "RoleBinding") {
      EXPECT_NE(m.object["roleRef"]["name"], "gpuorch-launch") << m.file;
    }
  }
  // Allocate follows the scheduler: the plugin lists its node's pods and marks the one it
  // allocated for, and needs its node's name for that (docs/device-plugin.md).
  const Json* plugin_role = find(ms, "ClusterRole", "gpuorch-device-plugin");
  ASSERT_NE(plugin_role, nullptr);
  EXPECT_EQ((*plugin_role)["rules"], Json::parse(R"([{"apiGroups": [""], "resources": ["pods"],
                                                       "verbs": ["list", "patch"]}])"));
  const Json* plugin_binding = find(ms, "ClusterRoleBinding", "gpuorch-device-plugin");
  ASSERT_NE(plugin_binding, nullptr);
  EXPECT_EQ((*plugin_binding)["subjects"][0]["name"], "gpuorch-device-plugin");
  const Json* plugin = find(ms, "DaemonSet", "gpuorch-device-plugin-nvidia");
  const Json& plugin_pod = (*plugin)["spec"]["template"]["spec"];
  EXPECT_EQ(plugin_pod["automountServiceAccountToken"], true);
  EXPECT_EQ(plugin_pod["containers"][0]["env"][0], Json::parse(R"({"name": "NODE_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})"));
  const Json* exporter = find(ms, "DaemonSet", "gpuorch-exporter");
  ASSERT_NE(exporter, nullptr);
  EXPECT_EQ((*exporter)["spec"]["template"]["spec"]["automountServiceAccountToken"], false);
  // With the DRA driver instead of the plugin, no plugin role.
  ManifestOptions dra;
  dra.dra = true;
  EXPECT_EQ(find(make_manifests(dra), "ClusterRole", "gpuorch-device-plugin"), nullptr);
  const Json* svc = find(ms, "Service", "gpuorch-exporter");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ((*svc)["metadata"]["annotations"]["prometheus.io/port"], "9400");
  // Quoted in YAML, so a string stays a string.
  EXPECT_NE(to_yaml(*svc).find("prometheus.io/scrape: \"true\""), std::string::npos);
}

// Every string anywhere in the object (keys included), for the wildcard check.
void strings_in(const Json& j, std::vector<std::string>& out) {
  if (j.is_string()) out.push_back(j.get<std::string>());
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out.push_back(k);
      strings_in(v, out);
    }
  }
  if (j.is_array()) {
    for (const auto& v : j) strings_in(v, out);
  }
}

TEST(Manifests, SchedulerRbacIsExactlyWhatItCalls) {
  ManifestOptions o;
  o.ns = "gpu-system";
  const auto ms = make_manifests(o);
  // Cluster-wide names carry a namespace other than the default: two installs never share them.
  EXPECT_EQ(find(ms, "ClusterRole", "gpuorch-scheduler"), nullptr);
  const Json* role = find(ms, "ClusterRole", "gpuorch-scheduler-gpu-system");
  ASSERT_NE(role, nullptr);
  ASSERT_NE(find(ms, "ClusterRole", "gpuorch-node-labeller-gpu-system"), nullptr);
  ASSERT_NE(find(ms, "ClusterRoleBinding", "gpuorch-node-labeller-gpu-system"), nullptr);
  const Json expected = Json::parse(R"([
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups", "podgroups/status"],
     "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["scheduling.run.ai"], "resources": ["queues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["scheduling.run.ai"], "resources": ["queues/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update", "patch"]}
  ])");
  EXPECT_EQ((*role)["rules"], expected) << (*role)["rules"].dump(2);
  EXPECT_FALSE((*role)["metadata"].contains("namespace"));

  const Json* lease = find(ms, "Role", "gpuorch-scheduler-leader-election");
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ((*lease)["metadata"]["namespace"], "gpu-system");
  EXPECT_EQ((*lease)["rules"], Json::parse(R"([{"apiGroups": ["coordination.k8s.io"],
      "resources": ["leases"], "verbs": ["get", "create", "update"]}])"));

  // Each binding gives its role to the scheduler's account in --namespace, and to no one else.
  const Json subjects = Json::parse(
      R"([{"kind": "ServiceAccount", "name": "gpuorch-scheduler", "namespace": "gpu-system"}])");
  const Json* crb = find(ms, "ClusterRoleBinding", "gpuorch-scheduler-gpu-system");
  ASSERT_NE(crb, nullptr);
  EXPECT_EQ((*crb)["subjects"], subjects);
  EXPECT_EQ((*crb)["roleRef"]["kind"], "ClusterRole");
  EXPECT_EQ((*crb)["roleRef"]["name"], "gpuorch-scheduler-gpu-system");
  const Json* rb = find(ms, "RoleBinding", "gpuorch-scheduler-leader-election");
  ASSERT_NE(rb, nullptr);
  EXPECT_EQ((*rb)["metadata"]["namespace"], "gpu-system");
  EXPECT_EQ((*rb)["subjects"], subjects);
  EXPECT_EQ((*rb)["roleRef"]["kind"], "Role");
  EXPECT_EQ((*rb)["roleRef"]["name"], "gpuorch-scheduler-leader-election");
  ASSERT_NE(find(ms, "ServiceAccount", "gpuorch-scheduler"), nullptr);

  // No wildcard in any role or binding gpuorch writes: not in verbs, resources, groups or names.
  for (const auto& m : ms) {
    const std::string kind = m.object["kind"];
    if (kind.find("Role") == std::string::npos) continue;
    std::vector<std::string> all;
    strings_in(m.object, all);
    for (const auto& str : all) {
      EXPECT_EQ(str.find('*'), std::string::npos) << m.file << ": " << str;
    }
  }
}

TEST(Manifests, SchedulerDeployment) {
  ManifestOptions o;
  o.image = "registry.example/gpuorch:1.2";
  const auto ms = make_manifests(o);
  const Json* d = find(ms, "Deployment", "gpuorch-scheduler");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ((*d)["metadata"]["namespace"], "gpuorch");
  EXPECT_EQ((*d)["spec"]["replicas"], 2);
  const Json& pod = (*d)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "gpuorch-scheduler");
  EXPECT_NE(pod["automountServiceAccountToken"], false) << "the scheduler talks to the API";
  ASSERT_EQ(pod["containers"].size(), 1u);
  const Json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/gpuorch:1.2");
  EXPECT_EQ(c["args"], Json::array({"scheduler", "--listen", "0.0.0.0:10261", "--policy", "efd",
                                    "--leader-elect"}));
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"], 10261);
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], 10261);
  EXPECT_EQ(c["ports"][0]["containerPort"], 10261);
  EXPECT_TRUE(c["resources"]["requests"].contains("cpu"));
  EXPECT_TRUE(c["resources"]["requests"].contains("memory"));
  const Json& sc = c["securityContext"];
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["capabilities"]["drop"], Json::array({"ALL"}));
  EXPECT_FALSE(sc.contains("privileged"));
  // The selector picks the template's pods (the API server refuses a Deployment otherwise).
  for (const auto& [k, v] : (*d)["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_EQ((*d)["spec"]["template"]["metadata"]["labels"][k], v) << k;
  }
  // The pods are not scheduled by gpuorch itself: the default scheduler places the scheduler.
  EXPECT_FALSE(pod.contains("schedulerName"));
}

// `--kueue`: gpuorch admission-check deployed as the scheduler is (two replicas on one Lease),
// with exactly the calls it makes, and the AdmissionCheck object a ClusterQueue names.
TEST(Manifests, KueueAdmissionCheckDeploymentRbacAndCheck) {
  ManifestOptions o;
  EXPECT_EQ(find(make_manifests(o), "Deployment", "gpuorch-admission-check"), nullptr)
      << "only with --kueue";
  o.kueue = true;
  o.ns = "gpu-system";
  const auto ms = make_manifests(o);
  const Json* d = find(ms, "Deployment", "gpuorch-admission-check");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ((*d)["spec"]["replicas"], 2);
  const Json& pod = (*d)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "gpuorch-admission-check");
  const Json& c = pod["containers"][0];
  EXPECT_EQ(c["args"], Json::array({"admission-check", "--listen", "0.0.0.0:10263", "--policy",
                                    "efd", "--leader-elect"}));
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"], 10263);
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(c["resources"]["requests"]["memory"], "256Mi");

  const Json* role = find(ms, "ClusterRole", "gpuorch-admission-check-gpu-system");
  ASSERT_NE(role, nullptr);
  EXPECT_EQ((*role)["rules"], Json::parse(R"([
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "admissionchecks", "resourceflavors"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status", "admissionchecks/status"],
     "verbs": ["patch"]},
    {"apiGroups": ["resource.k8s.io"],
     "resources": ["resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"],
     "verbs": ["get", "list", "watch"]}
  ])"))
      << (*role)["rules"].dump(2);
  const Json subjects = Json::parse(
      R"([{"kind": "ServiceAccount", "name": "gpuorch-admission-check", "namespace": "gpu-system"}])");
  const Json* crb = find(ms, "ClusterRoleBinding", "gpuorch-admission-check-gpu-system");
  ASSERT_NE(crb, nullptr);
  EXPECT_EQ((*crb)["subjects"], subjects);
  const Json* rb = find(ms, "RoleBinding", "gpuorch-admission-check-leader-election");
  ASSERT_NE(rb, nullptr);
  EXPECT_EQ((*rb)["subjects"], subjects);
  EXPECT_EQ((*rb)["roleRef"]["name"], "gpuorch-admission-check-leader-election");
  ASSERT_NE(find(ms, "Role", "gpuorch-admission-check-leader-election"), nullptr);
  ASSERT_NE(find(ms, "ServiceAccount", "gpuorch-admission-check"), nullptr);

  const Json* check = find(ms, "AdmissionCheck", "gpuorch-placeable");
  ASSERT_NE(check, nullptr);
  EXPECT_EQ((*check)["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ((*check)["spec"]["controllerName"], "gpuorch.io/placeable");
  EXPECT_FALSE((*check)["metadata"].contains("namespace")) << "AdmissionChecks are cluster-wide";
  // Every file name is still unique: `-o DIR` writes one file per object.
  std::set<std::string> files;
  for (const auto& m : ms) EXPECT_TRUE(files.insert(m.file).second) << m.file;
}

TEST(Manifests, PodGroupCrdInItsOwnFile) {
  ManifestOptions o;
  auto ms = make_manifests(o);
  const Json* crd = find(ms, "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io");
  ASSERT_NE(crd, nullptr);
  std::string file;
  for (const auto& m : ms) {
    if (&m.object == crd) file = m.file;
  }
  EXPECT_EQ(file, "00-podgroup-crd.yaml");
  EXPECT_EQ((*crd)["spec"]["group"], "scheduling.x-k8s.io");
  EXPECT_EQ((*crd)["spec"]["scope"], "Namespaced");
  EXPECT_EQ((*crd)["spec"]["names"]["kind"], "PodGroup");
  EXPECT_EQ((*crd)["spec"]["names"]["plural"], "podgroups");
  ASSERT_EQ((*crd)["spec"]["versions"].size(), 1u);
  const Json& v = (*crd)["spec"]["versions"][0];
  EXPECT_EQ(v["name"], "v1alpha1");
  EXPECT_EQ(v["served"], true);
  EXPECT_EQ(v["storage"], true);
  EXPECT_TRUE(v["subresources"].contains("status"));
  const Json& props = v["schema"]["openAPIV3Schema"]["properties"];
  // scheduler-plugins' coscheduling field names.
  const Json& spec = props["spec"]["properties"];
  EXPECT_EQ(spec["minMember"]["type"], "integer");
  EXPECT_EQ(spec["scheduleTimeoutSeconds"]["type"], "integer");
  EXPECT_EQ(spec["minResources"]["type"], "object");
  const Json& status = props["status"]["properties"];
  for (const char* f : {"phase", "occupiedBy", "scheduled", "running", "succeeded", "failed",
                        "scheduleStartTime", "conditions"}) {
    EXPECT_TRUE(status.contains(f)) << f;
  }
  for (const char* phase :
       {"Pending", "PreScheduling", "Scheduling", "Scheduled", "Running", "Finished", "Failed"}) {
    EXPECT_NE(std::find(status["phase"]["enum"].begin(), status["phase"]["enum"].end(), phase),
              status["phase"]["enum"].end())
        << phase;
  }

  o.podgroup_crd = false;
  ms = make_manifests(o);
  EXPECT_EQ(find(ms, "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"), nullptr);
  EXPECT_NE(find(ms, "Deployment", "gpuorch-scheduler"), nullptr);

  o.podgroup_crd = true;
  o.scheduler = false;
  ms = make_manifests(o);
  EXPECT_EQ(find(ms, "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"), nullptr);
  for (const auto& m : ms) {
    EXPECT_EQ(m.object["metadata"]["name"].get<std::string>().find("scheduler"), std::string::npos)
        << m.file;
  }
}

TEST(Manifests, QueueCrdIsKaisQueueInItsOwnFile) {
  ManifestOptions o;
  auto ms = make_manifests(o);
  const Json* crd = find(ms, "CustomResourceDefinition", "queues.scheduling.run.ai");
  ASSERT_NE(crd, nullptr);
  std::string file;
  for (const auto& m : ms) {
    if (&m.object == crd) file = m.file;
  }
  EXPECT_EQ(file, "00-queue-crd.yaml");
  EXPECT_EQ((*crd)["spec"]["group"], "scheduling.run.ai");
  EXPECT_EQ((*crd)["spec"]["scope"], "Cluster");  // as KAI's: queues belong to no namespace
  EXPECT_EQ((*crd)["spec"]["names"]["kind"], "Queue");
  ASSERT_EQ((*crd)["spec"]["versions"].size(), 1u);
  const Json& v = (*crd)["spec"]["versions"][0];
  EXPECT_EQ(v["name"], "v2");
  EXPECT_TRUE(v["subresources"].contains("status"));
  const Json& spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"];
  EXPECT_EQ(spec["properties"]["parentQueue"]["type"], "string");
  EXPECT_EQ(spec["properties"]["priority"]["type"], "integer");
  for (const char* r : {"gpu", "cpu", "memory"}) {
    const Json& res = spec["properties"]["resources"]["properties"][r]["properties"];
    for (const char* f : {"quota", "limit", "overQuotaWeight"}) {
      EXPECT_EQ(res[f]["type"], "number") << r << "." << f;
    }
  }
  // gpuorch's quotas per GPU model: a list keyed by model, of the same three numbers.
  const Json& models = spec["properties"]["resources"]["properties"]["gpuModels"];
  EXPECT_EQ(models["type"], "array");
  EXPECT_EQ(models["x-kubernetes-list-map-keys"], Json::array({"model"}));
  EXPECT_EQ(models["items"]["properties"]["model"]["type"], "string");
  for (const char* f : {"quota", "limit", "overQuotaWeight"}) {
    EXPECT_EQ(models["items"]["properties"][f]["type"], "number") << f;
  }
  // KAI's other fields stay as written.
  EXPECT_EQ(spec["x-kubernetes-preserve-unknown-fields"], true);

  o.queue_crd = false;
  ms = make_manifests(o);
  EXPECT_EQ(find(ms, "CustomResourceDefinition", "queues.scheduling.run.ai"), nullptr);
  EXPECT_NE(find(ms, "CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"), nullptr);
  o.queue_crd = true;
  o.scheduler = false;
  EXPECT_EQ(find(make_manifests(o), "CustomResourceDefinition", "queues.scheduling.run.ai"),
            nullptr);
}

TEST(Manifests, SchedulerFlags) {
  test::TempDir dir;
  auto r = test::run_cli({"manifests", "-o", dir.file("all")}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("all/00-podgroup-crd.yaml")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("all/40-scheduler.yaml")));
  r = test::run_cli({"manifests", "--no-podgroup-crd", "-o", dir.file("nocrd")}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("nocrd/00-podgroup-crd.yaml")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("nocrd/40-scheduler.yaml")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("nocrd/00-queue-crd.yaml")));
  r = test::run_cli({"manifests", "--no-queue-crd", "-o", dir.file("noqueue")}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("noqueue/00-queue-crd.yaml")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("noqueue/00-podgroup-crd.yaml")));
  r = test::run_cli({"manifests", "--no-scheduler", "-o", dir.file("none")}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("none/00-podgroup-crd.yaml")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("none/00-queue-crd.yaml")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("none/40-scheduler.yaml")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("none/04-clusterrole-scheduler.yaml")));
}

TEST(Manifests, BadOptions) {
  ManifestOptions o;
  o.sharing = SharingKind::kMps;
  o.replicas = 1;
  EXPECT_EQ(test::input_error([&] { make_manifests(o); }),
            "--replicas 1: sharing needs at least 2");
  o.replicas = 2;
  o.vendor = "amd";
  EXPECT_EQ(test::input_error([&] { make_manifests(o); }),
            "--sharing mps: MPS is NVIDIA's; AMD GPUs can use time-slicing");
}

// The schema check runs the built binary, as a user would, and node on its JSON output.
TEST(Manifests, ValidKubernetesObjects) {
  const std::filesystem::path validate =
      std::filesystem::path(::gpuorch::test::fixtures_dir()).parent_path() / "k8s/validate";
  if (std::system("node --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node is not installed: the kubernetes-models check needs it";
  }
  if (!std::filesystem::exists(validate / "node_modules/kubernetes-models")) {
    GTEST_SKIP() << "kubernetes-models is not installed (npm install --prefix " << validate.string()
                 << "; scripts/setup does it when npm is available)";
  }
  test::TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"manifests", "--json"},
        {"manifests", "--json", "--vendor", "both", "--sharing", "time-slicing", "--replicas", "8",
         "--namespace", "gpu-system", "--image", "registry.example/gpuorch:1.2"},
        {"manifests", "--json", "--vendor", "nvidia", "--sharing", "mps"},
        {"manifests",
         "--json",
         "--vendor",
         "both",
         "--mig-strategy",
         "mixed",
         "--image-pull-secret",
         "regcred",
         "--image-pull-policy",
         "Always",
         "--node-selector",
         "pool=gpu",
         "--toleration",
         "dedicated=gpu:NoSchedule",
         "--toleration",
         "spot:NoExecute",
         "--requests",
         "exporter:cpu=100m",
         "--limits",
         "scheduler:memory=2Gi",
         "--runtime-class",
         "nvidia"}}) {
    const auto r = test::run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    test::write_text(dir.file("objects.json"), r.out);
    const std::string cmd = "cd " + test::shell_quote(validate.string()) +
                            " && node validate.mjs " + test::shell_quote(dir.file("objects.json")) +
                            " > " + test::shell_quote(dir.file("validate.out")) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << test::read_text(dir.file("validate.out"));
    EXPECT_EQ(test::read_text(dir.file("validate.out")).find("INVALID"), std::string::npos);
  }
}

// The exporter labels GPU series with the pod using them, as dcgm-exporter's DaemonSet: -k and the
// kubelet's pod-resources socket mounted read-only (docs/telemetry.md).
TEST(Manifests, ExporterReadsPodResourcesReadOnly) {
  const auto ms = make_manifests({});
  const Json* ds = find(ms, "DaemonSet", "gpuorch-exporter");
  ASSERT_NE(ds, nullptr);
  const Json& pod = (*ds)["spec"]["template"]["spec"];
  const Json& c = pod["containers"][0];
  EXPECT_NE(std::find(c["args"].begin(), c["args"].end(), "--kubernetes"), c["args"].end());
  ASSERT_EQ(c["volumeMounts"].size(), 1u);
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/var/lib/kubelet/pod-resources");
  EXPECT_EQ(c["volumeMounts"][0]["readOnly"], true);
  EXPECT_EQ(pod["volumes"][0]["hostPath"]["path"], "/var/lib/kubelet/pod-resources");
}

}  // namespace
}  // namespace gpuorch::k8s
