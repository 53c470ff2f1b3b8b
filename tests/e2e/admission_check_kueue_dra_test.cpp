// `gpuorch admission-check` next to the real Kueue controller on a node whose GPUs are DRA devices
// only (docs/kueue.md, "Pods with ResourceClaims"): Kueue counts the pods' CPU and memory, not
// the GPUs their ResourceClaimTemplates ask for, so its quota admits anything; the check places
// each Workload's pods on the devices their templates' claims may get, with the devices a claim
// already holds (allocated here as kube-scheduler leaves it) counted as used:
//   - two GPUs of one NVLink domain fit now (the 3-GPU domain is free): Ready, admitted;
//   - four of one domain fit this node only once the 4-GPU domain's claim goes: Retry;
//   - five of one domain can never be met (no domain has five): Rejected, Kueue deactivates the
//     Workload.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/dra/claim_objects.hpp"
#include "k8s/dra/dra_objects.hpp"
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
const std::string kCheck = "gpuorch-placeable";
const std::string kTemplates =
    k8s::namespaced_path(k8s::dra::kResourceApi, "default", "resourceclaimtemplates");

// A pod of Kueue's pod integration whose GPUs come from template `tmpl`.
json queued_claim_pod(const std::string& name, const std::string& tmpl) {
  json pod = k8s::dra::claim_pod(name, "template:" + tmpl, "gpuorch");
  pod["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "dra-lq"}};
  pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi";
  return pod;
}

// The entry of our check in pod `name`'s Workload, once there is one with a state other than
// Pending (or a deactivated Workload, whose check Kueue resets).
json verdict_of(k8s::ApiClient& api, const std::string& name) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  const std::string uid = api.get(kPods + "/" + name)["metadata"].value("uid", "");
  while (std::chrono::steady_clock::now() < deadline) {
    const json list = api.get(kKueue + "/namespaces/default/workloads");
    for (const auto& wl : list["items"]) {
      bool mine = false;
      for (const auto& o : wl["metadata"].value("ownerReferences", json::array())) {
        mine = mine || o.value("uid", "") == uid;
      }
      if (!mine) continue;
      if (!wl["spec"].value("active", true)) return {{"state", "Deactivated"}, {"workload", wl}};
      for (const auto& c : wl.value("/status/admissionChecks"_json_pointer, json::array())) {
        if (c.value("name", "") == kCheck && c.value("state", "") != "Pending") {
          json out = c;
          out["workload"] = wl;
          return out;
        }
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << name << "'s Workload was never checked";
  return json::object();
}

TEST(AdmissionCheckKueueDra, WorkloadsWithClaimTemplatesAreCheckedAgainstTheDraDevices) {
  auto& cp = test::ControlPlane::shared();
  cp.start_kueue();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(k8s::dra::dgx_node_only(api, k8s::dra_objects::kNode));
  // kube-scheduler's allocation of the 4-GPU domain, as it leaves a claim.
  const json quad = k8s::dra_objects::claim("quad", 4);
  json made = api.create(k8s::dra::kClaims, {{"apiVersion", "resource.k8s.io/v1"},
                                             {"kind", "ResourceClaim"},
                                             {"metadata", {{"name", "quad"}}},
                                             {"spec", quad["spec"]}});
  made["status"] = k8s::dra_objects::allocated(quad, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"},
                                               "elsewhere")["status"];
  api.replace(k8s::dra::kClaims + "/quad/status", made);
  for (const auto& [name, count] : {std::pair{"pair", 2}, {"four", 4}, {"five", 5}}) {
    k8s::dra::drop(api, kTemplates + "/" + name);
    api.create(kTemplates, {{"apiVersion", "resource.k8s.io/v1"},
                            {"kind", "ResourceClaimTemplate"},
                            {"metadata", {{"name", name}}},
                            {"spec", {{"spec", k8s::dra_objects::claim(name, count)["spec"]}}}});
  }

  k8s::ManifestOptions manifest_options;
  manifest_options.kueue = true;
  for (const auto& m : k8s::make_manifests(manifest_options)) {
    if (m.object.value("kind", "") == "AdmissionCheck") {
      try {
        api.create(kKueue + "/admissionchecks", json::parse(m.object.dump()));
      } catch (const k8s::ApiError& e) {
        if (e.status() != 409) throw;
      }
    }
  }
  api.create(kKueue + "/resourceflavors", {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                                           {"kind", "ResourceFlavor"},
                                           {"metadata", {{"name", "dra-flavor"}}}});
  api.create(
      kKueue + "/clusterqueues",
      {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
       {"kind", "ClusterQueue"},
       {"metadata", {{"name", "dra-cq"}}},
       {"spec",
        {{"namespaceSelector", json::object()},
         {"admissionChecksStrategy", {{"admissionChecks", json::array({{{"name", kCheck}}})}}},
         {"resourceGroups",
          json::array(
              {{{"coveredResources", {"cpu", "memory"}},
                {"flavors",
                 json::array({{{"name", "dra-flavor"},
                               {"resources", json::array({{{"name", "cpu"}, {"nominalQuota", "16"}},
                                                          {{"name", "memory"},
                                                           {"nominalQuota", "64Gi"}}})}}})}}})}}}});
  api.create(kKueue + "/namespaces/default/localqueues",
             {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
              {"kind", "LocalQueue"},
              {"metadata", {{"name", "dra-lq"}, {"namespace", "default"}}},
              {"spec", {{"clusterQueue", "dra-cq"}}}});

  test::TempDir dir;
  test::SchedulerProcess check(
      {"--kubeconfig", cp.kubeconfig(), "--retry-after", "2", "--listen", "127.0.0.1:0"},
      dir.file("check.log"), "admission-check");
  auto logs = [&] {
    return "\n--- admission-check\n" + check.log() + "\n--- kueue\n" + test::kueue_log(cp, 4000);
  };
  test::wait_for(api, kKueue + "/clusterqueues/dra-cq",
                 [](const json& cq) { return test::has_condition(cq, "Active"); });

  api.create(kPods, queued_claim_pod("pair", "pair"));
  json v = verdict_of(api, "pair");
  std::cout << "pair: " << v.value("state", "") << " " << v.value("message", "") << "\n";
  EXPECT_EQ(v.value("state", ""), "Ready") << v.dump() << logs();
  EXPECT_EQ(v.value("message", ""), "placeable now: 1 pods on dgx") << logs();

  api.create(kPods, queued_claim_pod("four", "four"));
  v = verdict_of(api, "four");
  std::cout << "four: " << v.value("state", "") << " " << v.value("message", "") << "\n";
  EXPECT_EQ(v.value("state", ""), "Retry") << v.dump() << logs();
  EXPECT_NE(v.value("message", "").find("not placeable now"), std::string::npos) << logs();

  api.create(kPods, queued_claim_pod("five", "five"));
  v = verdict_of(api, "five");
  std::cout << "five: " << v.value("state", "") << "\n";
  // Rejected first; Kueue then deactivates the Workload (spec.active false), a moment later.
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       v.value("state", "") == "Rejected" && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(100ms);
    v = verdict_of(api, "five");
  }
  EXPECT_EQ(v.value("state", ""), "Deactivated") << v.dump() << logs();
  EXPECT_NE(check.log().find("Rejected its claims cannot be met: pod default/pod-five-"),
            std::string::npos)
      << logs();
  EXPECT_TRUE(check.running()) << logs();

  for (const char* p : {"pair", "four", "five"}) {
    k8s::dra::drop(api, kPods + "/" + std::string(p) + "?gracePeriodSeconds=0");
  }
  api.remove(kKueue + "/namespaces/default/localqueues/dra-lq");
  api.remove(kKueue + "/clusterqueues/dra-cq");
}

}  // namespace
}  // namespace gpuorch
