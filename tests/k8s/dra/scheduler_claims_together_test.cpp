// gpuorch scheduler allocating several ResourceClaims of one pod, distinctAttribute and a MIG
// instance on the real API server (docs/dra.md, "Several claims, several requests"), on the
// driver's slice of the recorded DGX H100 cut into two NVLink domains (GPUs 0-3; 4-6, and GPU 7
// in MIG mode with a 3g.40gb, a 2g.20gb and a 1g.10gb instance); then kube-scheduler's own
// allocator on the same claims.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/dra/claim_objects.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "dgx-together";
constexpr const char* kDomain = "gpu.gpuorch.io/nvlinkDomain";

// A claim for one MIG instance of `profile` (DeviceClass mig.gpuorch.io of the manifests).
json mig_claim(const std::string& name, const std::string& profile) {
  const std::string selector =
      fmt::format(R"(device.attributes["gpu.gpuorch.io"].profile == "{}")", profile);
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests",
           json::array(
               {{{"name", "mig"},
                 {"exactly",
                  {{"deviceClassName", "mig.gpuorch.io"},
                   {"selectors", json::array({{{"cel", {{"expression", selector}}}}})}}}}})}}}}}};
}

// The three claims of one pod: a pair of one NVLink domain, one GPU, a 3g.40gb instance.
std::vector<std::string> create_trio(ApiClient& api, const std::string& prefix) {
  api.create(kClaims, gpu_claim("default", prefix + "-pair", 2, kDomain));
  api.create(kClaims, gpu_claim("default", prefix + "-one", 1, kDomain));
  api.create(kClaims, mig_claim(prefix + "-mig", "3g.40gb"));
  return {prefix + "-pair", prefix + "-one", prefix + "-mig"};
}

// Every device of the trio's claims, each once, and each claim as asked.
std::string check_trio(ApiClient& api, const std::vector<std::string>& claims, const json& pod) {
  std::multiset<std::string> all;
  std::vector<std::set<std::string>> devices;
  for (const auto& c : claims) {
    const json claim = api.get(kClaims + "/" + c);
    devices.push_back(devices_of(claim));
    all.insert(devices.back().begin(), devices.back().end());
    EXPECT_EQ(claim["status"]["reservedFor"][0]["uid"], pod["metadata"]["uid"]) << c;
    EXPECT_EQ(claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"]
                   [0]["values"][0],
              kNode)
        << c;
  }
  EXPECT_EQ(devices[0].size(), 2U);
  EXPECT_TRUE(one_domain(devices[0]));
  EXPECT_EQ(devices[1].size(), 1U);
  EXPECT_EQ(devices[2], (std::set<std::string>{"gpu-7-mig-1-0"}));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << "a device twice";
  return fmt::format("{} | {} | {}", fmt::join(devices[0], ","), fmt::join(devices[1], ","),
                     fmt::join(devices[2], ","));
}

TEST(DraGpuorchScheduler, APodsClaimsAMigInstanceAndDistinctDomainsAreAllocatedTogether) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  ASSERT_NO_FATAL_FAILURE(dgx_node_only(api, kNode));
  test::TempDir dir;
  test::SchedulerProcess scheduler({"--kubeconfig", plane.kubeconfig(), "--listen", "127.0.0.1:0"},
                                   dir.file("scheduler.log"));

  // 1. distinctAttribute: two GPUs of different NVLink domains.
  json spread = gpu_claim("default", "spread", 2, kDomain);
  spread["spec"]["devices"]["constraints"] = json::array({{{"distinctAttribute", kDomain}}});
  api.create(kClaims, spread);
  api.create(test::kDefaultPods, claim_pod("spread", "spread", "gpuorch"));
  test::wait_for(api, test::kDefaultPods + "/spread",
                 [](const json& p) { return test::node_of(p) == kNode; });
  const std::set<std::string> spread_devices = devices_of(api.get(kClaims + "/spread"));
  std::cout << "gpuorch scheduler: spread -> " << fmt::format("{}", fmt::join(spread_devices, ","))
            << "\n";
  ASSERT_EQ(spread_devices.size(), 2U);
  EXPECT_FALSE(one_domain(spread_devices));

  // 2. Three claims of one pod: allocated together on the node, every device once, none of the
  // spread pair's, written before the pod is bound.
  const auto trio = create_trio(api, "trio");
  api.create(test::kDefaultPods, pod_with_claims("trio", trio, "gpuorch"));
  const json trio_pod = test::wait_for(api, test::kDefaultPods + "/trio",
                                       [](const json& p) { return test::node_of(p) == kNode; });
  const std::string ours = check_trio(api, trio, trio_pod);
  std::cout << "gpuorch scheduler: pair | one | mig -> " << ours << "\n";
  for (const auto& c : trio) {
    for (const auto& d : devices_of(api.get(kClaims + "/" + c))) {
      EXPECT_FALSE(spread_devices.contains(d)) << d << " given twice";
    }
  }

  // 3. The only 3g.40gb instance is taken: a second claim for one waits, saying so.
  api.create(kClaims, mig_claim("second-mig", "3g.40gb"));
  api.create(test::kDefaultPods, claim_pod("second-mig", "second-mig", "gpuorch"));
  const json waiting = test::wait_for(api, test::kDefaultPods + "/second-mig", [](const json& q) {
    return !test::unschedulable_message(q).empty();
  });
  const std::string why = test::unschedulable_message(waiting);
  std::cout << "second-mig: " << why << "\n";
  EXPECT_NE(why.find("ResourceClaims default/second-mig: 0/1 nodes are available"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("Waiting"), std::string::npos) << why;

  scheduler.stop();

  // 4. The same three claims through kube-scheduler's allocator, on the node emptied.
  for (const char* p : {"spread", "trio", "second-mig"}) {
    drop(api, test::kDefaultPods + "/" + std::string(p) + "?gracePeriodSeconds=0");
  }
  drop_claims(api);
  plane.start_kube_scheduler();
  const auto kube_trio = create_trio(api, "kube");
  json kube_pod = pod_with_claims("kube-trio", kube_trio, "");
  kube_pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", kNode}};
  api.create(test::kDefaultPods, kube_pod);
  const json kube_bound = test::wait_for(api, test::kDefaultPods + "/kube-trio",
                                         [](const json& p) { return test::node_of(p) == kNode; });
  std::cout << "kube-scheduler: pair | one | mig -> " << check_trio(api, kube_trio, kube_bound)
            << "\n";
  drop(api, test::kDefaultPods + "/kube-trio?gracePeriodSeconds=0");
  drop_claims(api);
}

}  // namespace
}  // namespace gpuorch::k8s::dra
