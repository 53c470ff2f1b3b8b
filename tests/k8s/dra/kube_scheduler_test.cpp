// The driver's ResourceSlice as kube-scheduler's own DRA allocator reads it (scripts/k8s-testenv
// scheduler, v1.37): a claim constrained to one NVLink domain gets GPUs of one domain, a claim no
// domain can hold is explained on the pod, and what kube-scheduler allocated is prepared by the
// driver over its socket.
#include <gtest/gtest.h>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/dra/driver_server.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/dra/slice_publisher.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/dra/api_driver.hpp"
#include "k8s/dra/dra_node.hpp"
#include "k8s/k8s_support.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "dgx-h100-01";

json claim_pod(const std::string& name, const std::string& claim_name) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"nodeSelector", {{"kubernetes.io/hostname", kNode}}},
        {"resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimName", claim_name}}})},
        {"containers",
         json::array({{{"name", "c"},
                       {"image", "registry.k8s.io/pause:3.10"},
                       {"resources", {{"claims", json::array({{{"name", "gpus"}}})}}}}})}}}};
}

TEST(DraKubeScheduler, AllocatesOneNvlinkDomainFromTheDriversSliceAndExplainsWhatCannotBeMet) {
  auto& plane = test::ControlPlane::shared();
  plane.start_kube_scheduler();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  test::clear_cluster(api);
  const std::string claims = namespaced_path(kResourceApi, "default", "resourceclaims");
  try {
    api.remove(claims);
  } catch (const ApiError&) {
  }
  add_dra_node(api, kNode);

  const topology::Host host = two_domain_host();
  SliceOptions o;
  o.node_name = kNode;
  const json slice = resource_slice(host, o);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(slice["spec"]["devices"][i]["attributes"]["nvlinkDomain"]["int"], 0);
    ASSERT_EQ(slice["spec"]["devices"][i + 4]["attributes"]["nvlinkDomain"]["int"], 4);
  }
  try {
    api.remove(std::string(kResourceApi) + "/resourceslices/" + slice_name(o));
  } catch (const ApiError&) {
  }
  ASSERT_EQ(publish_slice(api, slice), SliceChange::kCreated);
  // Owned by the Node, which exists here.
  const json stored = api.get(std::string(kResourceApi) + "/resourceslices/" + slice_name(o));
  EXPECT_EQ(stored["metadata"]["ownerReferences"][0]["kind"], "Node");
  ManifestOptions mo;
  mo.dra = true;
  for (const auto& m : make_manifests(mo)) {
    if (m.file != "23-deviceclass-gpu.yaml") continue;
    const json cls = json::parse(m.object.dump());
    (void)test_apply::create_or_replace(api, test_apply::resource_of(api, cls), cls);
  }

  // Four GPUs of one domain: only GPUs 0-3 are four whole GPUs in one domain.
  api.create(claims, gpu_claim("default", "four-gpus", 4, "gpu.gpuorch.io/nvlinkDomain"));
  // Five in one domain, and two on one PCIe root: no such set on this host.
  api.create(claims, gpu_claim("default", "five-gpus", 5, "gpu.gpuorch.io/nvlinkDomain"));
  api.create(claims, gpu_claim("default", "pcie-pair", 2, "resource.kubernetes.io/pcieRoot"));
  api.create(test::kDefaultPods, claim_pod("four", "four-gpus"));
  api.create(test::kDefaultPods, claim_pod("five", "five-gpus"));
  api.create(test::kDefaultPods, claim_pod("pair", "pcie-pair"));

  const json pod = test::wait_for(api, test::kDefaultPods + "/four",
                                  [](const json& p) { return test::node_of(p) == kNode; });
  const std::string claim_path = claims + "/four-gpus";
  const json allocated = api.get(claim_path);
  const json& results = allocated["status"]["allocation"]["devices"]["results"];
  std::set<std::string> devices;
  for (const auto& r : results) {
    EXPECT_EQ(r["driver"], kDriverName);
    EXPECT_EQ(r["pool"], kNode);
    devices.insert(r["device"].get<std::string>());
  }
  EXPECT_EQ(devices, (std::set<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}))
      << allocated["status"].dump();
  EXPECT_EQ(allocated["status"]["reservedFor"][0]["name"], "four");
  for (const char* name : {"five", "pair"}) {
    const json p = test::wait_for(api, test::kDefaultPods + "/" + name, [](const json& q) {
      return !test::unschedulable_message(q).empty();
    });
    const std::string why = test::unschedulable_message(p);
    std::cout << name << ": " << why << "\n";
    EXPECT_EQ(test::node_of(p), "");
    EXPECT_NE(why.find("claim"), std::string::npos) << why;
  }

  // What kube-scheduler allocated, prepared by the driver reading the claim, as the kubelet asks.
  ApiDriver driver(api, host, kNode);
  const auto answer =
      driver.prepare("default", "four-gpus", allocated["metadata"]["uid"].get<std::string>());
  ASSERT_EQ(answer.error(), "");
  std::set<std::string> prepared;
  for (const auto& d : answer.devices()) prepared.insert(d.device_name());
  EXPECT_EQ(prepared, devices);
  (void)pod;
}

}  // namespace
}  // namespace gpuorch::k8s::dra
