// `gpuorch scheduler --queues` on the real kube-apiserver with the Queue CRD `gpuorch manifests`
// ships: pods name their queue with the label kai.scheduler/queue; the job layer admits a pod only
// while its queue and the queue's parents stay within their limits, and a pod that waits says
// which queue and why; a pod without the label is in the queue 'default'; a pod naming no queue
// waits for it; a pod that goes gives its queue room again; a gang is admitted whole or not.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kai_queue.hpp"
#include "support/kube_objects.hpp"
#include "support/podgroup_crd.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::node_of;
using test::wait_for;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kQueues = "/apis/scheduling.run.ai/v2/queues";
const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";

// The CRDs as `gpuorch manifests` writes them, their APIs served.
void install_crds(k8s::ApiClient& api) {
  test::install_podgroup_crd(api, kGroups);
  test::install_podgroup_crd(api, kQueues);
}

// One node of 8 GPUs.
void add_node(k8s::ApiClient& api) {
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const json res = {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  api.patch("/api/v1/nodes/n1/status", {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

void put_queue(k8s::ApiClient& api, const std::string& name, const std::string& parent, int quota,
               int limit) {
  const json q = test::kai_queue(name, quota, limit, parent);
  try {
    api.remove(kQueues + "/" + name);
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404) throw;
  }
  for (int attempt = 0;; ++attempt) {
    try {
      api.create(kQueues, q);
      return;
    } catch (const k8s::ApiError& e) {
      // The delete just above may still be under way.
      if (e.status() != 409 || attempt > 100) throw;
      std::this_thread::sleep_for(100ms);
    }
  }
}

json pod(const std::string& name, const std::string& queue, const std::string& group = "") {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"labels", json::object()}}},
            {"spec",
             {{"schedulerName", "gpuorch"},
              {"containers", json::array({{{"name", "c"},
                                           {"image", "registry.k8s.io/pause:3.10"},
                                           {"resources",
                                            {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}},
                                             {"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}};
  if (!queue.empty()) p["metadata"]["labels"]["kai.scheduler/queue"] = queue;
  if (!group.empty()) p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  return p;
}

json bound(k8s::ApiClient& api, const std::string& name) {
  return wait_for(api, kPods + "/" + name, [](const json& p) { return !node_of(p).empty(); });
}

json waiting(k8s::ApiClient& api, const std::string& name, const std::string& words) {
  return wait_for(api, kPods + "/" + name, [&](const json& p) {
    return test::unschedulable_message(p).find(words) != std::string::npos;
  });
}

TEST(SchedulerQueues, LimitsHoldPerQueueAndParentAndEachWaitSaysWhy) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  install_crds(api);
  // lab may hold 3 GPUs; team-a under it 2; team-b under it no limit of its own.
  put_queue(api, "lab", "", 2, 3);
  put_queue(api, "team-a", "lab", 1, 2);
  put_queue(api, "team-b", "lab", 1, -1);
  add_node(api);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));

  // team-a: two fit its limit of 2, the third waits and says so.
  for (const char* n : {"a1", "a2"}) {
    api.create(kPods, pod(n, "team-a"));
    ASSERT_EQ(node_of(bound(api, n)), "n1") << scheduler.log();
  }
  api.create(kPods, pod("a3", "team-a"));
  const json a3 = waiting(api, "a3", "would pass its limit");
  EXPECT_TRUE(node_of(a3).empty());
  EXPECT_NE(test::unschedulable_message(a3).find(
                "queue admission: queue team-a (or a parent) would pass its limit"),
            std::string::npos)
      << test::unschedulable_message(a3);
  EXPECT_NE(test::unschedulable_message(a3).find("(over-limit)"), std::string::npos);
  // team-b has no limit, but its parent lab has 3, and team-a holds 2 of them.
  api.create(kPods, pod("b1", "team-b"));
  EXPECT_EQ(node_of(bound(api, "b1")), "n1") << scheduler.log();
  api.create(kPods, pod("b2", "team-b"));
  EXPECT_TRUE(node_of(waiting(api, "b2", "would pass its limit")).empty());
  // Each Queue's status as KAI writes it: what its pods (and its children's) hold, and ask for.
  const auto gpus = [](const json& q, const char* field) {
    return q.value("status", json::object())
        .value(field, json::object())
        .value("nvidia.com/gpu", std::string());
  };
  const json team_a = wait_for(api, kQueues + "/team-a", [&](const json& q) {
    return gpus(q, "allocated") == "2" && gpus(q, "requested") == "3";
  });
  EXPECT_EQ(team_a["status"]["allocated"]["cpu"], "2") << team_a.dump();
  const json lab = wait_for(api, kQueues + "/lab", [&](const json& q) {
    return gpus(q, "allocated") == "3" && gpus(q, "requested") == "5";
  });
  // No label: the queue 'default', outside lab; a queue that does not exist: waits for it.
  api.create(kPods, pod("d1", ""));
  EXPECT_EQ(node_of(bound(api, "d1")), "n1") << scheduler.log();
  api.create(kPods, pod("x1", "nope"));
  EXPECT_TRUE(node_of(waiting(api, "x1", "queue 'nope' (label kai.scheduler/queue) is not a leaf"))
                  .empty());
  // A team-a pod goes: lab and team-a have room for one again, and the first waiting pod of
  // the two takes it; the other still waits.
  api.remove(kPods + "/a1?gracePeriodSeconds=0");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  int placed = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    placed = int(!node_of(api.get(kPods + "/a3")).empty()) +
             int(!node_of(api.get(kPods + "/b2")).empty());
    if (placed > 0) break;
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);  // long enough for a second bind, if one were made
  placed =
      int(!node_of(api.get(kPods + "/a3")).empty()) + int(!node_of(api.get(kPods + "/b2")).empty());
  EXPECT_EQ(placed, 1) << scheduler.log();
  // The queue's limit raised, with room in lab: x1's queue appears and x1 goes.
  put_queue(api, "nope", "", 0, -1);
  EXPECT_EQ(node_of(bound(api, "x1")), "n1") << scheduler.log();
}

TEST(SchedulerQueues, AGangIsAdmittedWholeOrWaitsWhole) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  install_crds(api);
  put_queue(api, "small", "", 0, 2);
  add_node(api);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  // A gang of 3 in a queue limited to 2: none of it binds, each member says why.
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "g3"}}},
                       {"spec", {{"minMember", 3}}}});
  for (int i = 0; i < 3; ++i) api.create(kPods, pod(fmt::format("g3-{}", i), "small", "g3"));
  for (int i = 0; i < 3; ++i) {
    const json p = waiting(api, fmt::format("g3-{}", i), "would pass its limit");
    EXPECT_TRUE(node_of(p).empty());
    EXPECT_NE(test::unschedulable_message(p).find("cannot be placed whole"), std::string::npos);
  }
  // A gang of 2 fits the limit and binds whole.
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "g2"}}},
                       {"spec", {{"minMember", 2}}}});
  for (int i = 0; i < 2; ++i) api.create(kPods, pod(fmt::format("g2-{}", i), "small", "g2"));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(node_of(bound(api, fmt::format("g2-{}", i))), "n1") << scheduler.log();
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(node_of(api.get(kPods + fmt::format("/g3-{}", i))).empty());
  }
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

}  // namespace
}  // namespace gpuorch
