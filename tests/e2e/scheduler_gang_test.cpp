// Gangs through `gpuorch scheduler` on the real kube-apiserver, with the PodGroup CRD that
// `gpuorch manifests` ships: 4 pods x 8 GPUs where only 3 nodes have room bind nothing and say
// why (pods and PodGroup); once a 4th node frees up all four bind, under one rack; a malformed
// PodGroup and a gang short of minMember are explained, not placed.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";

void install_podgroup_crd(k8s::ApiClient& api) {
  for (const auto& m : k8s::make_manifests({})) {
    if (m.object.value("kind", "") != "CustomResourceDefinition") continue;
    try {
      api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                 json::parse(m.object.dump()));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 409) throw;  // installed by an earlier test of this process
    }
  }
  // The new API is served once the CRD is established.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      api.get(kGroups);
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(200ms);
    }
  }
  FAIL() << "PodGroup API never served";
}

void add_node(k8s::ApiClient& api, const std::string& name, const std::string& rack) {
  api.create(
      "/api/v1/nodes",
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata",
        {{"name", name},
         {"labels", {{"nvidia.com/gpu.product", "H100"}, {"block", "b1"}, {"rack", rack}}}}}});
  const json res = {{"cpu", "96"}, {"memory", "768Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  api.patch(fmt::format("/api/v1/nodes/{}/status", name),
            {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

json pod(const std::string& name, int gpus, const std::string& group = "") {
  json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", json::object()}}},
      {"spec",
       {{"schedulerName", "gpuorch"},
        {"containers",
         json::array({{{"name", "c"},
                       {"image", "registry.k8s.io/pause:3.10"},
                       {"resources",
                        {{"requests", {{"cpu", "8"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
  if (!group.empty()) p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  return p;
}

using test::node_of;
using test::wait_for;

std::string message_of(const json& p) { return test::unschedulable_message(p); }

TEST(SchedulerGang, AllOrNothingThenTogetherUnderOneRack) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  install_podgroup_crd(api);
  for (int i = 1; i <= 4; ++i) add_node(api, fmt::format("r1-n{}", i), "r1");
  for (int i = 1; i <= 4; ++i) add_node(api, fmt::format("r2-n{}", i), "r2");
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", cp.kubeconfig(), "--policy", "best-fit",
                                    "--topology-levels", "block,rack", "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  // Blockers fill r1-n4 and all of r2: only r1-n1..n3 have room.
  for (const char* n : {"r1-n4", "r2-n1", "r2-n2", "r2-n3", "r2-n4"}) {
    json b = pod(fmt::format("block-{}", n), 8);
    b["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", n}};
    b["metadata"]["labels"]["kubernetes.io/hostname"] = n;
    b["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
     ["nodeSelectorTerms"] = json::array(
         {{{"matchFields",
            json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {n}}}})}}});
    b["spec"].erase("nodeSelector");
    api.create(kPods, b);
    const json bound = wait_for(api, fmt::format("{}/block-{}", kPods, n),
                                [](const json& p) { return !node_of(p).empty(); });
    ASSERT_EQ(node_of(bound), n) << scheduler.log();
  }
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "train"}}},
                       {"spec", {{"minMember", 4}, {"scheduleTimeoutSeconds", 60}}}});
  for (int i = 0; i < 4; ++i) api.create(kPods, pod(fmt::format("train-{}", i), 8, "train"));
  for (int i = 0; i < 4; ++i) {
    const json p = wait_for(api, fmt::format("{}/train-{}", kPods, i), [](const json& o) {
      return message_of(o).find("cannot be placed whole") != std::string::npos;
    });
    EXPECT_TRUE(node_of(p).empty());
    EXPECT_NE(message_of(p).find("minMember 4"), std::string::npos) << message_of(p);
  }
  const json group = wait_for(api, kGroups + "/train", [](const json& g) {
    return g.value("/status/phase"_json_pointer, std::string()) == "Pending";
  });
  EXPECT_EQ(group["status"].value("scheduled", -1), 0);
  const json events =
      api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DPodGroup");
  ASSERT_FALSE(events["items"].empty());
  EXPECT_NE(events["items"][0].value("message", "").find("cannot be placed whole"),
            std::string::npos);
  // Nothing of the gang holds anything: a single 8-GPU pod still gets r1-n1..n3.
  // A 4th node in r1 frees up: the four bind together, all in r1.
  api.remove(fmt::format("{}/block-r1-n4?gracePeriodSeconds=0", kPods));
  std::set<std::string> nodes;
  for (int i = 0; i < 4; ++i) {
    const json p = wait_for(api, fmt::format("{}/train-{}", kPods, i),
                            [](const json& o) { return !node_of(o).empty(); });
    nodes.insert(node_of(p));
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"r1-n1", "r1-n2", "r1-n3", "r1-n4"})) << scheduler.log();
  wait_for(api, kGroups + "/train", [](const json& g) {
    return g.value("/status/phase"_json_pointer, std::string()) == "Scheduled";
  });
  EXPECT_NE(scheduler.log().find("gang default/train: 4 members placed under rack=r1"),
            std::string::npos)
      << scheduler.log();

  // Short of minMember, and a malformed group: explained, never placed.
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "short"}}},
                       {"spec", {{"minMember", 3}}}});
  api.create(kPods, pod("short-0", 1, "short"));
  // The pod may reach the scheduler before its PodGroup does ("does not exist ... waiting for
  // it"); the group's arrival retries it, so wait for the explanation that names minMember.
  const json s = wait_for(api, kPods + "/short-0", [](const json& o) {
    return message_of(o).find("minMember") != std::string::npos;
  });
  EXPECT_NE(message_of(s).find("1 of minMember 3 pods exist"), std::string::npos) << message_of(s);
  api.create(kPods, pod("orphan-0", 1, "missing"));
  const json o =
      wait_for(api, kPods + "/orphan-0", [](const json& x) { return !message_of(x).empty(); });
  EXPECT_NE(message_of(o).find("PodGroup default/missing does not exist"), std::string::npos);
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
}

}  // namespace
}  // namespace gpuorch
