// gpuorch dra-driver against the real kube-apiserver (scripts/k8s-testenv): resource.k8s.io/v1 is
// served, the recorded DGX H100's ResourceSlice passes the API server's validation and is kept
// equal to the host, and a claim allocated on the API server is prepared over the driver's socket.
#include <gtest/gtest.h>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/dra/driver_server.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/dra/slice_publisher.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/api_error_of.hpp"
#include "k8s/apply_support.hpp"
#include "k8s/dra/api_driver.hpp"
#include "k8s/k8s_support.hpp"
#include "support/control_plane.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "dgx-h100-01";
const std::string kSlices = std::string(kResourceApi) + "/resourceslices";

// gpuorch manifests --dra's objects, by file name.
std::map<std::string, json> dra_manifests() {
  ManifestOptions o;
  o.dra = true;
  std::map<std::string, json> out;
  for (const auto& m : make_manifests(o)) out[m.file] = json::parse(m.object.dump());
  return out;
}

TEST(DraApiServer, TheDgxH100SliceIsAcceptedAndAnAllocatedClaimPrepares) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));

  // The API group is served at v1 with the kinds the driver and its claims use.
  const json group = api.get(kResourceApi);
  std::set<std::string> kinds;
  for (const auto& r : group["resources"]) kinds.insert(r["name"].get<std::string>());
  for (const char* k : {"resourceslices", "resourceclaims", "deviceclasses"}) {
    EXPECT_EQ(kinds.count(k), 1U) << k << " not served: " << group.dump();
  }

  topology::Host host = test::fixture_host("dgx-h100");
  SliceOptions o;
  o.node_name = kNode;
  const json slice = resource_slice(host, o);
  const std::string path = kSlices + "/" + slice_name(o);
  try {
    api.remove(path);
  } catch (const ApiError&) {
  }
  EXPECT_EQ(publish_slice(api, slice), SliceChange::kCreated);
  const json stored = api.get(path);
  EXPECT_EQ(stored["spec"]["devices"], slice["spec"]["devices"]);
  EXPECT_EQ(stored["spec"]["devices"].size(), 10U);  // GPU 7 as its 3 MIG instances
  EXPECT_EQ(stored["spec"]["pool"]["generation"], 1);
  EXPECT_EQ(publish_slice(api, slice), SliceChange::kUnchanged);

  // GPU 7 gone (fallen off the bus): the slice follows, in a newer generation of the pool.
  topology::Host seven = host;
  seven.gpus.pop_back();
  EXPECT_EQ(publish_slice(api, resource_slice(seven, o)), SliceChange::kUpdated);
  EXPECT_EQ(api.get(path)["spec"]["devices"].size(), 7U);
  EXPECT_EQ(api.get(path)["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(publish_slice(api, slice), SliceChange::kUpdated);
  EXPECT_EQ(api.get(path)["spec"]["pool"]["generation"], 3);

  // The acceptance means something: the same validation refuses what breaks its rules.
  json bad = slice;
  bad["metadata"]["name"] = "bad-slice";
  bad["spec"]["devices"][0]["attributes"]["productName"]["string"] = std::string(65, 'x');
  const ApiError refused = api_error_of([&] { api.create(kSlices, bad, /*dry_run=*/true); });
  EXPECT_EQ(refused.status(), 422) << refused.what();

  // A claim for two GPUs of one NVLink domain, allocated as a scheduler writes it, prepared by
  // the driver reading it from the API server.
  const std::string ns = "dra-test";
  try {
    api.create("/api/v1/namespaces",
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  } catch (const ApiError& e) {
    ASSERT_EQ(e.status(), 409) << e.what();
  }
  try {
    api.create(std::string(kResourceApi) + "/deviceclasses",
               dra_manifests().at("23-deviceclass-gpu.yaml"));
  } catch (const ApiError& e) {
    ASSERT_EQ(e.status(), 409) << e.what();
  }
  const std::string claims = namespaced_path(kResourceApi, ns, "resourceclaims");
  // Two GPUs of one NVLink domain, as issue 34's example claim asks.
  json claim = api.create(claims, gpu_claim(ns, "two-gpus", 2, "gpu.gpuorch.io/nvlinkDomain"));
  claim["status"]["allocation"] = {
      {"devices",
       {{"results",
         json::array(
             {{{"request", "gpus"}, {"driver", kDriverName}, {"pool", kNode}, {"device", "gpu-2"}},
              {{"request", "gpus"},
               {"driver", kDriverName},
               {"pool", kNode},
               {"device", "gpu-3"}}})}}},
      {"nodeSelector",
       {{"nodeSelectorTerms",
         json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                     {"operator", "In"},
                                                     {"values", json::array({kNode})}}})}}})}}}};
  const std::string claim_path = namespaced_path(kResourceApi, ns, "resourceclaims", "two-gpus");
  claim = api.replace(claim_path + "/status", claim);
  const std::string uid = claim["metadata"]["uid"];

  ApiDriver driver(api, host, kNode);
  const auto answer = driver.prepare(ns, "two-gpus", uid);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 2);
  EXPECT_EQ(answer.devices(0).device_name(), "gpu-2");
  EXPECT_EQ(answer.devices(1).device_name(), "gpu-3");
  json spec = json::parse(test::read_text(driver.cdi_spec(uid)));
  const std::string env = spec["devices"][0]["containerEdits"]["env"].dump();
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=" + host.gpus[2].uuid + "," + host.gpus[3].uuid),
            std::string::npos)
      << env;
  api.remove(claim_path);
  api.remove(path);
}

// What `gpuorch manifests --dra` deploys is accepted as it is (strict field validation; the
// DeviceClasses' CEL selectors compiled by the API server), and leaves the device plugin out.
TEST(DraApiServer, TheDraManifestsAreAccepted) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  const auto objects = dra_manifests();
  for (const auto& [file, obj] : objects) {
    EXPECT_EQ(file.find("21-device-plugin"), std::string::npos) << file;
  }
  for (const char* file : {"08-clusterrole-dra-driver.yaml", "23-deviceclass-gpu.yaml",
                           "23-deviceclass-mig.yaml", "24-dra-driver.yaml"}) {
    EXPECT_EQ(objects.count(file), 1U) << file;
  }
  for (const auto& [file, obj] : objects) {
    try {
      (void)test_apply::create_or_replace(api, test_apply::resource_of(api, obj), obj);
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": " << e.what();
    }
  }
  const json cls = api.get(std::string(kResourceApi) + "/deviceclasses/mig.gpuorch.io");
  EXPECT_NE(
      cls["spec"]["selectors"][0]["cel"]["expression"].get<std::string>().find("type == \"mig\""),
      std::string::npos);
  ManifestOptions shared;
  shared.dra = true;
  shared.sharing = SharingKind::kTimeSlicing;
  const auto message = test::input_error([&] { (void)make_manifests(shared); });
  EXPECT_NE(message.find("with --dra"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpuorch::k8s::dra
