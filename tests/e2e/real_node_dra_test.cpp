// gpuorch dra-driver with a real kubelet (scripts/k8s-testenv node add --containerd 2: kubelet
// v1.37.2, containerd 2.4.2 with CDI; docs/k8s-testenv.md): the kubelet's plugin watcher
// registers the driver, a pod with a claim for two GPUs of one NVLink domain is allocated by
// kube-scheduler's DRA allocator, the kubelet calls NodePrepareResources before the container
// starts, containerd applies the driver's CDI spec (the container's NVIDIA_VISIBLE_DEVICES names
// exactly the allocated GPUs), and NodeUnprepareResources runs once the pod is gone. Label
// real-node (the RealNode prefix); skips where the machine cannot run a node.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/dra/checkpoint.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/dra/api_driver.hpp"
#include "k8s/k8s_support.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/real_node_dra_driver.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";

json claim_pod() {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "dra-pod"}, {"namespace", "default"}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"terminationGracePeriodSeconds", 1},
        {"resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimName", "two-gpus"}}})},
        {"containers",
         json::array(
             {{{"name", "c"},
               {"image", "docker.io/library/busybox:local"},
               {"imagePullPolicy", "Never"},
               {"command",
                {"sh", "-c", "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; sleep 3"}},
               {"resources", {{"claims", json::array({{{"name", "gpus"}}})}}}}})}}}};
}

TEST(RealNodeDra, TheKubeletRegistersTheDriverAndPreparesAndUnpreparesAClaim) {
  const std::string why = test::ControlPlane::real_nodes_unavailable();
  if (!why.empty()) GTEST_SKIP() << "real nodes cannot run on this machine: " << why;
  auto& cp = test::ControlPlane::shared();
  cp.start_kube_scheduler();
  // containerd 2 reads CDI specs from the node's own folder, the driver's --cdi-dir.
  cp.add_node("dra1", {"--containerd", "2"});
  k8s::ApiClient api(k8s::load_cluster_config(cp.kubeconfig()));

  // The kubelet's root dir is the node's own (--root-dir), so are its plugin folders.
  test::TempDir dir;
  test::RealNodeDraDriver driver(cp, "dra1", dir);
  const std::string& cdi_dir = driver.cdi_dir;
  const std::string& plugin_dir = driver.plugin_dir;
  ASSERT_TRUE(test::eventually([&] { return driver.registered(); }, 60s)) << driver.process.log();
  test::create_gpu_device_class(api);
  const std::string claims =
      k8s::namespaced_path(k8s::dra::kResourceApi, "default", "resourceclaims");
  api.create(claims, k8s::dra::gpu_claim("default", "two-gpus", 2, "gpu.gpuorch.io/nvlinkDomain"));
  const auto t0 = std::chrono::steady_clock::now();
  api.create(kPods, claim_pod());
  // Running: the kubelet prepared the claim before starting the container; the driver has it in
  // its checkpoint with the allocated devices, and its CDI spec written.
  (void)test::wait_for(
      api, kPods + "/dra-pod",
      [](const json& p) { return p["status"].value("phase", "") != "Pending"; }, 90s);
  const json claim = api.get(claims + "/two-gpus");
  const std::string uid = claim["metadata"]["uid"];
  std::set<std::string> allocated;
  for (const auto& r : claim["status"]["allocation"]["devices"]["results"]) {
    allocated.insert(r["device"].get<std::string>());
  }
  ASSERT_EQ(allocated.size(), 2U) << claim.dump();
  const auto prepared = k8s::dra::load_checkpoint(plugin_dir + "/checkpoint.json");
  ASSERT_EQ(prepared.count(uid), 1U) << driver.process.log();
  std::set<std::string> devices;
  for (const auto& d : prepared.at(uid).devices) devices.insert(d.device);
  EXPECT_EQ(devices, allocated);
  const std::string cdi_file = cdi_dir + "/gpu.gpuorch.io-claim_" + uid + ".json";
  EXPECT_TRUE(std::filesystem::exists(cdi_file));
  const json pod = test::wait_for(
      api, kPods + "/dra-pod",
      [](const json& p) {
        const std::string phase = p["status"].value("phase", "");
        return phase == "Succeeded" || phase == "Failed";
      },
      90s);
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(pod["status"].value("phase", ""), "Succeeded") << pod.dump() << "\n"
                                                           << driver.process.log();
  const auto r = api.request("GET", kPods + "/dra-pod/log", nullptr, "");
  std::printf("real node DRA: pod created to Succeeded %.1f s; container printed: %s", run_s,
              r.body.c_str());
  // The container's environment, from containerd's CDI injection: the UUIDs of exactly the
  // allocated devices (the recording's GPUs, as the driver's CDI spec names them).
  std::set<std::string> expected;
  const topology::Host host = test::fixture_host("dgx-h100");
  for (const auto& d : k8s::dra::slice_devices(host)) {
    if (allocated.count(d.name) == 0) continue;
    const auto& g = host.gpus[static_cast<std::size_t>(d.gpu)];
    expected.insert(g.uuid.empty() ? std::to_string(g.index) : g.uuid);
  }
  ASSERT_EQ(expected.size(), 2U);
  const std::string key = "NVIDIA_VISIBLE_DEVICES=";
  const auto at = r.body.find(key);
  ASSERT_NE(at, std::string::npos) << r.body;
  const std::string value = r.body.substr(at + key.size(), r.body.find('\n', at) - at - key.size());
  std::set<std::string> seen;
  std::size_t listed = 0;
  std::stringstream ss(value);
  for (std::string id; std::getline(ss, id, ',');) {
    seen.insert(id);
    ++listed;
  }
  EXPECT_EQ(seen, expected) << "container printed: " << r.body;
  EXPECT_EQ(listed, expected.size()) << value;

  // The pod ended, the kubelet unprepares: the CDI spec and the checkpoint entry go.
  EXPECT_TRUE(test::eventually(
      [&] { return k8s::dra::load_checkpoint(plugin_dir + "/checkpoint.json").count(uid) == 0; },
      90s))
      << driver.process.log();
  EXPECT_FALSE(std::filesystem::exists(cdi_file));
  EXPECT_EQ(driver.process.stop(), 0) << driver.process.log();
  api.remove(kPods + "/dra-pod?gracePeriodSeconds=0");
  cp.remove_node("dra1");
}

}  // namespace
}  // namespace gpuorch
