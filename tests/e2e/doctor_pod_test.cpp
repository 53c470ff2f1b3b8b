// gpuorch doctor pod on the real kube-apiserver: for pods blocked by (a) GPU count, (b) node
// affinity, (c) a taint and (d) an incomplete gang, doctor's explanation is the one `gpuorch
// scheduler` itself wrote on the pod; a pod no scheduler serves is said to fit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/podgroup_crd.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using nlohmann::json;
const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";

void node(k8s::ApiClient& api, const std::string& name, const json& taints) {
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", name},
                {"labels", {{"nvidia.com/gpu.product", "H100"}, {"kubernetes.io/hostname", name}}}}},
              {"spec", {{"taints", taints}}}});
  const json res = {{"cpu", "96"}, {"memory", "768Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  api.patch(fmt::format("/api/v1/nodes/{}/status", name),
            {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

json pod(const std::string& name, int gpus, const std::string& scheduler = "gpuorch") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", json::object()}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"containers",
             json::array({{{"name", "c"},
                           {"image", "registry.k8s.io/pause:3.10"},
                           {"resources",
                            {{"requests", {{"cpu", "4"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                             {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
}

json doctor(const std::string& kubeconfig, const std::string& name, int expect_code) {
  test::TempDir dir;
  std::vector<std::string> args{"doctor", "pod", "--kubeconfig", kubeconfig, "--json"};
  if (!name.empty()) args.insert(args.begin() + 2, name);
  const auto r = test::run_cli(args, dir);
  EXPECT_EQ(r.exit_code, expect_code) << r.out << r.err;
  return r.out.empty() ? json() : json::parse(r.out);
}

TEST(DoctorPod, ExplainsPendingPodsAsTheSchedulerDoes) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  test::install_podgroup_crd(api, kGroups);
  node(api, "gpu-a", json::array());
  node(api, "gpu-b", json::array({{{"key", "dedicated"}, {"value", "infer"}, {"effect", "NoSchedule"}}}));

  std::vector<std::string> blocked;
  api.create(kPods, pod("too-many-gpus", 16));  // (a)
  blocked.emplace_back("too-many-gpus");
  json affinity = pod("wrong-zone", 1);  // (b)
  affinity["spec"]["nodeSelector"] = {{"topology.kubernetes.io/zone", "nowhere"}};
  api.create(kPods, affinity);
  blocked.emplace_back("wrong-zone");
  json tainted = pod("only-on-b", 1);  // (c): its one allowed node is tainted
  tainted["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "gpu-b"}};
  api.create(kPods, tainted);
  blocked.emplace_back("only-on-b");
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "train"}}},
                       {"spec", {{"minMember", 3}}}});
  json member = pod("train-0", 2);  // (d): 1 of 3 members exists
  member["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "train";
  api.create(kPods, member);
  blocked.emplace_back("train-0");

  std::map<std::string, std::string> said;  // what the scheduler wrote
  {
    test::TempDir dir;
    test::SchedulerProcess scheduler({"--kubeconfig", cp.kubeconfig(), "--listen", "127.0.0.1:0"},
                                     dir.file("scheduler.log"));
    for (const auto& name : blocked) {
      const json p = test::wait_for(api, kPods + "/" + name, [](const json& o) {
        return !test::unschedulable_message(o).empty();
      });
      said[name] = test::unschedulable_message(p);
    }
    EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  }
  EXPECT_NE(said["too-many-gpus"].find("Infeasible"), std::string::npos) << said["too-many-gpus"];
  EXPECT_NE(said["only-on-b"].find("taint"), std::string::npos) << said["only-on-b"];

  const std::map<std::string, std::string> ids = {{"too-many-gpus", "pod.infeasible"},
                                                  {"wrong-zone", "pod.infeasible"},
                                                  {"only-on-b", "pod.infeasible"},
                                                  {"train-0", "pod.gang-incomplete"}};
  for (const auto& name : blocked) {
    const json j = doctor(cp.kubeconfig(), "default/" + name, 1);
    ASSERT_EQ(j["checks"][0]["findings"].size(), 1u) << j.dump();
    const json& f = j["checks"][0]["findings"][0];
    EXPECT_EQ(f["what"], "default/" + name + ": " + said[name]) << name;
    EXPECT_EQ(f["id"], ids.at(name)) << name;
    EXPECT_FALSE(f["fix"].get<std::string>().empty());
  }

  // A pod no running scheduler serves: it fits, so doctor says nobody has acted on it.
  api.create(kPods, pod("unserved", 1, "nobody"));
  const json all = doctor(cp.kubeconfig(), "", 1);
  const auto& findings = all["checks"][0]["findings"];
  EXPECT_EQ(findings.size(), blocked.size() + 1) << all.dump();
  bool unserved = false;
  for (const auto& f : findings) {
    if (f["what"].get<std::string>().rfind("default/unserved fits now", 0) == 0) {
      unserved = true;
      EXPECT_EQ(f["id"], "pod.fits");
      EXPECT_NE(f["fix"].get<std::string>().find("'nobody'"), std::string::npos);
    }
  }
  EXPECT_TRUE(unserved) << all.dump();

  test::TempDir dir;
  const auto missing = test::run_cli(
      {"doctor", "pod", "default/no-such-pod", "--kubeconfig", cp.kubeconfig()}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "gpuorch: pod default/no-such-pod not found (or it has finished)\n");
  test::clear_cluster(api);
  EXPECT_EQ(doctor(cp.kubeconfig(), "", 0)["checks"][0]["findings"][0]["id"], "pod.none-pending");
}

}  // namespace
}  // namespace gpuorch
