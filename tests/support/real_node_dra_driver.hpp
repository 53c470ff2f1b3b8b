#pragma once
// gpuorch dra-driver serving a real node of the test control plane (scripts/k8s-testenv node add
// --containerd 2), as RealNodeDra* start it: the DGX H100 recording as the node's GPUs, the
// kubelet's own plugin folders (its --root-dir) and the node's CDI folder, which containerd
// reads; and the driver's DeviceClass on the API server.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/k8s_support.hpp"
#include "support/control_plane.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

// Polls `ready` every 100 ms until `timeout`.
inline bool eventually(const std::function<bool()>& ready, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class RealNodeDraDriver {
 public:
  // Starts the driver for node `node` (already added) with `extra` flags; its log in `dir`.
  RealNodeDraDriver(ControlPlane& cp, const std::string& node, const TempDir& dir,
                    const std::vector<std::string>& extra = {})
      : root(cp.dir() + "/nodes/" + node + "/kubelet"),
        cdi_dir(cp.dir() + "/nodes/" + node + "/cdi"),
        plugin_dir(root + "/plugins/gpu.gpuorch.io"),
        process(args(cp, node, dir, extra), dir.file("driver.log"), "dra-driver") {}

  // Whether the kubelet's plugin watcher registered it.
  [[nodiscard]] bool registered() {
    return process.log().find("registered with the kubelet") != std::string::npos;
  }

  const std::string root;        // the kubelet's --root-dir
  const std::string cdi_dir;     // the node's CDI folder, the driver's --cdi-dir
  const std::string plugin_dir;  // checkpoint.json, dra.sock, mps/
  SchedulerProcess process;

 private:
  std::vector<std::string> args(ControlPlane& cp, const std::string& node, const TempDir& dir,
                                const std::vector<std::string>& extra) const {
    std::vector<std::string> a{"--topology",         topo_json_path("dgx-h100"),
                               "--node-name",        node,
                               "--kubeconfig",       cp.kubeconfig(),
                               "--plugins-registry", root + "/plugins_registry",
                               "--plugin-dir",       plugin_dir,
                               "--cdi-dir",          cdi_dir,
                               "--dev-root",         dir.file("no-dev")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

// The DeviceClass gpu.gpuorch.io as `gpuorch manifests --dra` ships it.
inline void create_gpu_device_class(k8s::ApiClient& api) {
  k8s::ManifestOptions mo;
  mo.dra = true;
  for (const auto& m : k8s::make_manifests(mo)) {
    if (m.file != "23-deviceclass-gpu.yaml") continue;
    const nlohmann::json cls = nlohmann::json::parse(m.object.dump());
    (void)k8s::test_apply::create_or_replace(api, k8s::test_apply::resource_of(api, cls), cls);
  }
}

}  // namespace gpuorch::test
