// gpuorch dra-driver's MPS sharing through the real kubelet path (scripts/k8s-testenv node add
// --containerd 2; docs/dra.md, "Sharing a GPU"): one ResourceClaim asking for MPS in its config,
// shared by two pods, as NVIDIA's demo does. kube-scheduler allocates it (copying the claim's
// config into the allocation), the kubelet calls NodePrepareResources, the driver starts the
// claim's MPS control daemon and writes its CDI edits, and containerd applies them: both
// containers see CUDA_MPS_PIPE_DIRECTORY, the daemon's pipe folder and its /dev/shm. The nodes have
// no GPU, so the daemon is tests/fixtures/dra/mps-control (see its header); the real one is shown
// on an H200 in docs/hardware/h200-dra-mps. Label real-node; skips where no node can run.
#include <gtest/gtest.h>

#include <chrono>
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

// Each pod leaves a mark in the claim's /dev/shm and waits (60 s at most) for the other's: the
// two share that folder, and both hold the claim at once, so the kubelet prepares it once. (A pod
// that ran alone could end before the other started, the claim be unprepared in between and
// prepared again: a second daemon, rightly.)
json mps_pod(const std::string& name) {
  const std::string script =
      "touch /dev/shm/pod-$(hostname); i=0; "
      "while [ $(ls /dev/shm | grep -c '^pod-') -lt 2 ]; do "
      "i=$((i+1)); if [ $i -gt 600 ]; then echo the other pod never came; exit 1; fi; "
      "sleep 0.1; done; echo pods: $(ls /dev/shm | grep '^pod-'); "
      "echo CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY; "
      "echo CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; "
      "echo pipe: $(ls $CUDA_MPS_PIPE_DIRECTORY); echo shm: $(cat /dev/shm/fake-mps-shm)";
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", 1},
            {"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimName", "shared"}}})},
            {"containers",
             json::array({{{"name", "c"},
                           {"image", "docker.io/library/busybox:local"},
                           {"imagePullPolicy", "Never"},
                           {"command", {"sh", "-c", script}},
                           {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}}})}}}};
}

TEST(RealNodeDraMps, TwoPodsShareOneClaimsMpsDaemonThroughTheCdiEdits) {
  const std::string why = test::ControlPlane::real_nodes_unavailable();
  if (!why.empty()) GTEST_SKIP() << "real nodes cannot run on this machine: " << why;
  auto& cp = test::ControlPlane::shared();
  cp.start_kube_scheduler();
  cp.add_node("dramps", {"--containerd", "2"});
  k8s::ApiClient api(k8s::load_cluster_config(cp.kubeconfig()));
  test::TempDir dir;
  test::RealNodeDraDriver driver(cp, "dramps", dir,
                                 {"--mps-control", test::fixture("dra/mps-control")});
  const std::string& plugin_dir = driver.plugin_dir;
  ASSERT_TRUE(test::eventually([&] { return driver.registered(); }, 60s)) << driver.process.log();
  test::create_gpu_device_class(api);
  const std::string claims =
      k8s::namespaced_path(k8s::dra::kResourceApi, "default", "resourceclaims");
  json claim = k8s::dra::gpu_claim("default", "shared", 1, "gpu.gpuorch.io/nvlinkDomain");
  claim["spec"]["devices"]["config"] = json::array(
      {{{"requests", json::array({"gpus"})},
        {"opaque",
         {{"driver", "gpu.gpuorch.io"},
          {"parameters",
           {{"apiVersion", "gpu.gpuorch.io/v1beta1"},
            {"kind", "GpuConfig"},
            {"sharing",
             {{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 50}}}}}}}}}}});
  api.create(claims, claim);
  const auto t0 = std::chrono::steady_clock::now();
  api.create(kPods, mps_pod("mps-a"));
  api.create(kPods, mps_pod("mps-b"));
  std::string uid;
  for (const char* name : {"mps-a", "mps-b"}) {
    const json pod = test::wait_for(
        api, kPods + "/" + name,
        [](const json& p) {
          const std::string phase = p["status"].value("phase", "");
          return phase == "Succeeded" || phase == "Failed";
        },
        120s);
    ASSERT_EQ(pod["status"].value("phase", ""), "Succeeded") << pod.dump() << "\n"
                                                             << driver.process.log();
    if (uid.empty()) {
      uid = api.get(claims + "/shared")["metadata"]["uid"].get<std::string>();
    }
    const auto r = api.request("GET", kPods + "/" + name + "/log", nullptr, "");
    std::printf("real node DRA MPS: %s printed: %s", name, r.body.c_str());
    EXPECT_NE(r.body.find("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps\n"), std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50\n"), std::string::npos) << r.body;
    // The daemon's pipe folder (the fake keeps its pid file there) and the /dev/shm it wrote in.
    EXPECT_NE(r.body.find("pipe: nvidia-cuda-mps-control.pid"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("shm: GPU-"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("pods: pod-mps-a pod-mps-b\n"), std::string::npos) << r.body;
  }
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("real node DRA MPS: two pods created to Succeeded %.1f s\n", run_s);
  // One daemon for the claim, started once for both pods (the claim is prepared once per node).
  std::size_t starts = 0;
  for (const auto& l : test::lines_of(driver.process.log())) {
    starts += l.find("MPS control daemon") != std::string::npos &&
                      l.find(" started in ") != std::string::npos
                  ? 1
                  : 0;
  }
  EXPECT_EQ(starts, 1U) << driver.process.log();
  // Both pods ended: the kubelet unprepares, the daemon quits and its folder goes.
  for (const char* name : {"mps-a", "mps-b"}) {
    api.remove(kPods + "/" + name + "?gracePeriodSeconds=0");
  }
  EXPECT_TRUE(test::eventually(
      [&] { return k8s::dra::load_checkpoint(plugin_dir + "/checkpoint.json").count(uid) == 0; },
      90s))
      << driver.process.log();
  EXPECT_FALSE(std::filesystem::exists(plugin_dir + "/mps/" + uid)) << driver.process.log();
  EXPECT_EQ(driver.process.stop(), 0) << driver.process.log();
  cp.remove_node("dramps");
}

}  // namespace
}  // namespace gpuorch
