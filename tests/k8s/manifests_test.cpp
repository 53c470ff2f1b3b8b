// `gpuorch manifests`: every object valid against the Kubernetes OpenAPI schemas (the npm package
// kubernetes-models, offline), and the security settings the issue asks for.
#include "gpuorch/k8s/manifests.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

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
  int roles = 0;
  for (const auto& m : ms) roles += m.object["kind"] == "ClusterRole" ? 1 : 0;
  EXPECT_EQ(roles, 1) << "the plugin and the exporter need no API access";
  const Json* plugin = find(ms, "DaemonSet", "gpuorch-device-plugin-nvidia");
  EXPECT_EQ((*plugin)["spec"]["template"]["spec"]["automountServiceAccountToken"], false);
  const Json* svc = find(ms, "Service", "gpuorch-exporter");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ((*svc)["metadata"]["annotations"]["prometheus.io/port"], "9400");
  // Quoted in YAML, so a string stays a string.
  EXPECT_NE(to_yaml(*svc).find("prometheus.io/scrape: \"true\""), std::string::npos);
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
      std::filesystem::path(GPUORCH_FIXTURES_DIR).parent_path() / "k8s/validate";
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
        {"manifests", "--json", "--vendor", "nvidia", "--sharing", "mps"}}) {
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

}  // namespace
}  // namespace gpuorch::k8s
