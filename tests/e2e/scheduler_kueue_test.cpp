// `gpuorch scheduler` next to the real Kueue controller (sigs.k8s.io/kueue, built and run by
// scripts/k8s-testenv kueue: its CRDs, its webhooks, its manager with the pod integration) on the
// real kube-apiserver. Kueue's contract with a scheduler: its pod webhook gates every pod that
// names a queue (kueue.x-k8s.io/admission, and kueue.x-k8s.io/topology while topology-aware
// scheduling is on), its controller admits a pod's Workload when the ClusterQueue has quota and
// then removes the gates and adds the flavor's nodeLabels as a nodeSelector. gpuorch must place
// exactly the admitted pods, on the nodes the flavor names, and leave the others gated with
// PodScheduled=False reason SchedulingGated.
//
// Kueue's side (gates, admission, ungating, node selector) is checked on the pod and Workload
// objects separately from gpuorch's side (bindings, the SchedulingGated condition), so that a
// failure says whose side broke.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/kueue_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kKueue = test::kKueueApi;
const std::string kAdmissionGate = "kueue.x-k8s.io/admission";
const std::string kQueueLabel = "kueue.x-k8s.io/queue-name";
const std::string kPoolLabel = "gpuorch.io/pool";

void add_node(k8s::ApiClient& api, const std::string& name, int gpus, json labels) {
  test::add_gpu_node(api, name, gpus, std::move(labels), "H100");
}

// A pod of the pod integration: it names the LocalQueue; 2 whole GPUs.
json queued_pod(const std::string& name, const std::string& queue) {
  json pod = test::gpu_pod(name, {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "2"}});
  pod["metadata"]["labels"] = {{kQueueLabel, queue}};
  return pod;
}

std::vector<std::string> gates(const json& pod) {
  std::vector<std::string> names;
  for (const auto& g : pod["spec"].value("schedulingGates", json::array())) {
    names.push_back(g.value("name", ""));
  }
  return names;
}
bool gated(const json& pod) { return !gates(pod).empty(); }
bool has_gate(const json& pod, const std::string& gate) {
  const auto g = gates(pod);
  return std::find(g.begin(), g.end(), gate) != g.end();
}
bool bound(const json& pod) { return !test::node_of(pod).empty(); }
std::string node_selector(const json& pod, const std::string& key) {
  return pod["spec"].value("nodeSelector", json::object()).value(key, "");
}

// The pod's PodScheduled condition as "status/reason" ("False/SchedulingGated"), "" when none.
std::string scheduled_reason(const json& pod) {
  for (const auto& c : pod.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") == "PodScheduled") {
      return c.value("status", "") + "/" + c.value("reason", "");
    }
  }
  return "";
}

std::string names(const std::vector<json>& pods) {
  std::string s;
  for (const auto& p : pods) {
    s += p["metadata"].value("name", "") + "(" + test::node_of(p) + ") ";
  }
  return s;
}

// The pods p0..p(n-1) as they are now, split by whether Kueue has ungated them.
struct Split {
  std::vector<json> ungated;
  std::vector<json> gated;
};
Split split(k8s::ApiClient& api, const std::vector<std::string>& pods) {
  Split s;
  for (const auto& name : pods) {
    json p = api.get(fmt::format("{}/{}", kPods, name));
    (gated(p) ? s.gated : s.ungated).push_back(std::move(p));
  }
  return s;
}

// Polls until pred holds for the split; returns the last one seen.
Split wait_split(k8s::ApiClient& api, const std::vector<std::string>& pods,
                 const std::function<bool(const Split&)>& pred, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Split s;
  while (std::chrono::steady_clock::now() < deadline) {
    s = split(api, pods);
    if (pred(s)) return s;
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "pods never reached the expected state; ungated: " << names(s.ungated)
                << "gated: " << names(s.gated);
  return s;
}

std::size_t admitted_workloads(k8s::ApiClient& api) {
  std::size_t n = 0;
  const json list = api.get(kKueue + "/namespaces/default/workloads");
  for (const auto& wl : list["items"]) {
    if (test::has_condition(wl, "QuotaReserved") && test::has_condition(wl, "Admitted")) ++n;
  }
  return n;
}

TEST(SchedulerKueue, PlacesExactlyWhatTheRealKueueAdmitsOnTheFlavorsNodes) {
  auto& cp = test::ControlPlane::shared();
  cp.start_kueue();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  // Two 8-GPU nodes; only gpu-a is in the pool the flavor names.
  add_node(api, "gpu-a", 8, {{kPoolLabel, "a"}});
  add_node(api, "gpu-b", 8, json::object());

  // A flavor with nodeLabels, a ClusterQueue with 4 GPUs of it, a LocalQueue in default.
  api.create(kKueue + "/resourceflavors", {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                                           {"kind", "ResourceFlavor"},
                                           {"metadata", {{"name", "pool-a"}}},
                                           {"spec", {{"nodeLabels", {{kPoolLabel, "a"}}}}}});
  api.create(
      kKueue + "/clusterqueues",
      {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
       {"kind", "ClusterQueue"},
       {"metadata", {{"name", "gpus"}}},
       {"spec",
        {{"namespaceSelector", json::object()},
         {"resourceGroups",
          json::array({{{"coveredResources", {"cpu", "memory", "nvidia.com/gpu"}},
                        {"flavors",
                         json::array({{{"name", "pool-a"},
                                       {"resources",
                                        json::array({{{"name", "cpu"}, {"nominalQuota", "16"}},
                                                     {{"name", "memory"}, {"nominalQuota", "64Gi"}},
                                                     {{"name", "nvidia.com/gpu"},
                                                      {"nominalQuota", "4"}}})}}})}}})}}}});
  api.create(kKueue + "/namespaces/default/localqueues",
             {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
              {"kind", "LocalQueue"},
              {"metadata", {{"name", "team"}, {"namespace", "default"}}},
              {"spec", {{"clusterQueue", "gpus"}}}});
  test::wait_for(api, kKueue + "/clusterqueues/gpus",
                 [](const json& cq) { return test::has_condition(cq, "Active"); });
  test::wait_for(api, kKueue + "/namespaces/default/localqueues/team",
                 [](const json& lq) { return test::has_condition(lq, "Active"); });

  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", cp.kubeconfig(), "--policy", "efd", "--listen",
                                    "127.0.0.1:0", "--retry-unschedulable", "30"},
                                   dir.file("scheduler.log"));

  // Three pods of 2 GPUs each against a quota of 4: Kueue's webhook gates each one at creation.
  const std::vector<std::string> pods{"train-0", "train-1", "train-2"};
  for (const auto& name : pods) {
    const json created = api.create(kPods, queued_pod(name, "team"));
    EXPECT_TRUE(has_gate(created, kAdmissionGate)) << created.dump();
    EXPECT_EQ(created["metadata"]["labels"].value("kueue.x-k8s.io/managed", ""), "true")
        << created.dump();
  }

  // Kueue's side: two admitted, ungated and given the flavor's node selector; the third stays
  // gated (its Workload waits for quota), and keeps its gate.
  Split s = wait_split(
      api, pods, [](const Split& x) { return x.ungated.size() == 2; }, 60s);
  std::this_thread::sleep_for(2s);
  s = split(api, pods);
  ASSERT_EQ(s.ungated.size(), 2U) << names(s.ungated) << "\n" << test::kueue_log(cp);
  ASSERT_EQ(s.gated.size(), 1U);
  EXPECT_EQ(admitted_workloads(api), 2U);
  for (const auto& p : s.ungated) {
    EXPECT_EQ(node_selector(p, kPoolLabel), "a") << p.dump();
  }
  const std::string waiting = s.gated[0]["metadata"].value("name", "");
  EXPECT_TRUE(has_gate(s.gated[0], kAdmissionGate)) << s.gated[0].dump();

  // gpuorch's side: exactly the two admitted pods bound, on the flavor's node; the gated one
  // unbound, with the condition kube-scheduler would write.
  std::set<std::string> first_bound;
  for (const auto& p : s.ungated) {
    const std::string name = p["metadata"].value("name", "");
    const json b = test::wait_for(api, fmt::format("{}/{}", kPods, name), bound);
    EXPECT_EQ(test::node_of(b), "gpu-a") << scheduler.log();
    first_bound.insert(name);
  }
  const json w = test::wait_for(api, fmt::format("{}/{}", kPods, waiting), [](const json& p) {
    return scheduled_reason(p) == "False/SchedulingGated";
  });
  EXPECT_FALSE(bound(w)) << w.dump();
  EXPECT_TRUE(gated(w)) << w.dump();

  // One admitted pod finishes (no kubelet here: its phase is set as a kubelet would): Kueue
  // releases its quota, admits the waiting pod and ungates it; gpuorch binds it to gpu-a.
  const std::string done = *first_bound.begin();
  api.patch(fmt::format("{}/{}/status", kPods, done), {{"status", {{"phase", "Succeeded"}}}});
  const json admitted = test::wait_for(
      api, fmt::format("{}/{}", kPods, waiting), [](const json& p) { return !gated(p); }, 60s);
  EXPECT_EQ(node_selector(admitted, kPoolLabel), "a") << admitted.dump();
  const json placed = test::wait_for(api, fmt::format("{}/{}", kPods, waiting), bound, 60s);
  EXPECT_EQ(test::node_of(placed), "gpu-a") << scheduler.log();

  // Nothing ever went to the node outside the pool.
  for (const auto& name : pods) {
    EXPECT_NE(test::node_of(api.get(fmt::format("{}/{}", kPods, name))), "gpu-b") << name;
  }
  EXPECT_TRUE(scheduler.running()) << scheduler.log();
}

}  // namespace
}  // namespace gpuorch
