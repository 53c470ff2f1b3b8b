// gpuorch scheduler allocating ResourceClaims on the real API server (docs/dra.md, "The scheduler
// side"), on the driver's slice of the recorded DGX H100 cut into two NVLink domains (GPUs 0-3,
// and 4-6 with GPU 7's MIG instances): a claim for 2 GPUs of one domain gets two NVLink-connected
// GPUs, written to the claim's status (allocation, reservedFor) and bound on that node, in the
// domain that keeps the 4-GPU one whole; kube-scheduler's allocator gives the same claim a valid
// set too (first fit); claims that cannot be met are explained; no device is given twice; a
// claim is released when its pod goes; a template's claim is used once it exists.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/dra/slice_publisher.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/dra/api_driver.hpp"
#include "k8s/dra/claim_objects.hpp"
#include "k8s/dra/dra_node.hpp"
#include "k8s/k8s_support.hpp"
#include "support/admission_policy.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "dgx-claims";

TEST(DraGpuorchScheduler, AllocatesConnectedGpusExplainsNeverSharesAndReleases) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  const auto started = std::chrono::steady_clock::now();

  // 1. Two GPUs of one NVLink domain: the picker takes them from the 3-GPU domain (4-6), so the
  // 4-GPU domain stays whole; the claim says so before the pod is bound there.
  api.create(kClaims, gpu_claim("default", "pair", 2, "gpu.gpuorch.io/nvlinkDomain"));
  api.create(test::kDefaultPods, claim_pod("pair", "pair", "gpuorch"));
  const json pair_pod = test::wait_for(api, test::kDefaultPods + "/pair",
                                       [](const json& p) { return test::node_of(p) == kNode; });
  const json pair = api.get(kClaims + "/pair");
  const std::set<std::string> pair_devices = devices_of(pair);
  std::cout << "gpuorch scheduler: pair -> " << fmt::format("{}", fmt::join(pair_devices, ","))
            << " after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
            << " s\n";
  ASSERT_EQ(pair_devices.size(), 2U) << pair.dump();
  EXPECT_TRUE(one_domain(pair_devices));
  EXPECT_EQ(domain_of(*pair_devices.begin()), 4) << "the 4-GPU domain was broken";
  EXPECT_EQ(pair["status"]["reservedFor"][0]["uid"], pair_pod["metadata"]["uid"]);
  EXPECT_EQ(pair["status"]["reservedFor"][0]["resource"], "pods");
  EXPECT_EQ(pair["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
                ["values"][0],
            kNode);
  for (const auto& r : pair["status"]["allocation"]["devices"]["results"]) {
    EXPECT_EQ(r["request"], "gpus");
    EXPECT_EQ(r["driver"], kDriverName);
    EXPECT_EQ(r["pool"], kNode);
  }
  // The pod carries no device plugin annotation: its GPUs are the claim's.
  EXPECT_FALSE(pair_pod["metadata"].contains("annotations") &&
               pair_pod["metadata"]["annotations"].contains("gpuorch.io/gpus"));

  // 2. Four of one domain still fit whole.
  api.create(kClaims, gpu_claim("default", "quad", 4, "gpu.gpuorch.io/nvlinkDomain"));
  api.create(test::kDefaultPods, claim_pod("quad", "quad", "gpuorch"));
  test::wait_for(api, test::kDefaultPods + "/quad",
                 [](const json& p) { return test::node_of(p) == kNode; });
  const std::set<std::string> quad = devices_of(api.get(kClaims + "/quad"));
  EXPECT_EQ(quad, (std::set<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}));

  // 3. What cannot be met says why: five of one domain, a selector outside the subset; a pair
  // while only GPU 6 is free waits.
  api.create(kClaims, gpu_claim("default", "five", 5, "gpu.gpuorch.io/nvlinkDomain"));
  api.create(test::kDefaultPods, claim_pod("five", "five", "gpuorch"));
  const std::string regex = R"(device.attributes["gpu.gpuorch.io"].productName.matches("H100.*"))";
  json odd = gpu_claim("default", "regex", 1, "gpu.gpuorch.io/nvlinkDomain");
  odd["spec"]["devices"]["requests"][0]["exactly"]["selectors"] =
      json::array({{{"cel", {{"expression", regex}}}}});
  api.create(kClaims, odd);
  api.create(test::kDefaultPods, claim_pod("regex", "regex", "gpuorch"));
  api.create(kClaims, gpu_claim("default", "later", 2, "gpu.gpuorch.io/nvlinkDomain"));
  api.create(test::kDefaultPods, claim_pod("later", "later", "gpuorch"));
  auto message = [&](const std::string& name) {
    const json p = test::wait_for(api, test::kDefaultPods + "/" + name, [](const json& q) {
      return !test::unschedulable_message(q).empty();
    });
    EXPECT_EQ(test::node_of(p), "") << name;
    std::cout << name << ": " << test::unschedulable_message(p) << "\n";
    return test::unschedulable_message(p);
  };
  EXPECT_NE(message("five").find("matchAttribute gpu.gpuorch.io/nvlinkDomain cannot be satisfied "
                                 "with 5 devices on any node: at most 4"),
            std::string::npos);
  EXPECT_NE(message("regex").find("`" + regex + "` is outside the CEL subset"), std::string::npos);
  const std::string later = message("later");
  EXPECT_NE(later.find("ResourceClaims default/later: 0/1 nodes are available: 1 lack 2 free"),
            std::string::npos)
      << later;
  EXPECT_NE(later.find("Waiting"), std::string::npos) << later;
  EXPECT_TRUE(devices_of(api.get(kClaims + "/later")).empty());

  // 4. The pair's pod goes: its claim is released (nobody else reserves it, so deallocated), and
  // the waiting pair takes GPUs of the freed domain, none of the quad's.
  drop(api, test::kDefaultPods + "/pair?gracePeriodSeconds=0");
  const json released = test::wait_for(api, kClaims + "/pair", [](const json& c) {
    return !c.contains("status") || !c["status"].contains("allocation");
  });
  EXPECT_FALSE(released.contains("status") && released["status"].contains("reservedFor"));
  test::wait_for(
      api, test::kDefaultPods + "/later", [](const json& p) { return test::node_of(p) == kNode; },
      30s);
  const std::set<std::string> later_devices = devices_of(api.get(kClaims + "/later"));
  EXPECT_EQ(later_devices.size(), 2U);
  EXPECT_TRUE(one_domain(later_devices));
  for (const auto& d : later_devices) EXPECT_FALSE(quad.contains(d)) << d << " given twice";

  // 5. A template's claim: waits until kube-controller-manager's resourceclaim controller would
  // have made it (done here as it does: owned by the pod, named in the pod's status), then used.
  json templated = claim_pod("templated", "", "gpuorch");
  templated["spec"]["resourceClaims"][0].erase("resourceClaimName");
  templated["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "one-gpu";
  const json t = api.create(test::kDefaultPods, templated);
  EXPECT_NE(message("templated").find("has not been made yet"), std::string::npos);
  json made = gpu_claim("default", "templated-gpus-x1", 1, "gpu.gpuorch.io/nvlinkDomain");
  made["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                      {"kind", "Pod"},
                                                      {"name", "templated"},
                                                      {"uid", t["metadata"]["uid"]},
                                                      {"controller", true}}});
  api.create(kClaims, made);
  api.patch(test::kDefaultPods + "/templated/status",
            {{"status",
              {{"resourceClaimStatuses",
                json::array({{{"name", "gpus"}, {"resourceClaimName", "templated-gpus-x1"}}})}}}});
  test::wait_for(
      api, test::kDefaultPods + "/templated",
      [](const json& p) { return test::node_of(p) == kNode; }, 30s);
  const std::set<std::string> last = devices_of(api.get(kClaims + "/templated-gpus-x1"));
  ASSERT_EQ(last.size(), 1U);
  EXPECT_FALSE(quad.contains(*last.begin()) || later_devices.contains(*last.begin()));
  scheduler.stop();

  // 6. The same 2-GPU claim through kube-scheduler's own allocator, on the node emptied: a valid
  // set too (one domain), by first fit.
  for (const char* p : {"quad", "later", "templated", "five", "regex"}) {
    drop(api, test::kDefaultPods + "/" + std::string(p) + "?gracePeriodSeconds=0");
  }
  drop_claims(api);
  plane.start_kube_scheduler();
  api.create(kClaims, gpu_claim("default", "kube-pair", 2, "gpu.gpuorch.io/nvlinkDomain"));
  json kube_pod = claim_pod("kube-pair", "kube-pair", "");
  kube_pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", kNode}};
  api.create(test::kDefaultPods, kube_pod);
  test::wait_for(api, test::kDefaultPods + "/kube-pair",
                 [](const json& p) { return test::node_of(p) == kNode; });
  const std::set<std::string> kube = devices_of(api.get(kClaims + "/kube-pair"));
  std::cout << "kube-scheduler: pair -> " << fmt::format("{}", fmt::join(kube, ",")) << "\n";
  EXPECT_EQ(kube.size(), 2U);
  EXPECT_TRUE(one_domain(kube));
  drop(api, test::kDefaultPods + "/kube-pair?gracePeriodSeconds=0");
  drop_claims(api);
}

// A claim's status write the API server refuses (here a ValidatingAdmissionPolicy on
// resourceclaims/status; a conflict with another scheduler goes the same way) binds nothing: the
// pod shows why, what was assumed is given back, the pod's other claim written before is taken
// back (not allocated, not reserved), and it is retried with backoff until the write is taken,
// then bound with both claims allocated.
TEST(DraGpuorchScheduler, ARefusedClaimWriteBindsNothingAndIsRetried) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::deny_unless(api, "refuse-claim", "resource.k8s.io", "resourceclaims/status", "UPDATE",
                    "object.metadata.name != 'refused'", "claim 'refused' may not be written");
  api.create(kClaims, gpu_claim("default", "refused", 1, "gpu.gpuorch.io/nvlinkDomain"));
  // The policy takes a moment to load: probe with a status write that changes nothing.
  bool loaded = false;
  for (int i = 0; i < 150 && !loaded; ++i) {
    try {
      api.replace(kClaims + "/refused/status", api.get(kClaims + "/refused"));
    } catch (const ApiError& e) {
      loaded = std::string(e.what()).find("may not be written") != std::string::npos;
    }
    if (!loaded) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(loaded) << "the ValidatingAdmissionPolicy never took effect";

  api.create(kClaims, gpu_claim("default", "taken", 1, "gpu.gpuorch.io/nvlinkDomain"));

  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  api.create(test::kDefaultPods, pod_with_claims("refused", {"taken", "refused"}, "gpuorch"));
  const json p = test::wait_for(api, test::kDefaultPods + "/refused", [](const json& q) {
    return test::unscheduled_reason(q) == "SchedulerError";
  });
  const std::string why = test::unschedulable_message(p);
  std::cout << "refused: " << why << "\n";
  EXPECT_NE(why.find("ResourceClaim default/refused: status write refused"), std::string::npos)
      << why;
  EXPECT_NE(why.find("may not be written"), std::string::npos) << why;
  EXPECT_EQ(test::node_of(api.get(test::kDefaultPods + "/refused")), "");
  EXPECT_TRUE(devices_of(api.get(kClaims + "/refused")).empty());
  // The claim written before the refused one is taken back: neither allocated nor reserved.
  const json taken = test::wait_for(api, kClaims + "/taken", [](const json& c) {
    return !c.contains("status") || !c["status"].contains("reservedFor");
  });
  EXPECT_TRUE(devices_of(taken).empty()) << taken.dump();
  // Nothing it assumed is kept: all seven GPUs go to another pod meanwhile.
  json all = gpu_claim("default", "all", 1, "gpu.gpuorch.io/nvlinkDomain");
  all["spec"]["devices"]["requests"][0]["exactly"] = {{"deviceClassName", kDriverName},
                                                      {"allocationMode", "All"}};
  all["spec"]["devices"].erase("constraints");
  api.create(kClaims, all);
  api.create(test::kDefaultPods, claim_pod("all", "all", "gpuorch"));
  test::wait_for(api, test::kDefaultPods + "/all",
                 [](const json& q) { return test::node_of(q) == kNode; });
  EXPECT_EQ(devices_of(api.get(kClaims + "/all")).size(), 7U);
  // The refusal lifted and the seven GPUs given back: bound, with its claim allocated.
  test::drop_denial(api, "refuse-claim");
  drop(api, test::kDefaultPods + "/all?gracePeriodSeconds=0");
  test::wait_for(
      api, test::kDefaultPods + "/refused", [](const json& q) { return test::node_of(q) == kNode; },
      40s);
  const std::set<std::string> refused_devices = devices_of(api.get(kClaims + "/refused"));
  const std::set<std::string> taken_devices = devices_of(api.get(kClaims + "/taken"));
  EXPECT_EQ(refused_devices.size(), 1U);
  EXPECT_EQ(taken_devices.size(), 1U);
  EXPECT_NE(refused_devices, taken_devices);
  scheduler.stop();
  drop(api, test::kDefaultPods + "/refused?gracePeriodSeconds=0");
  drop_claims(api);
}

// KEP-5004's bridge: a DeviceClass maps nvidia.com/gpu to the DGX's DRA GPUs (the node advertises
// none); a pod asking nvidia.com/gpu: 2 without a claim is bound by gpuorch scheduler with the
// claim kube-scheduler would make (owned by the pod, annotated, allocated on the node, reserved
// for the pod) named in the pod's status.extendedResourceClaimStatus, which the kubelet's DRA
// manager reads; a pod asking the class by its implicit name gets another GPU, never one of those.
TEST(DraGpuorchScheduler, AGpuResourceMappedToDraDevicesGetsTheBridgeClaim) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  const std::string cls = std::string(kResourceApi) + "/deviceclasses/" + kDriverName;
  api.patch(cls, {{"spec", {{"extendedResourceName", "nvidia.com/gpu"}}}});
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  auto resource_pod = [](const std::string& name, const std::string& resource, int n) {
    const json res = {{"cpu", "1"}, {resource, std::to_string(n)}};
    return json{
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec",
         {{"schedulerName", "gpuorch"},
          {"containers", json::array({{{"name", "main"},
                                       {"image", "registry.k8s.io/pause:3.10"},
                                       {"resources", {{"requests", res}, {"limits", res}}}}})}}}};
  };
  api.create(test::kDefaultPods, resource_pod("bridged", "nvidia.com/gpu", 2));
  const json pod = test::wait_for(api, test::kDefaultPods + "/bridged",
                                  [](const json& p) { return test::node_of(p) == kNode; });
  const json& status = pod["status"]["extendedResourceClaimStatus"];
  ASSERT_TRUE(status.is_object()) << pod["status"].dump();
  ASSERT_EQ(status["requestMappings"].size(), 1U) << status.dump();
  EXPECT_EQ(status["requestMappings"][0]["containerName"], "main");
  EXPECT_EQ(status["requestMappings"][0]["resourceName"], "nvidia.com/gpu");
  const std::string request = status["requestMappings"][0]["requestName"];
  const json claim = api.get(kClaims + "/" + status["resourceClaimName"].get<std::string>());
  EXPECT_EQ(claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"],
            "true");
  EXPECT_EQ(claim["metadata"]["ownerReferences"][0]["uid"], pod["metadata"]["uid"]);
  EXPECT_EQ(claim["status"]["reservedFor"][0]["uid"], pod["metadata"]["uid"]);
  const std::set<std::string> got = devices_of(claim);
  EXPECT_EQ(got.size(), 2U) << claim.dump();
  for (const auto& r : claim["status"]["allocation"]["devices"]["results"]) {
    EXPECT_EQ(r["request"], request);
    EXPECT_EQ(r["pool"], kNode);
  }
  std::cout << "bridge: nvidia.com/gpu: 2 -> " << fmt::format("{}", fmt::join(got, ","))
            << " through " << claim["metadata"]["name"].get<std::string>() << "\n";

  // The class by its implicit name: one more GPU, none of the first pod's.
  api.create(test::kDefaultPods,
             resource_pod("implicit",
                          std::string("deviceclass.resource.kubernetes.io/") + kDriverName, 1));
  const json second = test::wait_for(api, test::kDefaultPods + "/implicit",
                                     [](const json& p) { return test::node_of(p) == kNode; });
  ASSERT_TRUE(second["status"].contains("extendedResourceClaimStatus")) << second.dump();
  const json other = api.get(
      kClaims + "/" +
      second["status"]["extendedResourceClaimStatus"]["resourceClaimName"].get<std::string>());
  const std::set<std::string> one = devices_of(other);
  ASSERT_EQ(one.size(), 1U) << other.dump();
  EXPECT_FALSE(got.contains(*one.begin()));
  scheduler.stop();
  drop(api, test::kDefaultPods + "/bridged?gracePeriodSeconds=0");
  drop(api, test::kDefaultPods + "/implicit?gracePeriodSeconds=0");
  drop_claims(api);
  api.patch(cls, {{"spec", {{"extendedResourceName", nullptr}}}});
}

// The binding itself refused after the pod's claim was written (a ValidatingAdmissionPolicy on
// pods/binding; an admission webhook or a node gone does the same): the claim is taken back,
// neither allocated nor reserved for a pod that is not bound, as kube-scheduler's Unreserve does;
// once bindings are taken, the pod is bound with its claim allocated.
TEST(DraGpuorchScheduler, ARefusedBindingTakesTheClaimBack) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::deny_unless(api, "refuse-binding", "", "pods/binding", "CREATE",
                    "!object.metadata.name.startsWith('unbindable')",
                    "pod 'unbindable' may not be bound");
  // The policy takes a moment to load: probe with a Binding of a pod that does not exist (the
  // policy answers before storage does).
  const json probe = {{"apiVersion", "v1"},
                      {"kind", "Binding"},
                      {"metadata", {{"name", "unbindable-probe"}}},
                      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", kNode}}}};
  bool loaded = false;
  for (int i = 0; i < 150 && !loaded; ++i) {
    try {
      api.create(test::kDefaultPods + "/unbindable-probe/binding", probe);
    } catch (const ApiError& e) {
      loaded = std::string(e.what()).find("may not be bound") != std::string::npos;
    }
    if (!loaded) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(loaded) << "the ValidatingAdmissionPolicy never took effect";
  api.create(kClaims, gpu_claim("default", "unbindable", 2, "gpu.gpuorch.io/nvlinkDomain"));
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  api.create(test::kDefaultPods, claim_pod("unbindable", "unbindable", "gpuorch"));
  const json p = test::wait_for(api, test::kDefaultPods + "/unbindable", [](const json& q) {
    return test::unscheduled_reason(q) == "SchedulerError" || !test::node_of(q).empty();
  });
  ASSERT_EQ(test::node_of(p), "");
  const std::string why = test::unschedulable_message(p);
  std::cout << "refused binding: " << why << "\n";
  EXPECT_NE(why.find("may not be bound"), std::string::npos) << why;
  const json claim = test::wait_for(api, kClaims + "/unbindable", [](const json& c) {
    return !c.contains("status") || !c["status"].contains("reservedFor");
  });
  EXPECT_TRUE(devices_of(claim).empty()) << claim.dump();
  test::drop_denial(api, "refuse-binding");
  test::wait_for(
      api, test::kDefaultPods + "/unbindable",
      [](const json& q) { return test::node_of(q) == kNode; }, 40s);
  EXPECT_EQ(devices_of(api.get(kClaims + "/unbindable")).size(), 2U);
  scheduler.stop();
  drop(api, test::kDefaultPods + "/unbindable?gracePeriodSeconds=0");
  drop_claims(api);
}

}  // namespace
}  // namespace gpuorch::k8s::dra
