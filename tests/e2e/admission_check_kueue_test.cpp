// `gpuorch admission-check` next to the real Kueue controller (scripts/k8s-testenv kueue) and
// `gpuorch scheduler` on the real kube-apiserver. Kueue reserves quota by counting: a ClusterQueue
// with 24 GPUs of quota admits a 4-GPU pod although the cluster's GPUs are fragmented (3 free on
// each node), and the pod would then sit ungated, unplaced, holding quota. With the
// AdmissionCheck gpuorch.io/placeable on the ClusterQueue, Kueue asks gpuorch first:
//   - a pod that fits now (2 GPUs) is told Ready, admitted, ungated and bound;
//   - the 4-GPU pod is told Retry (it fits this cluster, not now): Kueue gives its quota back and
//     asks again after requeueAfterSeconds; once room frees up it is told Ready and bound;
//   - a 12-GPU pod (no node has 12) is told Rejected: Kueue deactivates its Workload.
// Kueue's side (gates, Workload conditions) and gpuorch's (the check's state, bindings) are
// asserted on the objects separately, so a failure says whose side broke.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
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
// The AdmissionCheck `gpuorch manifests --kueue` ships (applied below as it makes it).
const std::string kCheck = "gpuorch-placeable";

json queued_pod(const std::string& name, int gpus) {
  json pod = test::gpu_pod(
      name, {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}});
  pod["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "placeable-lq"}};
  return pod;
}

// A pod bound by nodeName, outside Kueue: what fragments the nodes.
json filler(const std::string& name, const std::string& node, int gpus) {
  json pod = test::gpu_pod(name, {{"nvidia.com/gpu", std::to_string(gpus)}});
  pod["spec"]["nodeName"] = node;
  return pod;
}

bool gated(const json& pod) { return !pod["spec"].value("schedulingGates", json::array()).empty(); }
bool bound(const json& pod) { return !test::node_of(pod).empty(); }

// The Workload Kueue made for pod `name` (owner reference), null when none yet.
json workload_of(k8s::ApiClient& api, const std::string& name) {
  const json pod = api.get(kPods + "/" + name);
  const std::string uid = pod["metadata"].value("uid", "");
  const json list = api.get(kKueue + "/namespaces/default/workloads");
  for (const auto& wl : list["items"]) {
    for (const auto& o : wl["metadata"].value("ownerReferences", json::array())) {
      if (o.value("uid", "") == uid) return wl;
    }
  }
  return nullptr;
}

// The entry of our check in the Workload's status; {} when there is none (yet).
json check_of(const json& wl) {
  if (!wl.is_object()) return json::object();
  for (const auto& c : wl.value("/status/admissionChecks"_json_pointer, json::array())) {
    if (c.value("name", "") == kCheck) return c;
  }
  return json::object();
}

// Polls pod `name`'s Workload until pred holds on it; returns the last seen.
json wait_workload(k8s::ApiClient& api, const std::string& name,
                   const std::function<bool(const json&)>& pred, std::chrono::seconds timeout,
                   const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  json wl;
  while (std::chrono::steady_clock::now() < deadline) {
    wl = workload_of(api, name);
    if (wl.is_object() && pred(wl)) return wl;
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << name << "'s Workload never " << what << ": " << wl.dump();
  return wl;
}

TEST(AdmissionCheckKueue,
     KueueAdmitsOnlyWhatTheCoreCanPlaceNowRetriesTheRestAndRejectsTheImpossible) {
  auto& cp = test::ControlPlane::shared();
  cp.start_kueue();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  test::add_gpu_node(api, "ac-a", 8, json::object(), "H100");
  test::add_gpu_node(api, "ac-b", 8, json::object(), "H100");
  api.create(kPods, filler("filler-a", "ac-a", 5));
  api.create(kPods, filler("filler-b", "ac-b", 5));

  // The manifests' own object, so Kueue's validation of it is checked too.
  k8s::ManifestOptions manifest_options;
  manifest_options.kueue = true;
  for (const auto& m : k8s::make_manifests(manifest_options)) {
    if (m.object.value("kind", "") == "AdmissionCheck") {
      api.create(kKueue + "/admissionchecks", json::parse(m.object.dump()));
    }
  }
  api.create(kKueue + "/resourceflavors", {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                                           {"kind", "ResourceFlavor"},
                                           {"metadata", {{"name", "placeable-flavor"}}}});
  api.create(
      kKueue + "/clusterqueues",
      {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
       {"kind", "ClusterQueue"},
       {"metadata", {{"name", "placeable-cq"}}},
       {"spec",
        {{"namespaceSelector", json::object()},
         {"admissionChecksStrategy", {{"admissionChecks", json::array({{{"name", kCheck}}})}}},
         {"resourceGroups",
          json::array(
              {{{"coveredResources", {"cpu", "memory", "nvidia.com/gpu"}},
                {"flavors",
                 json::array(
                     {{{"name", "placeable-flavor"},
                       {"resources", json::array({{{"name", "cpu"}, {"nominalQuota", "64"}},
                                                  {{"name", "memory"}, {"nominalQuota", "256Gi"}},
                                                  {{"name", "nvidia.com/gpu"},
                                                   {"nominalQuota", "24"}}})}}})}}})}}}});
  api.create(kKueue + "/namespaces/default/localqueues",
             {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
              {"kind", "LocalQueue"},
              {"metadata", {{"name", "placeable-lq"}, {"namespace", "default"}}},
              {"spec", {{"clusterQueue", "placeable-cq"}}}});

  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", cp.kubeconfig(), "--policy", "efd", "--listen",
                                    "127.0.0.1:0", "--retry-unschedulable", "5"},
                                   dir.file("scheduler.log"));
  // As its Deployment runs it: one replica holds the Lease and decides.
  test::SchedulerProcess check(
      {"--kubeconfig", cp.kubeconfig(), "--retry-after", "2", "--leader-elect",
       "--leader-elect-namespace", "default", "--listen", "127.0.0.1:0"},
      dir.file("check.log"), "admission-check");
  auto logs = [&] {
    return "\n--- admission-check\n" + check.log() + "\n--- kueue\n" + test::kueue_log(cp, 4000);
  };

  // gpuorch marks the check Active, and only then is the ClusterQueue usable.
  test::wait_for(api, kKueue + "/admissionchecks/" + kCheck,
                 [](const json& ac) { return test::has_condition(ac, "Active"); });
  test::wait_for(api, kKueue + "/clusterqueues/placeable-cq",
                 [](const json& cq) { return test::has_condition(cq, "Active"); });
  // Only the Lease's holder acts: it holds the Lease while it decides.
  const json lease =
      api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/gpuorch-admission-check");
  EXPECT_FALSE(lease["spec"].value("holderIdentity", "").empty()) << lease.dump() << logs();

  // 2 GPUs fit now (3 free on each node): Ready, admitted, ungated, bound.
  api.create(kPods, queued_pod("fits", 2));
  json wl = wait_workload(
      api, "fits", [](const json& w) { return test::has_condition(w, "Admitted"); }, 60s,
      "was admitted");
  EXPECT_EQ(check_of(wl).value("state", ""), "Ready") << wl.dump() << logs();
  EXPECT_NE(check_of(wl).value("message", "").find("placeable now: 1 pods on ac-"),
            std::string::npos)
      << wl.dump();
  const json fits = test::wait_for(api, kPods + "/fits", bound);
  EXPECT_FALSE(gated(fits));

  // 4 GPUs: within quota, but no node has 4 free: Retry, the quota goes back, the pod stays
  // gated and unbound.
  api.create(kPods, queued_pod("later", 4));
  wl = wait_workload(
      api, "later",
      [](const json& w) {
        return check_of(w).value("message", "").starts_with("not placeable now");
      },
      60s, "was told Retry");
  EXPECT_NE(check_of(wl).value("message", "").find("lack"), std::string::npos) << wl.dump();
  std::this_thread::sleep_for(3s);
  wl = workload_of(api, "later");
  EXPECT_FALSE(test::has_condition(wl, "Admitted")) << wl.dump() << logs();
  json later = api.get(kPods + "/later");
  EXPECT_TRUE(gated(later)) << later.dump();
  EXPECT_FALSE(bound(later));

  // 12 GPUs: no node has 12, whatever frees up: Rejected, and Kueue deactivates the Workload
  // (it then resets the check to Pending, "Previously: Rejected", so the verdict itself is read
  // from the controller's log).
  api.create(kPods, queued_pod("never", 12));
  auto evicted_reason = [](const json& w) {
    for (const auto& c : w.value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "Evicted" && c.value("status", "") == "True") {
        return c.value("reason", "");
      }
    }
    return std::string();
  };
  wl = wait_workload(
      api, "never",
      [&](const json& w) { return !w["spec"].value("active", true) && !evicted_reason(w).empty(); },
      60s, "was deactivated by Kueue");
  const std::string evicted = evicted_reason(wl);
  EXPECT_EQ(evicted, "DeactivatedDueToAdmissionCheck") << wl.dump();
  EXPECT_NE(check.log().find(fmt::format("workload default/{}: Rejected does not fit even on the "
                                         "empty cluster",
                                         wl["metadata"].value("name", ""))),
            std::string::npos)
      << logs();
  EXPECT_TRUE(gated(api.get(kPods + "/never")));

  // Room frees up: Kueue asks again after requeueAfterSeconds, the check says Ready, and the
  // 4-GPU pod is admitted and bound.
  api.remove(kPods + "/filler-a?gracePeriodSeconds=0");
  api.remove(kPods + "/filler-b?gracePeriodSeconds=0");
  later = test::wait_for(api, kPods + "/later", bound, 90s);
  EXPECT_FALSE(gated(later)) << later.dump();
  wl = workload_of(api, "later");
  EXPECT_TRUE(test::has_condition(wl, "Admitted")) << wl.dump();
  EXPECT_EQ(check_of(wl).value("state", ""), "Ready") << wl.dump() << logs();
  EXPECT_FALSE(bound(api.get(kPods + "/never")));
  EXPECT_TRUE(check.running()) << logs();
  EXPECT_TRUE(scheduler.running()) << scheduler.log();
  // The verdicts as the controller logged them (docs/kueue.md quotes this run).
  std::istringstream lines(check.log());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("] workload default/") != std::string::npos) std::cout << line << "\n";
  }

  // Objects of this test go, so the next test's ClusterQueues are not asked for this check.
  for (const char* p : {"fits", "later", "never"}) {
    api.remove(kPods + "/" + std::string(p) + "?gracePeriodSeconds=0");
  }
  api.remove(kKueue + "/namespaces/default/localqueues/placeable-lq");
  api.remove(kKueue + "/clusterqueues/placeable-cq");
}

}  // namespace
}  // namespace gpuorch
