// A pod's ResourceClaims in the core's terms (k8s/mirror/dra_claims.hpp) over the driver's slice
// of the recorded DGX H100 cut into two NVLink domains, and the core placing them: eligible GPUs
// grouped by matchAttribute, the GPU picker choosing inside one group, and every claim that
// cannot be met explained.
#include <gtest/gtest.h>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/mirror/dra_claims.hpp"
#include "gpuorch/k8s/mirror/dra_devices.hpp"
#include "gpuorch/sched/gpu_picker.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "k8s/dra/dra_node.hpp"
#include "k8s/k8s_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

constexpr const char* kNode = "dgx";

DraInventory two_domain_inventory() {
  const topology::Host h = dra::two_domain_host();
  dra::SliceOptions o;
  o.node_name = kNode;
  DraInventory inv;
  const json slice = dra::resource_slice(h, o);
  EXPECT_TRUE(inv.update_slice(slice, false));
  return inv;
}

json claim(const std::string& name, const json& requests, const json& constraints = json::array()) {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec", {{"devices", {{"requests", requests}, {"constraints", constraints}}}}}};
}

json exactly(const std::string& name, int count, const json& selectors = json::array(),
             const std::string& mode = "ExactCount") {
  json e = {{"deviceClassName", "gpu.gpuorch.io"}, {"allocationMode", mode}};
  if (mode == "ExactCount") e["count"] = count;
  if (!selectors.empty()) e["selectors"] = selectors;
  return {{"name", name}, {"exactly", e}};
}

json cel(const std::string& e) { return json::array({{{"cel", {{"expression", e}}}}}); }

json one_domain() { return json::array({{{"matchAttribute", "gpu.gpuorch.io/nvlinkDomain"}}}); }

struct Fixture {
  DraInventory inv = two_domain_inventory();
  std::map<std::string, ClaimObject> claims;
  std::map<std::string, DeviceClassObject> classes;
  std::set<std::string> gpu_nodes{kNode};

  Fixture() {
    DeviceClassObject gpu;
    gpu.selectors = {
        R"(device.driver == "gpu.gpuorch.io" && device.attributes["gpu.gpuorch.io"].type == "gpu")"};
    classes["gpu.gpuorch.io"] = gpu;
  }
  ClaimPlan plan(const json& c) {
    const ClaimObject o = claim_from_json(c);
    claims[o.key()] = o;
    PodObject pod;
    pod.uid = "pod-uid";
    pod.ns = "default";
    pod.name = "p";
    pod.claims = {{"gpus", o.name, ""}};
    return plan_claims(pod, claims, classes, inv, gpu_nodes);
  }
};

TEST(DraClaimPlan, TheSliceIsTheNodesGpusWithItsTopology) {
  const DraInventory inv = two_domain_inventory();
  cluster::NodeSpec spec;
  spec.name = kNode;
  ASSERT_TRUE(inv.apply(spec));
  // GPU 7 is in MIG mode: its three instances come after the seven whole GPUs.
  EXPECT_EQ(spec.gpu_count, 10);
  EXPECT_EQ(spec.gpu_model, "NVIDIA-H100-80GB-HBM3");
  EXPECT_GT(spec.gpu_memory_mib, 80000);
  ASSERT_EQ(spec.gpu_links.size(), 100U);
  // NVLink inside a domain beats anything across.
  EXPECT_GT(spec.gpu_links[0 * 10 + 1], spec.gpu_links[0 * 10 + 4]);
  EXPECT_EQ(inv.gpu_of("gpu.gpuorch.io", kNode, "gpu-5"), std::make_pair(std::string(kNode), 5));
  EXPECT_EQ(inv.gpu_of("gpu.gpuorch.io", kNode, "gpu-7-mig-1-0"),
            std::make_pair(std::string(kNode), 7));
  EXPECT_FALSE(inv.gpu_of("gpu.gpuorch.io", kNode, "gpu-7").has_value());  // not published
  // A node that also advertises nvidia.com/gpu keeps the device plugin's GPUs.
  cluster::NodeSpec plugin;
  plugin.name = kNode;
  plugin.gpu_count = 8;
  EXPECT_FALSE(inv.apply(plugin));
}

TEST(DraClaimPlan, MatchAttributeGroupsTheEligibleGpusAndThePickerStaysInOne) {
  Fixture f;
  const ClaimPlan plan = f.plan(claim("two", json::array({exactly("gpus", 2)}), one_domain()));
  ASSERT_EQ(plan.refused, "");
  // The same plan from the eligibility cache (what the scheduler keeps between decisions).
  EligibilityCache cache;
  PodObject same_ask;
  same_ask.ns = "default";
  same_ask.claims = {{"gpus", "two", ""}};
  for (int i = 0; i < 2; ++i) {
    const ClaimPlan cached = plan_claims(same_ask, f.claims, f.classes, f.inv, f.gpu_nodes, &cache);
    ASSERT_EQ(cached.choices.size(), 1U);
    EXPECT_EQ(cached.choices[0].groups, plan.choices[0].groups);
  }
  EXPECT_EQ(cache.size(), 1U);
  ASSERT_EQ(plan.choices.size(), 1U);
  const ClaimChoice& c = plan.choices[0];
  EXPECT_EQ(c.gpus, 2);
  ASSERT_EQ(c.groups.size(), 1U);
  EXPECT_EQ(c.groups[0].groups, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6}}));

  // The core over that node: gpus 0 and 4..6 taken leaves 1, 2, 3 and nothing across.
  cluster::NodeSpec spec;
  spec.name = kNode;
  spec.cpu_milli = 64000;
  spec.memory_mib = 1 << 20;
  f.inv.apply(spec);
  std::vector<std::int32_t> left(static_cast<std::size_t>(spec.gpu_count), 1000);
  left[0] = 0;
  left[5] = 0;
  const auto gpus = sched::pick_gpus_in_groups(left, 2, spec.gpu_links, c.groups[0].groups);
  ASSERT_EQ(gpus.size(), 2U);
  EXPECT_EQ((gpus[0] < 4), (gpus[1] < 4)) << gpus[0] << "," << gpus[1];
  left[4] = 0;  // 6 alone in its domain now
  EXPECT_EQ(sched::pick_gpus_in_groups(left, 3, spec.gpu_links, c.groups[0].groups),
            (std::vector<int>{1, 2, 3}));
  left[1] = 0;
  EXPECT_TRUE(sched::pick_gpus_in_groups(left, 3, spec.gpu_links, c.groups[0].groups).empty());

  cluster::Cluster cluster({spec});
  auto policy = sched::make_policy("best-fit", {&cluster, nullptr, nullptr, nullptr});
  sched::Scheduler scheduler(cluster, *policy);
  sched::RequestResolver resolver(cluster);
  workload::PodSpec pod;
  pod.gpu_count = 4;
  pod.gpu_milli = 1000;
  pod.gpus_restricted = true;
  pod.gpu_groups = c.groups;
  const auto four = scheduler.schedule(resolver.resolve(pod));
  ASSERT_EQ(four.outcome, sched::Outcome::kPlaced);
  EXPECT_EQ(four.placement.gpus, (std::vector<int>{0, 1, 2, 3}));
  // Three GPUs are free (4-6, one domain) but the next 4-GPU claim has no group with room.
  const auto again = scheduler.schedule(resolver.resolve(pod));
  EXPECT_EQ(again.outcome, sched::Outcome::kWaiting);
  pod.gpu_count = 3;
  EXPECT_EQ(scheduler.schedule(resolver.resolve(pod)).placement.gpus, (std::vector<int>{4, 5, 6}));
}

TEST(DraClaimPlan, ClaimsThatCannotBeMetSayWhy) {
  Fixture f;
  const ClaimPlan five = f.plan(claim("five", json::array({exactly("gpus", 5)}), one_domain()));
  EXPECT_NE(five.refused.find("matchAttribute gpu.gpuorch.io/nvlinkDomain cannot be satisfied with "
                              "5 devices on any node: at most 4"),
            std::string::npos)
      << five.refused;
  const ClaimPlan pcie =
      f.plan(claim("pcie", json::array({exactly("gpus", 2)}),
                   json::array({{{"matchAttribute", "resource.kubernetes.io/pcieRoot"}}})));
  EXPECT_NE(pcie.refused.find("at most 1"), std::string::npos) << pcie.refused;
  const ClaimPlan nine = f.plan(claim("nine", json::array({exactly("gpus", 9)})));
  EXPECT_NE(nine.refused.find("no node has 9 devices"), std::string::npos) << nine.refused;
  const ClaimPlan none = f.plan(
      claim("none", json::array({exactly(
                        "gpus", 1, cel(R"(device.attributes["gpu.gpuorch.io"].index > 100)"))})));
  EXPECT_NE(none.refused.find("selectors exclude all 7 devices"), std::string::npos)
      << none.refused;
  const std::string regex = R"(device.attributes["gpu.gpuorch.io"].productName.matches("H1.*"))";
  const ClaimPlan outside = f.plan(claim("outside", json::array({exactly("gpus", 1, cel(regex))})));
  EXPECT_NE(outside.refused.find("`" + regex + "` is outside the CEL subset"), std::string::npos)
      << outside.refused;
  json unknown = claim("unknown", json::array({exactly("gpus", 1)}));
  unknown["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic.example.com";
  EXPECT_NE(f.plan(unknown).waiting.find("DeviceClass nic.example.com does not exist"),
            std::string::npos);
  PodObject waiting;
  waiting.ns = "default";
  waiting.claims = {{"gpus", "", "gpu-template"}};
  EXPECT_NE(plan_claims(waiting, f.claims, f.classes, f.inv, f.gpu_nodes)
                .waiting.find("template gpu-template has not been made yet"),
            std::string::npos);
  waiting.claims = {{"gpus", "missing", ""}};
  EXPECT_NE(plan_claims(waiting, f.claims, f.classes, f.inv, f.gpu_nodes)
                .waiting.find("ResourceClaim default/missing does not exist yet"),
            std::string::npos);
}

TEST(DraClaimPlan, FirstAvailableAndAllAreChoicesInOrder) {
  Fixture f;
  json first = {
      {"name", "gpus"},
      {"firstAvailable",
       json::array({{{"name", "eight"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 8}},
                    {{"name", "four"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 4}},
                    {{"name", "two"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 2}}})}};
  const ClaimPlan p = f.plan(claim("first", json::array({first}), one_domain()));
  ASSERT_EQ(p.refused, "");
  ASSERT_EQ(p.choices.size(), 2U);  // eight can never be met on this node
  EXPECT_EQ(p.choices[0].gpus, 4);
  EXPECT_EQ(p.choices[0].parts[0].request, "gpus/four");
  EXPECT_EQ(p.choices[1].parts[0].request, "gpus/two");
  const ClaimPlan all =
      f.plan(claim("all", json::array({exactly("gpus", 0, json::array(), "All")})));
  ASSERT_EQ(all.choices.size(), 1U);
  EXPECT_EQ(all.choices[0].gpus, 7);
  // Two requests for the same devices are one ask; their results keep their requests.
  const ClaimPlan two = f.plan(claim("two", json::array({exactly("a", 1), exactly("b", 2)})));
  ASSERT_EQ(two.choices.size(), 1U);
  EXPECT_EQ(two.choices[0].gpus, 3);
  ASSERT_EQ(two.choices[0].parts.size(), 2U);

  // What each asks for, as the policy's workload history counts it.
  EXPECT_EQ(requested_gpus(f.claims.at("default/first")), 8);  // the first subrequest
  EXPECT_EQ(requested_gpus(f.claims.at("default/all")), 0);    // depends on the node
  EXPECT_EQ(requested_gpus(f.claims.at("default/two")), 3);

  // The written allocation: one result per GPU, in request order, the node pinned.
  PodObject pod;
  pod.uid = "pod-uid";
  pod.name = "p";
  const json status = claim_status_for(f.claims.at("default/two"), pod, kNode,
                                       device_results(two.choices[0], kNode, {1, 2, 3}, f.inv),
                                       two.choices[0].parts, f.inv);
  const json& results = status["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[0]["request"], "a");
  EXPECT_EQ(results[0]["device"], "gpu-1");
  EXPECT_EQ(results[2]["request"], "b");
  EXPECT_EQ(results[2]["pool"], kNode);
  EXPECT_EQ(status["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
                  ["values"][0],
            kNode);
  EXPECT_EQ(status["status"]["reservedFor"][0]["uid"], "pod-uid");
  // Released by its only consumer: deallocated.
  const json released = claim_released(claim_from_json(status), "pod-uid");
  EXPECT_FALSE(released["status"].contains("allocation"));
  EXPECT_TRUE(claim_released(claim_from_json(status), "someone-else").is_null());
}

TEST(DraClaimPlan, APodsClaimsAreReadFromItsSpecAndStatus) {
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "default"}, {"uid", "u"}}},
      {"spec",
       {{"resourceClaims", json::array({{{"name", "a"}, {"resourceClaimName", "shared"}},
                                        {{"name", "b"}, {"resourceClaimTemplateName", "t"}},
                                        {{"name", "c"}, {"resourceClaimTemplateName", "t"}},
                                        "not an object"})}}},
      {"status",
       {{"resourceClaimStatuses",
         json::array({{{"name", "b"}, {"resourceClaimName", "p-b-x"}}})}}}};
  const PodObject p = pod_from_json(pod);
  ASSERT_EQ(p.claims.size(), 4U);
  EXPECT_EQ(p.claims[0], (PodClaim{"a", "shared", ""}));
  EXPECT_EQ(p.claims[1], (PodClaim{"b", "p-b-x", "t"}));
  EXPECT_EQ(p.claims[2], (PodClaim{"c", "", "t"}));  // not made yet
  EXPECT_EQ(p.unevaluated, "");                      // evaluated, no longer refused
}

}  // namespace
}  // namespace gpuorch::k8s
