// gpuorch scheduler placing pods with ResourceClaims together on the real API server (docs/dra.md,
// "Claims in gangs and queues"), on the driver's slice of the recorded DGX H100 cut into two
// NVLink domains (GPUs 0-3, 4-6): a gang of two pods whose claims come from a template waits
// until every member's claim exists, then is bound whole, each claim allocated two
// NVLink-connected GPUs, none twice; a gang that cannot be placed whole allocates nothing; a
// claim named by two members is refused by name; a gang asking nvidia.com/gpu through KEP-5004's
// bridge is bound with its claims; a claim write refused binds no member and takes back the
// others'. With --queues, a claim pod's GPUs count against its queue's limit, and a queue below
// its quota takes back a borrower's claim pod, bound on the devices once the borrower's claim is
// deallocated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/dra/claim_objects.hpp"
#include "support/admission_policy.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kai_queue.hpp"
#include "support/kube_objects.hpp"
#include "support/podgroup_crd.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
const std::string kQueues = "/apis/scheduling.run.ai/v2/queues";

json in_gang(json pod, const std::string& group) {
  pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  return pod;
}

void put_group(ApiClient& api, const std::string& name, int min_member) {
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", name}}},
                       {"spec", {{"minMember", min_member}}}});
}

json bound(ApiClient& api, const std::string& name) {
  return test::wait_for(api, test::kDefaultPods + "/" + name,
                        [](const json& p) { return !test::node_of(p).empty(); });
}

std::string waits_with(ApiClient& api, const std::string& name, const std::string& words) {
  const json p = test::wait_for(api, test::kDefaultPods + "/" + name, [&](const json& q) {
    return test::unschedulable_message(q).find(words) != std::string::npos;
  });
  EXPECT_EQ(test::node_of(p), "") << name;
  return test::unschedulable_message(p);
}

TEST(DraGpuorchSchedulerJobs, AGangWithClaimTemplatesIsBoundWholeOnConnectedPairs) {
  constexpr const char* kNode = "dgx-gang";
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::install_podgroup_crd(api, kGroups);
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));

  // 1. Two members, each with a claim from template "pair" (2 GPUs of one NVLink domain).
  put_group(api, "train", 2);
  const json pair = gpu_claim("default", "", 2, "gpu.gpuorch.io/nvlinkDomain");
  const json t0 = api.create(test::kDefaultPods,
                             in_gang(claim_pod("train-0", "template:pair", "gpuorch"), "train"));
  const json t1 = api.create(test::kDefaultPods,
                             in_gang(claim_pod("train-1", "template:pair", "gpuorch"), "train"));
  waits_with(api, "train-0", "has not been made yet");
  // One member's claim made: the gang still waits for the other's, nothing is allocated.
  make_template_claim(api, t0, pair, "train-0-gpus");
  const std::string one = waits_with(api, "train-0", "member default/train-1");
  std::cout << "train-0: " << one << "\n";
  EXPECT_NE(one.find("has not been made yet"), std::string::npos) << one;
  EXPECT_TRUE(devices_of(api.get(kClaims + "/train-0-gpus")).empty());
  make_template_claim(api, t1, pair, "train-1-gpus");
  std::set<std::string> used;
  for (const char* name : {"train-0", "train-1"}) {
    const json p = bound(api, name);
    EXPECT_EQ(test::node_of(p), kNode) << scheduler.log();
    const json claim = api.get(kClaims + "/" + std::string(name) + "-gpus");
    const std::set<std::string> got = devices_of(claim);
    std::cout << name << " -> " << fmt::format("{}", fmt::join(got, ",")) << "\n";
    ASSERT_EQ(got.size(), 2U) << claim.dump();
    EXPECT_TRUE(one_domain(got)) << "not an NVLink-connected pair";
    EXPECT_EQ(claim["status"]["reservedFor"][0]["uid"], p["metadata"]["uid"]);
    for (const auto& d : got) EXPECT_TRUE(used.insert(d).second) << d << " given twice";
  }
  const json group = test::wait_for(api, kGroups + "/train", [](const json& g) {
    return g.value("/status/phase"_json_pointer, std::string()) == "Scheduled";
  });
  EXPECT_EQ(group["status"].value("scheduled", -1), 2);

  // 2. Two members of 4 GPUs of one domain each: 3 GPUs are left, so none is bound and no claim
  // allocated.
  put_group(api, "big", 2);
  const json four = gpu_claim("default", "", 4, "gpu.gpuorch.io/nvlinkDomain");
  for (int i = 0; i < 2; ++i) {
    const std::string name = fmt::format("big-{}", i);
    const json p =
        api.create(test::kDefaultPods, in_gang(claim_pod(name, "template:four", "gpuorch"), "big"));
    make_template_claim(api, p, four, name + "-gpus");
  }
  const std::string whole = waits_with(api, "big-1", "cannot be placed whole");
  std::cout << "big-1: " << whole << "\n";
  EXPECT_EQ(test::node_of(api.get(test::kDefaultPods + "/big-0")), "");
  EXPECT_TRUE(devices_of(api.get(kClaims + "/big-0-gpus")).empty());
  EXPECT_TRUE(devices_of(api.get(kClaims + "/big-1-gpus")).empty());

  // 3. One claim named by both members, not allocated: refused by name.
  put_group(api, "shared", 2);
  api.create(kClaims, gpu_claim("default", "one", 1, "gpu.gpuorch.io/nvlinkDomain"));
  for (const char* name : {"shared-0", "shared-1"}) {
    api.create(test::kDefaultPods, in_gang(claim_pod(name, "one", "gpuorch"), "shared"));
  }
  const std::string shared = waits_with(api, "shared-0", "is named by 2 members");
  std::cout << "shared-0: " << shared << "\n";
  EXPECT_NE(shared.find("ResourceClaim default/one"), std::string::npos) << shared;
  EXPECT_TRUE(devices_of(api.get(kClaims + "/one")).empty());

  // 4. KEP-5004's bridge in a gang: nvidia.com/gpu: 1 each, mapped to the DGX's DRA GPUs; both
  // bound with a claim of their own on GPUs nobody else has.
  for (const char* p : {"big-0", "big-1", "shared-0", "shared-1"}) {
    drop(api, test::kDefaultPods + "/" + std::string(p) + "?gracePeriodSeconds=0");
  }
  const std::string cls = std::string(kResourceApi) + "/deviceclasses/" + kDriverName;
  api.patch(cls, {{"spec", {{"extendedResourceName", "nvidia.com/gpu"}}}});
  put_group(api, "bridged", 2);
  for (const char* name : {"bridged-0", "bridged-1"}) {
    const json res = {{"cpu", "1"}, {"nvidia.com/gpu", "1"}};
    api.create(test::kDefaultPods,
               in_gang({{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", "default"}}},
                        {"spec",
                         {{"schedulerName", "gpuorch"},
                          {"containers",
                           json::array({{{"name", "main"},
                                         {"image", "registry.k8s.io/pause:3.10"},
                                         {"resources", {{"requests", res}, {"limits", res}}}}})}}}},
                       "bridged"));
  }
  for (const char* name : {"bridged-0", "bridged-1"}) {
    const json p = bound(api, name);
    ASSERT_TRUE(p["status"].contains("extendedResourceClaimStatus")) << p.dump();
    const json claim =
        api.get(kClaims + "/" +
                p["status"]["extendedResourceClaimStatus"]["resourceClaimName"].get<std::string>());
    const std::set<std::string> got = devices_of(claim);
    ASSERT_EQ(got.size(), 1U) << claim.dump();
    EXPECT_TRUE(used.insert(*got.begin()).second) << *got.begin() << " given twice";
    EXPECT_EQ(claim["status"]["reservedFor"][0]["uid"], p["metadata"]["uid"]);
  }
  if (HasFailure()) std::cout << "--- scheduler\n" << scheduler.log() << "\n";
  scheduler.stop();
  api.patch(cls, {{"spec", {{"extendedResourceName", nullptr}}}});
  test::clear_cluster(api);
  drop_claims(api);
}

// One member's claim write refused (a ValidatingAdmissionPolicy on resourceclaims/status, as a
// conflict with another scheduler would be): no member is bound, the claim already written for the
// other member is taken back (deallocated, reserved for nobody), and once the refusal is lifted
// the gang is bound whole after its backoff.
TEST(DraGpuorchSchedulerJobs, ARefusedClaimWriteInAGangBindsNoMemberAndTakesBackTheOthers) {
  constexpr const char* kNode = "dgx-gang-refused";
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::install_podgroup_crd(api, kGroups);
  test::deny_unless(api, "refuse-gang-claim", "resource.k8s.io", "resourceclaims/status", "UPDATE",
                    "!(object.metadata.name in ['pair-1', 'probe']) || "
                    "!has(object.status) || !has(object.status.allocation)",
                    "claims pair-1 and probe may not be allocated");
  const std::string domain = "gpu.gpuorch.io/nvlinkDomain";
  for (const char* c : {"pair-0", "pair-1", "probe"})
    api.create(kClaims, gpu_claim("default", c, 2, domain));
  // The policy takes a moment to load: probe, on a claim no pod uses, with an allocation it
  // refuses.
  bool loaded = false;
  for (int i = 0; i < 150 && !loaded; ++i) {
    json probe = api.get(kClaims + "/probe");
    probe["status"]["allocation"] = {{"devices", {{"results", json::array()}}}};
    try {
      api.replace(kClaims + "/probe/status", probe);
    } catch (const ApiError& e) {
      loaded = std::string(e.what()).find("may not be allocated") != std::string::npos;
    }
    if (!loaded) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(loaded) << "the ValidatingAdmissionPolicy never took effect";
  ASSERT_TRUE(devices_of(api.get(kClaims + "/pair-1")).empty());

  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));
  put_group(api, "pair", 2);
  for (const char* name : {"pair-0", "pair-1"}) {
    api.create(test::kDefaultPods, in_gang(claim_pod(name, name, "gpuorch"), "pair"));
  }
  const json p = test::wait_for(api, test::kDefaultPods + "/pair-0", [](const json& q) {
    return test::unscheduled_reason(q) == "SchedulerError";
  });
  const std::string why = test::unschedulable_message(p);
  std::cout << "pair-0: " << why << "\n";
  EXPECT_NE(why.find("ResourceClaim default/pair-1 of member default/pair-1: status write refused"),
            std::string::npos)
      << why;
  for (const char* name : {"pair-0", "pair-1"}) {
    EXPECT_EQ(test::node_of(api.get(test::kDefaultPods + "/" + name)), "") << name;
  }
  // pair-0's claim was written first: taken back.
  const json back = test::wait_for(api, kClaims + "/pair-0", [](const json& c) {
    return devices_of(c).empty() &&
           c.value("/status/reservedFor"_json_pointer, json::array()).empty();
  });
  EXPECT_TRUE(devices_of(back).empty()) << back.dump();

  test::drop_denial(api, "refuse-gang-claim");
  for (const char* name : {"pair-0", "pair-1"}) {
    EXPECT_EQ(test::node_of(test::wait_for(
                  api, test::kDefaultPods + "/" + name,
                  [](const json& q) { return !test::node_of(q).empty(); }, 40s)),
              kNode)
        << scheduler.log();
    EXPECT_EQ(devices_of(api.get(kClaims + "/" + std::string(name))).size(), 2U) << name;
  }
  if (HasFailure()) std::cout << "--- scheduler\n" << scheduler.log() << "\n";
  scheduler.stop();
  test::clear_cluster(api);
  drop_claims(api);
}

TEST(DraGpuorchSchedulerJobs, UnderQueuesAClaimPodCountsInItsQueueAndReclaimsFromABorrower) {
  constexpr const char* kNode = "dgx-queues";
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::install_podgroup_crd(api, kGroups);
  test::install_podgroup_crd(api, kQueues);
  drop(api, kQueues);
  test::wait_for(api, kQueues, [](const json& l) { return l["items"].empty(); });
  api.create(kQueues, test::kai_queue("capped", 2, 2));
  // a may borrow, but its fair share is its quota (no over-quota weight): what it borrows is
  // reclaimable whatever else the node holds.
  json a = test::kai_queue("a", 1, -1);
  a["spec"]["resources"]["gpu"]["overQuotaWeight"] = 0;
  api.create(kQueues, a);
  api.create(kQueues, test::kai_queue("b", 6, -1));
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", plane.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  auto queued = [](json pod, const std::string& queue) {
    pod["metadata"]["labels"]["kai.scheduler/queue"] = queue;
    return pod;
  };
  const std::string domain = "gpu.gpuorch.io/nvlinkDomain";

  // 1. Queue capped (limit 2): a 2-GPU claim pod is bound, a 1-GPU one waits with the layer's
  // line; its claim stays unallocated.
  api.create(kClaims, gpu_claim("default", "cap-0", 2, domain));
  api.create(test::kDefaultPods, queued(claim_pod("cap-0", "cap-0", "gpuorch"), "capped"));
  EXPECT_EQ(test::node_of(bound(api, "cap-0")), kNode) << scheduler.log();
  EXPECT_EQ(devices_of(api.get(kClaims + "/cap-0")).size(), 2U);
  api.create(kClaims, gpu_claim("default", "cap-1", 1, domain));
  api.create(test::kDefaultPods, queued(claim_pod("cap-1", "cap-1", "gpuorch"), "capped"));
  const std::string limit = waits_with(api, "cap-1", "would pass its limit");
  std::cout << "cap-1: " << limit << "\n";
  EXPECT_NE(limit.find("queue capped"), std::string::npos) << limit;
  EXPECT_TRUE(devices_of(api.get(kClaims + "/cap-1")).empty());
  drop(api, test::kDefaultPods + "/cap-0?gracePeriodSeconds=0");
  drop(api, test::kDefaultPods + "/cap-1?gracePeriodSeconds=0");
  test::wait_for(api, kClaims + "/cap-0", [](const json& c) { return devices_of(c).empty(); });

  // 2. Queue a (quota 1) borrows both NVLink domains through two claim pods, nobody else wanting
  // them.
  api.create(kClaims, gpu_claim("default", "a-0", 4, domain));
  api.create(test::kDefaultPods, queued(claim_pod("a-0", "a-0", "gpuorch"), "a"));
  bound(api, "a-0");
  api.create(kClaims, gpu_claim("default", "a-1", 3, domain));
  api.create(test::kDefaultPods, queued(claim_pod("a-1", "a-1", "gpuorch"), "a"));
  bound(api, "a-1");
  // 3. Queue b (quota 6) wants 2: one of a's pods is evicted, its claim's GPUs go to b-0 once the
  // claim is deallocated (the pod's deletion releases it).
  api.create(kClaims, gpu_claim("default", "b-0", 2, domain));
  api.create(test::kDefaultPods, queued(claim_pod("b-0", "b-0", "gpuorch"), "b"));
  std::string victim;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (victim.empty() && std::chrono::steady_clock::now() < deadline) {
    for (const char* name : {"a-0", "a-1"}) {
      if (api.get(test::kDefaultPods + "/" + name)["metadata"].contains("deletionTimestamp")) {
        victim = name;
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(victim.empty()) << "no borrower evicted\n" << scheduler.log();
  const std::set<std::string> freed = devices_of(api.get(kClaims + "/" + victim));
  EXPECT_EQ(test::node_of(api.get(test::kDefaultPods + "/b-0")), "")
      << "bound before its victim is gone";
  drop(api, test::kDefaultPods + "/" + victim + "?gracePeriodSeconds=0");
  EXPECT_EQ(test::node_of(bound(api, "b-0")), kNode) << scheduler.log();
  const std::set<std::string> got = devices_of(api.get(kClaims + "/b-0"));
  std::cout << "victim " << victim << " freed " << fmt::format("{}", fmt::join(freed, ","))
            << "; b-0 -> " << fmt::format("{}", fmt::join(got, ",")) << "\n";
  ASSERT_EQ(got.size(), 2U);
  EXPECT_TRUE(one_domain(got));
  for (const auto& d : got) EXPECT_TRUE(freed.contains(d)) << d << " was not the victim's";
  EXPECT_TRUE(devices_of(api.get(kClaims + "/" + victim)).empty()) << "the victim's claim";
  if (HasFailure()) std::cout << "--- scheduler\n" << scheduler.log() << "\n";
  scheduler.stop();
  test::clear_cluster(api);
  drop_claims(api);
  drop(api, kQueues);
}

}  // namespace
}  // namespace gpuorch::k8s::dra
