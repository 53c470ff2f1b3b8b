// The upstream gang API of Kubernetes v1.37 (KEP-4671, scheduling.k8s.io/v1beta1 PodGroup, a pod's
// spec.schedulingGroup.podGroupName; feature gate GenericWorkload, turned on in the test control
// plane) through `gpuorch scheduler` on the real kube-apiserver: a `basic` group's pod is placed on
// its own; a `gang` group with minCount 2 of two 4-GPU pods binds nothing while only one node has 4
// free GPUs, says why, and binds both, on different nodes, once a node is added; the PodGroup gets
// the Scheduled Event.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kUpstreamGroups = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups";

json upstream_group(const std::string& name, const json& policy) {
  return {{"apiVersion", "scheduling.k8s.io/v1beta1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}}},
          {"spec", {{"schedulingPolicy", policy}}}};
}

json member(const std::string& name, const std::string& group, int gpus) {
  json p = test::gpu_pod(name, {{"cpu", "1"}, {"nvidia.com/gpu", std::to_string(gpus)}});
  p["spec"]["schedulingGroup"] = {{"podGroupName", group}};
  return p;
}

bool bound(const json& pod) { return !test::node_of(pod).empty(); }

TEST(SchedulerUpstreamGang, BasicGoesAloneAGangBindsWholeOnceItFits) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  try {
    api.remove(kUpstreamGroups);
  } catch (const k8s::ApiError& e) {
    ASSERT_NE(e.status(), 404) << "scheduling.k8s.io/v1beta1 is not served: the test control "
                                  "plane runs kube-apiserver with GenericWorkload (k8s-testenv)";
  }
  test::add_gpu_node(api, "ug-a", 4, json::object(), "H100");
  test::add_gpu_node(api, "ug-b", 4, json::object(), "H100");

  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", cp.kubeconfig(), "--policy", "best-fit",
                                    "--listen", "127.0.0.1:0", "--retry-unschedulable", "5"},
                                   dir.file("scheduler.log"));

  // basic: each pod on its own.
  api.create(kUpstreamGroups, upstream_group("solo", {{"basic", json::object()}}));
  api.create(kPods, member("solo-0", "solo", 2));
  const json solo = test::wait_for(api, kPods + "/solo-0", bound);
  const std::string solo_node = test::node_of(solo);

  // gang minCount 2, two 4-GPU members: one node has 4 free, the other 2: nothing binds.
  api.create(kUpstreamGroups, upstream_group("train", {{"gang", {{"minCount", 2}}}}));
  api.create(kPods, member("train-0", "train", 4));
  api.create(kPods, member("train-1", "train", 4));
  for (const char* name : {"train-0", "train-1"}) {
    const json p = test::wait_for(api, kPods + "/" + std::string(name), [](const json& x) {
      return test::unscheduled_reason(x) == "Unschedulable";
    });
    EXPECT_FALSE(bound(p)) << p.dump();
    EXPECT_NE(test::unschedulable_message(p).find("gang default/train"), std::string::npos)
        << p.dump();
  }
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(bound(api.get(kPods + "/train-0")));
  EXPECT_FALSE(bound(api.get(kPods + "/train-1")));

  // A third node: both bind at once, on two nodes, none of them beside solo-0's 2 GPUs.
  test::add_gpu_node(api, "ug-c", 4, json::object(), "H100");
  const json t0 = test::wait_for(api, kPods + "/train-0", bound, 60s);
  const json t1 = test::wait_for(api, kPods + "/train-1", bound, 60s);
  EXPECT_NE(test::node_of(t0), test::node_of(t1));
  EXPECT_NE(test::node_of(t0), solo_node);
  EXPECT_NE(test::node_of(t1), solo_node);
  EXPECT_NE(scheduler.log().find("gang default/train"), std::string::npos) << scheduler.log();

  // The Event about the group names the upstream kind.
  bool event = false;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!event && std::chrono::steady_clock::now() < deadline) {
    const json events = api.get("/api/v1/namespaces/default/events");
    for (const auto& e : events["items"]) {
      const json& o = e["involvedObject"];
      event = event || (o.value("kind", "") == "PodGroup" && o.value("name", "") == "train" &&
                        o.value("apiVersion", "") == "scheduling.k8s.io/v1beta1" &&
                        e.value("reason", "") == "Scheduled");
    }
    if (!event) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(event) << "no Scheduled Event on PodGroup default/train";
  EXPECT_TRUE(scheduler.running()) << scheduler.log();
  api.remove(kUpstreamGroups);
}

}  // namespace
}  // namespace gpuorch
