#pragma once
// What the DRA tests against the API server share: the recorded DGX H100 with its NVSwitch fabric
// cut into two NVLink domains, and a Node without a kubelet whose GPUs are DRA devices only (no
// nvidia.com/gpu in allocatable), with gpuorch's DeviceClasses.
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/k8s_support.hpp"

namespace gpuorch::k8s::dra {

// GPUs 0-3 and 4-7 (GPU 7 in MIG mode, so 3 whole GPUs) reach each other over NVLink only within
// their half.
inline topology::Host two_domain_host() {
  topology::Host h = test::fixture_host("dgx-h100");
  for (auto& l : h.links) {
    const bool gpus = l.a < 8 && l.b < 8;
    if (gpus && (l.a < 4) != (l.b < 4)) {
      l.path = l.pcie;
      l.nvlinks = 0;
    }
  }
  return h;
}

// The Node object is all a scheduler reads: 32 CPUs, 256 Gi, no GPU resource.
inline void add_dra_node(ApiClient& api, const std::string& name) {
  using nlohmann::json;
  const json res = {{"cpu", "32"}, {"memory", "256Gi"}, {"pods", "110"}};
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}}});
  api.patch(node_path(name, "status"), {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

// The DeviceClasses of `gpuorch manifests --dra` (gpu.gpuorch.io, mig.gpuorch.io).
inline void apply_device_classes(ApiClient& api) {
  ManifestOptions mo;
  mo.dra = true;
  for (const auto& m : make_manifests(mo)) {
    if (m.object.value("kind", "") != "DeviceClass") continue;
    const nlohmann::json cls = nlohmann::json::parse(m.object.dump());
    (void)test_apply::create_or_replace(api, test_apply::resource_of(api, cls), cls);
  }
}

}  // namespace gpuorch::k8s::dra
