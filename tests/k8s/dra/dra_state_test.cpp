// DRA devices as used capacity wherever gpuorch decides or explains (k8s/mirror/dra_state.hpp,
// docs/dra.md "Accounting everywhere"), over the driver's slice of the recorded DGX H100 cut into
// two NVLink domains (GPUs 0-3, 4-6): a claim kube-scheduler allocated holds its GPUs in the
// mirror and in its pod's queue, the extender filters a pod with claims on the devices it can get
// (and has no say on what gpuorch does not evaluate), doctor explains it in the scheduler's
// words, and `gpuorch sim` reads the slices as an inventory.
#include "gpuorch/k8s/mirror/dra_state.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"
#include "gpuorch/k8s/mirror/cluster_queues.hpp"
#include "gpuorch/k8s/mirror/extended_resources.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/slice_inventory.hpp"
#include "k8s/dra/dra_node.hpp"
#include "k8s/dra/dra_objects.hpp"
#include "k8s/fake_api_server.hpp"
#include "support/kai_queue.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using namespace dra_objects;

json claim_pod(const std::string& name, const std::string& claim_name, const std::string& node = "",
               const std::string& queue = "") {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
      {"spec",
       {{"schedulerName", "gpuorch"},
        {"resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimName", claim_name}}})},
        {"containers", json::array({{{"name", "c"},
                                     {"resources",
                                      {{"requests", {{"cpu", "1"}}},
                                       {"claims", json::array({{{"name", "gpus"}}})}}}}})}}},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!queue.empty()) pod["metadata"]["labels"] = {{"kai.scheduler/queue", queue}};
  return pod;
}

// A mirror of the DGX node with its slice and class, and kube-scheduler's claim on gpu-0.
struct Cluster {
  ClusterMirror mirror{[] {
    MirrorOptions o;
    o.policy = "best-fit";
    return o;
  }()};
  DraState dra;
  Cluster() {
    dra.slice(slice(), false, mirror);
    dra.device_class(gpu_class(), false);
    dra.pod(pod_from_json(claim_pod("theirs", "theirs", kNode, "team-a")), false, mirror);
    dra.claim(allocated(claim("theirs", 1), {"gpu-0"}, "theirs"), false, mirror);
    const auto node = std::get<cluster::NodeSpec>(node_from_json(dra_node()));
    mirror.set_nodes(dra.apply({{kNode, node}}, mirror));
    mirror.ensure_built({});
  }
};

TEST(DraState, AClaimAllocatedByAnotherSchedulerIsUsedCapacityInItsPodsQueue) {
  Cluster c;
  // Seven whole GPUs and GPU 7's three MIG instances.
  EXPECT_EQ(c.mirror.cluster().gpu_total(), 10);
  EXPECT_EQ(c.mirror.cluster().fully_free_gpus(0), 9);
  const auto held = c.mirror.assumed(claim_holder("uid-theirs"));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->second, std::vector<int>{0});

  // Four GPUs of one domain: the 0-3 domain has three left, the other has three.
  c.dra.claim(claim("four", 4), false, c.mirror);
  const PodObject four = pod_from_json(claim_pod("four", "four"));
  const auto p = c.dra.place(four, c.mirror);
  EXPECT_EQ(p.outcome, DraState::Placement::Outcome::kNoRoom);
  EXPECT_EQ(p.message.rfind("ResourceClaims default/four: 0/1 nodes are available:", 0), 0U)
      << p.message;
  // Deallocated (its pod gone): the domain is whole again.
  c.dra.claim(claim("theirs", 1), false, c.mirror);
  const auto q = c.dra.place(four, c.mirror);
  ASSERT_TRUE(q.placed()) << q.message;
  EXPECT_EQ(q.result.decision.placement.gpus, (std::vector<int>{0, 1, 2, 3}));

  // The queue: the pod's claim GPUs count in team-a's allocated, the pending one's in requested.
  Cluster d;
  ClusterQueues queues;
  ASSERT_EQ(queues.update(test::kai_queue("team-a", 4, 4), false), "");
  d.dra.claim(claim("four", 4), false, d.mirror);
  const PodObject theirs = pod_from_json(claim_pod("theirs", "theirs", kNode, "team-a"));
  const PodObject pending = pod_from_json(claim_pod("four", "four", "", "team-a"));
  const auto status = queues.statuses({&theirs}, {&pending}, &d.dra);
  EXPECT_EQ(status.at("team-a")["allocated"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(status.at("team-a")["requested"]["nvidia.com/gpu"], "5");
  // The job layer: the claim's GPU is team-a's, so 4 more are over its limit of 4, 3 are not.
  const auto leaf = queues.leaf("team-a");
  ASSERT_TRUE(leaf.has_value());
  ClusterMirror::AdmitOptions admit;
  admit.queue_of = [&](const PodObject& pod) { return queues.leaf(pod.queue); };
  PodObject job;
  job.uid = "uid-job";
  job.ns = "default";
  job.name = "job";
  job.queue = "team-a";
  job.spec.name = "default/job";
  job.spec.gpu_count = 4;
  job.spec.gpu_milli = base::kMilliPerGpu;
  const auto over = d.mirror.admit(queues.tree(), *leaf, {job}, admit);
  EXPECT_FALSE(over.placement.placed);
  EXPECT_EQ(over.waiting, sched::jobs::WaitReason::kOverLimit) << over.why;
  job.spec.gpu_count = 3;
  EXPECT_TRUE(d.mirror.admit(queues.tree(), *leaf, {job}, admit).placement.placed);
}

TEST(DraState, WhatGpuorchDoesNotEvaluateIsToldApartFromWhatCannotBeMet) {
  Cluster c;
  c.dra.claim(claim("regex", 1, R"(device.attributes["gpu.gpuorch.io"].uuid.matches("GPU-.*"))"),
              false, c.mirror);
  const auto p = c.dra.place(pod_from_json(claim_pod("regex", "regex")), c.mirror);
  EXPECT_EQ(p.outcome, DraState::Placement::Outcome::kUnevaluated);
  EXPECT_NE(p.message.find("outside the CEL subset"), std::string::npos) << p.message;
  c.dra.claim(claim("five", 5), false, c.mirror);
  const auto q = c.dra.place(pod_from_json(claim_pod("five", "five")), c.mirror);
  EXPECT_EQ(q.outcome, DraState::Placement::Outcome::kInfeasible);
  EXPECT_NE(q.message.find("matchAttribute gpu.gpuorch.io/nvlinkDomain cannot be satisfied"),
            std::string::npos)
      << q.message;
}

TEST(DraState, AGpuResourceRequestGetsDevicePluginGpusNeverDraDevices) {
  Cluster c;
  json plugin = dra_node();
  plugin["metadata"]["name"] = "plugin";
  plugin["status"]["allocatable"]["nvidia.com/gpu"] = "2";
  const auto plugin_node = std::get<cluster::NodeSpec>(node_from_json(plugin));
  const auto dgx = std::get<cluster::NodeSpec>(node_from_json(dra_node()));
  c.mirror.set_nodes(c.dra.apply({{kNode, dgx}, {"plugin", plugin_node}}, c.mirror));
  c.mirror.ensure_built({});
  json pod = claim_pod("resource", "unused");
  pod["spec"].erase("resourceClaims");
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"nvidia.com/gpu", "3"}}}};
  PodObject three = pod_from_json(pod);
  ASSERT_EQ(three.spec.gpu_count, 3);
  // Six DRA GPUs are free, but not for a resource request: the device plugin node has two.
  const auto r = c.mirror.schedule(c.dra.device_plugin_gpus_only(three));
  EXPECT_NE(r.decision.outcome, sched::Outcome::kPlaced);
  EXPECT_NE(c.dra.device_plugin_note(three).find("whose GPUs are DRA devices have none"),
            std::string::npos);
  three.spec.gpu_count = 2;
  const auto two = c.mirror.schedule(c.dra.device_plugin_gpus_only(three));
  ASSERT_EQ(two.decision.outcome, sched::Outcome::kPlaced);
  EXPECT_EQ(two.node, "plugin");
  // A class mapping the resource (KEP-5004) is named.
  json mapped = gpu_class();
  mapped["spec"]["extendedResourceName"] = "nvidia.com/gpu";
  c.dra.device_class(mapped, false);
  EXPECT_NE(
      c.dra.device_plugin_note(three).find("DeviceClass gpu.gpuorch.io maps the GPU resource"),
      std::string::npos);
}

TEST(DraBridge, AGpuResourceMappedByAClassIsPlacedWithTheClaimKubeSchedulerWouldMake) {
  Cluster c;
  json pod = claim_pod("bridged", "unused");
  pod["spec"].erase("resourceClaims");
  pod["spec"]["initContainers"] =
      json::array({{{"name", "init"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}});
  pod["spec"]["containers"][0]["resources"] = {
      {"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "2"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}};
  const PodObject p = pod_from_json(pod);
  ASSERT_EQ(p.gpu_resources.size(), 1U);
  // Init containers first; nvidia.com/gpu after cpu among the container's requests.
  EXPECT_EQ(p.gpu_resources[0].request, "container-1-request-1");
  EXPECT_EQ(c.dra.bridge_class(p), "");  // no class maps nvidia.com/gpu yet
  json mapped = gpu_class();
  mapped["spec"]["extendedResourceName"] = "nvidia.com/gpu";
  c.dra.device_class(mapped, false);
  ASSERT_EQ(c.dra.bridge_class(p), "gpu.gpuorch.io");
  const json claim = c.dra.extended_claim(p, "gpu.gpuorch.io");
  EXPECT_EQ(claim["metadata"]["generateName"], "bridged-extended-resources-");
  EXPECT_EQ(claim["metadata"]["annotations"][kExtendedResourceClaimAnnotation], "true");
  EXPECT_EQ(claim["metadata"]["ownerReferences"][0]["uid"], "uid-bridged");
  const auto placed = c.dra.place_extended(p, claim, c.mirror);
  ASSERT_TRUE(placed.placed()) << placed.message;
  EXPECT_EQ(placed.result.decision.placement.gpus.size(), 2U);
  EXPECT_TRUE(c.dra.claims().size() == 1U);  // the planned claim is not kept
  json created = claim;
  created["metadata"]["name"] = "bridged-extended-resources-x7k2p";
  created["metadata"]["uid"] = "uid-created";
  const json status = c.dra.extended_status(p, placed, created);
  const json& results = status["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0]["request"], "container-1-request-1");
  EXPECT_EQ(status["status"]["reservedFor"][0]["uid"], "uid-bridged");
  EXPECT_EQ(extended_claim_status(p.gpu_resources, "bridged-extended-resources-x7k2p"),
            json::parse(R"({"requestMappings":[{"containerName":"c","requestName":
              "container-1-request-1","resourceName":"nvidia.com/gpu"}],
              "resourceClaimName":"bridged-extended-resources-x7k2p"})"));
  // Held for the claim until it exists: another 6-GPU ask finds 4 free; the claim arriving
  // allocated replaces the hold (never both).
  const std::string hold = c.dra.hold_extended(p, placed, c.mirror);
  EXPECT_EQ(c.mirror.cluster().fully_free_gpus(0), 7);  // 4 whole GPUs, 3 MIG instances
  json arrived = created;
  arrived["status"] = status["status"];
  c.dra.claim(arrived, false, c.mirror);
  EXPECT_EQ(c.mirror.cluster().fully_free_gpus(0), 7);
  EXPECT_FALSE(c.mirror.assumed(claim_holder(hold)).has_value());
  // The bound pod counts its CPU only once its status names the claim.
  pod["status"]["extendedResourceClaimStatus"] = {{"resourceClaimName", "x"}};
  EXPECT_EQ(DraState::counted(pod_from_json(pod)).spec.gpu_count, 0);
  // The implicit name of the class, without any mapping.
  pod["spec"]["containers"][0]["resources"] = {
      {"requests", {{"deviceclass.resource.kubernetes.io/gpu.gpuorch.io", "1"}}}};
  const PodObject implicit = pod_from_json(pod);
  EXPECT_EQ(implicit.spec.gpu_count, 1);
  EXPECT_EQ(c.dra.bridge_class(implicit), "gpu.gpuorch.io");
  // ... which no device plugin offers.
  EXPECT_NE(c.mirror.schedule(c.dra.device_plugin_gpus_only(implicit)).decision.outcome,
            sched::Outcome::kPlaced);
}

std::string filter(ExtenderService& e, const std::string& pod_name) {
  const json args = {{"Pod", claim_pod(pod_name, pod_name)}, {"NodeNames", json::array({kNode})}};
  return e.filter(args);
}

TEST(DraExtender, FiltersOnTheDevicesAClaimCanGetAndHasNoSayOnWhatItDoesNotEvaluate) {
  test::FakeApiServer fake;
  ApiClient api(fake.config());
  ExtenderOptions o;
  o.mirror.policy = "best-fit";
  ExtenderService e(api, o);
  e.on_node(dra_node(), false);
  e.on_dra(slice(), false, "resourceslices");
  e.on_dra(gpu_class(), false, "deviceclasses");
  e.on_dra(allocated(claim("theirs", 1), {"gpu-0"}, "theirs"), false, "resourceclaims");
  e.on_pod(claim_pod("theirs", "theirs", kNode), false);
  for (const char* name : {"three", "four", "regex"}) {
    e.on_dra(claim(name, name == std::string("three") ? 3 : 4,
                   name == std::string("regex") ? R"(device.attributes["x"].y.matches("z"))" : ""),
             false, "resourceclaims");
  }
  e.mark_synced(/*dra_served=*/true);

  // Three of one domain fit; the claim's devices are held until kube-scheduler's allocation is
  // seen, so a second three gets the other domain and a third none.
  for (const char* name : {"three-b", "three-c"}) {
    e.on_dra(claim(name, 3), false, "resourceclaims");
  }
  for (const char* name : {"three", "three-b"}) {
    const json fits = json::parse(filter(e, name));
    EXPECT_EQ(fits["NodeNames"], json::array({kNode})) << name << ": " << fits.dump();
  }
  const json none = json::parse(filter(e, "three-c"));
  EXPECT_EQ(none["NodeNames"], json::array()) << none.dump();
  const json four = json::parse(filter(e, "four"));
  EXPECT_EQ(four["NodeNames"], json::array()) << four.dump();
  const std::string why = four["FailedNodes"].value(kNode, "");
  EXPECT_EQ(why.rfind("ResourceClaims default/four: 0/1 nodes are available:", 0), 0U) << why;
  // A selector outside the subset: kube-scheduler's own DRA plugin decided; every node passes.
  const json regex = json::parse(filter(e, "regex"));
  EXPECT_EQ(regex["NodeNames"], json::array({kNode})) << regex.dump();
  EXPECT_TRUE(regex["FailedNodes"].empty());
}

TEST(DraDoctor, ExplainsAPendingPodWithClaimsInTheSchedulersWords) {
  doctor::ClusterObjects o;
  o.nodes = {dra_node()};
  o.resource_slices = {slice()};
  o.device_classes = {gpu_class()};
  o.resource_claims = {allocated(claim("theirs", 1), {"gpu-0"}, "theirs"), claim("four", 4),
                       claim("five", 5)};
  o.pods = {claim_pod("theirs", "theirs", kNode), claim_pod("four", "four"),
            claim_pod("five", "five")};
  MirrorOptions mo;
  mo.policy = "best-fit";
  const auto four = doctor::explain_pending(o, "default/four", mo);
  ASSERT_EQ(four.size(), 1U);
  EXPECT_EQ(four[0].id, "pod.waiting");
  EXPECT_NE(four[0].what.find("ResourceClaims default/four: 0/1 nodes are available"),
            std::string::npos)
      << four[0].what;
  EXPECT_NE(four[0].evidence.find("requests 4 GPU through ResourceClaims"), std::string::npos)
      << four[0].evidence;
  EXPECT_NE(four[0].evidence.find(
                "DRA GPUs on 1 node(s): 1 used, 6 free (MIG instances: 0 used, 3 free)"),
            std::string::npos)
      << four[0].evidence;
  const auto five = doctor::explain_pending(o, "default/five", mo);
  ASSERT_EQ(five.size(), 1U);
  EXPECT_EQ(five[0].id, "pod.infeasible");
  EXPECT_NE(five[0].what.find("ResourceClaim default/five cannot be allocated on any node"),
            std::string::npos)
      << five[0].what;
}

TEST(DraSimInventory, ResourceSlicesAreAnInventoryWithTheMirrorsTranslation) {
  const json list = {
      {"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array({dra_node(), slice()})}};
  const auto nodes = nodes_from_resource_slices(list, "cluster.json");
  ASSERT_EQ(nodes.size(), 1U);
  EXPECT_EQ(nodes[0].name, kNode);
  EXPECT_EQ(nodes[0].gpu_count, 7);
  EXPECT_EQ(nodes[0].cpu_milli, 32000);  // from the Node
  EXPECT_EQ(nodes[0].gpu_links.size(), 49U);
  // Slices alone: CPU and memory do not limit.
  json slices = {{"kind", "ResourceSliceList"}, {"items", json::array({slice()})}};
  slices["items"][0].erase("kind");
  const auto alone = nodes_from_resource_slices(slices, "slices.json");
  ASSERT_EQ(alone.size(), 1U);
  EXPECT_EQ(alone[0].cpu_milli, kUnlimitedCpuMilli);
  try {
    (void)nodes_from_resource_slices(json::array(), "bad.json");
    FAIL() << "a JSON array is no List";
  } catch (const base::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad.json: not a Kubernetes List", 0), 0U) << e.what();
  }
  try {
    (void)nodes_from_resource_slices({{"items", json::array({dra_node()})}}, "nodes.json");
    FAIL() << "no slice";
  } catch (const base::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no ResourceSlice of a whole GPU"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuorch::k8s
