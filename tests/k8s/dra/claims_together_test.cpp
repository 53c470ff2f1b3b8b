// Several unallocated claims of one pod, several requests for different devices in one claim,
// constraints on the requests they name and distinctAttribute (k8s/mirror/dra_claims.hpp,
// device_assignment.hpp), over the driver's slice of the recorded DGX H100 cut into two NVLink
// domains (GPUs 0-3; 4-6, GPU 7 in MIG mode): the core's GPU picker chooses the union, every
// device goes to one request of one claim, and what cannot be met together says so.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/mirror/device_assignment.hpp"
#include "gpuorch/k8s/mirror/dra_claims.hpp"
#include "gpuorch/sched/gpu_picker.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "k8s/dra/dra_node.hpp"
#include "k8s/k8s_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

constexpr const char* kNode = "dgx";
constexpr const char* kDomain = "gpu.gpuorch.io/nvlinkDomain";

json request(const std::string& name, int count, const std::string& selector = "",
             const std::string& mode = "ExactCount") {
  json e = {{"deviceClassName", "gpu.gpuorch.io"}, {"allocationMode", mode}};
  if (mode == "ExactCount") e["count"] = count;
  if (!selector.empty()) e["selectors"] = json::array({{{"cel", {{"expression", selector}}}}});
  return {{"name", name}, {"exactly", e}};
}

json claim(const std::string& name, const json& requests, const json& constraints = json::array()) {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec", {{"devices", {{"requests", requests}, {"constraints", constraints}}}}}};
}

json match(const std::string& attribute, const json& requests = json()) {
  json c = {{"matchAttribute", attribute}};
  if (!requests.is_null()) c["requests"] = requests;
  return c;
}

json distinct(const std::string& attribute) { return {{"distinctAttribute", attribute}}; }

int domain(int gpu) { return gpu < 4 ? 0 : 4; }

struct Fixture {
  DraInventory inv;
  std::map<std::string, ClaimObject> claims;
  std::map<std::string, DeviceClassObject> classes;
  std::set<std::string> gpu_nodes{kNode};
  cluster::NodeSpec spec;

  Fixture() {
    dra::SliceOptions o;
    o.node_name = kNode;
    inv.update_slice(dra::resource_slice(dra::two_domain_host(), o), false);
    DeviceClassObject gpu;
    gpu.selectors = {
        R"(device.driver == "gpu.gpuorch.io" && device.attributes["gpu.gpuorch.io"].type == "gpu")"};
    classes["gpu.gpuorch.io"] = gpu;
    spec.name = kNode;
    spec.cpu_milli = 64000;
    spec.memory_mib = 1 << 20;
    inv.apply(spec);
  }
  ClaimPlan plan(const std::vector<json>& objects) {
    PodObject pod;
    pod.uid = "pod-uid";
    pod.ns = "default";
    pod.name = "p";
    for (const json& c : objects) {
      const ClaimObject o = claim_from_json(c);
      claims[o.key()] = o;
      pod.claims.push_back({o.name, o.name, ""});
    }
    return plan_claims(pod, claims, classes, inv, gpu_nodes);
  }
  // The picker's GPUs for the choice with `free` GPUs free, and who gets which.
  std::vector<int> pick(const ClaimChoice& c, const std::set<int>& free) const {
    std::vector<std::int32_t> left(static_cast<std::size_t>(spec.gpu_count), 0);
    for (const int g : free) left[static_cast<std::size_t>(g)] = 1000;
    EXPECT_EQ(c.groups.size(), 1U);
    if (c.groups.empty()) return {};
    return sched::pick_gpus_in_groups(left, c.gpus, spec.gpu_links, c.groups[0].groups);
  }
  // request name -> its GPUs
  std::map<std::string, std::vector<int>> given(const ClaimChoice& c,
                                                const std::vector<int>& gpus) const {
    std::map<std::string, std::vector<int>> out;
    for (const DeviceResult& r : device_results(c, kNode, gpus, inv)) {
      out[c.parts.at(r.part).claim + ":" + c.parts.at(r.part).request].push_back(r.gpu);
    }
    return out;
  }
};

// The scheduler core over the fixture's node: a pod restricted to a choice's groups.
struct Core {
  cluster::Cluster cluster;
  std::unique_ptr<sched::Policy> policy;
  sched::Scheduler scheduler;
  sched::RequestResolver resolver;
  explicit Core(const cluster::NodeSpec& spec)
      : cluster({spec}),
        policy(sched::make_policy("tightest-fit", {&cluster, nullptr, nullptr, nullptr})),
        scheduler(cluster, *policy),
        resolver(cluster) {}
  sched::Decision place(int count, const std::vector<workload::NodeGpuGroups>& groups) {
    workload::PodSpec ask;
    ask.gpu_count = count;
    ask.gpu_milli = 1000;
    ask.gpus_restricted = true;
    ask.gpu_groups = groups;
    return scheduler.schedule(resolver.resolve(ask));
  }
};

const std::set<int> kAllFree{0, 1, 2, 3, 4, 5, 6};

TEST(DraClaimsTogether, APodsClaimsAreAllocatedOnOneNodeNeverOneDeviceTwice) {
  Fixture f;
  const ClaimPlan plan =
      f.plan({claim("pair", json::array({request("gpus", 2)}), json::array({match(kDomain)})),
              claim("one", json::array({request("gpus", 1)}))});
  ASSERT_EQ(plan.refused, "");
  EXPECT_EQ(plan.claims, (std::vector<std::string>{"default/pair", "default/one"}));
  ASSERT_EQ(plan.choices.size(), 1U);
  const ClaimChoice& c = plan.choices[0];
  EXPECT_EQ(c.gpus, 3);
  // Every set of three with a pair of one domain: all of them on this node.
  ASSERT_EQ(c.groups.size(), 1U);
  EXPECT_EQ(c.groups[0].groups.size(), 35U);  // C(7,3): any three hold a pair of one domain

  // The picker chooses the union: the best connected three, the 3-GPU domain, so the 4-GPU one
  // stays whole.
  const std::vector<int> gpus = f.pick(c, kAllFree);
  EXPECT_EQ(gpus, (std::vector<int>{4, 5, 6}));
  const auto given = f.given(c, gpus);
  ASSERT_EQ(given.at("default/pair:gpus").size(), 2U);
  ASSERT_EQ(given.at("default/one:gpus").size(), 1U);
  std::set<int> all;
  for (const auto& [who, list] : given) all.insert(list.begin(), list.end());
  EXPECT_EQ(all.size(), 3U) << "a device given twice";
  const auto& pair = given.at("default/pair:gpus");
  EXPECT_EQ(domain(pair[0]), domain(pair[1]));

  // Only GPUs 0, 4 and 5 free: the pair takes 4 and 5 and the single claim GPU 0.
  const std::vector<int> scattered = f.pick(c, {0, 4, 5});
  ASSERT_EQ(scattered, (std::vector<int>{0, 4, 5}));
  const auto split = f.given(c, scattered);
  EXPECT_EQ(split.at("default/pair:gpus"), (std::vector<int>{4, 5}));
  EXPECT_EQ(split.at("default/one:gpus"), (std::vector<int>{0}));
  // One GPU of each domain free: no pair, nothing fits.
  EXPECT_TRUE(f.pick(c, {0, 4}).empty());

  // Each claim's status names its own devices only.
  PodObject pod;
  pod.uid = "pod-uid";
  pod.name = "p";
  const auto results = device_results(c, kNode, scattered, f.inv);
  const json one =
      claim_status_for(f.claims.at("default/one"), pod, kNode, results, c.parts, f.inv);
  const json& devices = one["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(devices.size(), 1U);
  EXPECT_EQ(devices[0]["device"], "gpu-0");
  const json pair_status =
      claim_status_for(f.claims.at("default/pair"), pod, kNode, results, c.parts, f.inv);
  EXPECT_EQ(pair_status["status"]["allocation"]["devices"]["results"].size(), 2U);

  // The core places the pod with the union's groups: on GPUs 4-6, a second pod on three of
  // GPUs 0-3, a third waits.
  Core core(f.spec);
  const auto first = core.place(c.gpus, c.groups);
  ASSERT_EQ(first.outcome, sched::Outcome::kPlaced);
  EXPECT_EQ(first.placement.gpus, (std::vector<int>{4, 5, 6}));
  const auto second = core.place(c.gpus, c.groups);
  ASSERT_EQ(second.outcome, sched::Outcome::kPlaced);
  EXPECT_EQ(domain(second.placement.gpus[0]), 0);
  EXPECT_EQ(core.place(c.gpus, c.groups).outcome, sched::Outcome::kWaiting);
}

TEST(DraClaimsTogether, DifferentRequestsInOneClaimEachGetTheirDevices) {
  Fixture f;
  const std::string low = R"(device.attributes["gpu.gpuorch.io"].index < 4)";
  const std::string high = R"(device.attributes["gpu.gpuorch.io"].index >= 4)";
  // One GPU of each half: every set holds one of each, and each request gets its own.
  const ClaimPlan both =
      f.plan({claim("both", json::array({request("low", 1, low), request("high", 1, high)}))});
  ASSERT_EQ(both.refused, "");
  ASSERT_EQ(both.choices.size(), 1U);
  EXPECT_EQ(both.choices[0].groups[0].groups.size(), 12U);  // 4 x 3
  const auto gpus = f.pick(both.choices[0], kAllFree);
  ASSERT_EQ(gpus.size(), 2U);
  const auto given = f.given(both.choices[0], gpus);
  EXPECT_LT(given.at("default/both:low")[0], 4);
  EXPECT_GE(given.at("default/both:high")[0], 4);
  // The same under matchAttribute nvlinkDomain: no node has them in one domain.
  const ClaimPlan apart =
      f.plan({claim("apart", json::array({request("low", 1, low), request("high", 1, high)}),
                    json::array({match(kDomain)}))});
  EXPECT_NE(apart.refused.find("ResourceClaim default/apart cannot be allocated on any node: no "
                               "node has devices for requests low, high together"),
            std::string::npos)
      << apart.refused;
  EXPECT_NE(apart.refused.find("matchAttribute gpu.gpuorch.io/nvlinkDomain"), std::string::npos);

  // A constraint holds only for the requests it names: a pair of one domain and one GPU anywhere
  // (GPUs 0, 1 and 5 free: the pair 0-1 and GPU 5). Applied to all, nothing would fit.
  const ClaimPlan named =
      f.plan({claim("named", json::array({request("pair", 2), request("any", 1)}),
                    json::array({match(kDomain, json::array({"pair"}))}))});
  ASSERT_EQ(named.refused, "");
  ASSERT_EQ(named.choices.size(), 1U);
  const auto named_gpus = f.pick(named.choices[0], {0, 1, 5});
  ASSERT_EQ(named_gpus, (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(f.given(named.choices[0], named_gpus).at("default/named:pair"),
            (std::vector<int>{0, 1}));
  const ClaimPlan strict =
      f.plan({claim("strict", json::array({request("pair", 2), request("any", 1)}),
                    json::array({match(kDomain)}))});
  ASSERT_EQ(strict.refused, "");
  EXPECT_TRUE(f.pick(strict.choices[0], {0, 1, 5}).empty());

  // firstAvailable per request: eight GPUs never fit, so two of one request with one of another.
  json first = {
      {"name", "big"},
      {"firstAvailable",
       json::array({{{"name", "eight"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 8}},
                    {{"name", "two"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 2}},
                    {{"name", "one"}, {"deviceClassName", "gpu.gpuorch.io"}, {"count", 1}}})}};
  const ClaimPlan prioritized =
      f.plan({claim("prioritized", json::array({first, request("high", 1, high)}),
                    json::array({match(kDomain, json::array({"big/two"}))}))});
  ASSERT_EQ(prioritized.refused, "");
  ASSERT_EQ(prioritized.choices.size(), 2U);
  EXPECT_EQ(prioritized.choices[0].parts[0].request, "big/two");
  EXPECT_EQ(prioritized.choices[0].gpus, 3);
  EXPECT_EQ(prioritized.choices[1].parts[0].request, "big/one");
  EXPECT_EQ(prioritized.choices[1].gpus, 2);
  EXPECT_EQ(prioritized.choices[0].constraints[0].parts, (std::vector<std::size_t>{0}));
  EXPECT_TRUE(prioritized.choices[1].constraints[0].parts.empty());  // names big/two only

  // All with another request: every GPU of the upper half, and one more.
  const ClaimPlan all =
      f.plan({claim("all", json::array({request("upper", 0, high, "All"), request("extra", 1)}))});
  ASSERT_EQ(all.refused, "");
  ASSERT_EQ(all.choices.size(), 1U);
  EXPECT_EQ(all.choices[0].gpus, 4);
  const auto all_gpus = f.pick(all.choices[0], kAllFree);
  ASSERT_EQ(all_gpus.size(), 4U);
  const auto all_given = f.given(all.choices[0], all_gpus);
  EXPECT_EQ(all_given.at("default/all:upper"), (std::vector<int>{4, 5, 6}));
  EXPECT_LT(all_given.at("default/all:extra")[0], 4);
  // All fails when one of its devices is taken.
  EXPECT_TRUE(f.pick(all.choices[0], {0, 1, 2, 3, 4, 5}).empty());
}

TEST(DraClaimsTogether, DistinctAttributeGivesPairwiseDifferentValues) {
  Fixture f;
  const ClaimPlan spread = f.plan(
      {claim("spread", json::array({request("gpus", 2)}), json::array({distinct(kDomain)}))});
  ASSERT_EQ(spread.refused, "");
  ASSERT_EQ(spread.choices.size(), 1U);
  for (const auto& set : spread.choices[0].groups[0].groups) {
    ASSERT_EQ(set.size(), 2U);
    EXPECT_NE(domain(set[0]), domain(set[1]));
  }
  const auto gpus = f.pick(spread.choices[0], kAllFree);
  ASSERT_EQ(gpus.size(), 2U);
  EXPECT_NE(domain(gpus[0]), domain(gpus[1]));
  // Only one domain free: nothing fits.
  EXPECT_TRUE(f.pick(spread.choices[0], {0, 1, 2, 3}).empty());
  // Three distinct domains do not exist.
  const ClaimPlan three =
      f.plan({claim("three", json::array({request("gpus", 3)}), json::array({distinct(kDomain)}))});
  EXPECT_NE(three.refused.find("distinctAttribute gpu.gpuorch.io/nvlinkDomain"), std::string::npos)
      << three.refused;
  // Distinct across two requests of a claim, and on an attribute every GPU holds its own of.
  const ClaimPlan roots =
      f.plan({claim("roots", json::array({request("a", 2), request("b", 2)}),
                    json::array({distinct("resource.kubernetes.io/pcieRoot")}))});
  ASSERT_EQ(roots.refused, "");
  EXPECT_EQ(f.pick(roots.choices[0], kAllFree).size(), 4U);
}

TEST(DraClaimsTogether, TheAssignmentSearchIsExactAndBounded) {
  // Two requests over overlapping devices: the narrow one must get its only device.
  const std::vector<RequestSlot> slots = {{{0, 1, 2}, false, 2}, {{2}, false, 1}};
  const AttributeOf none = [](int, const std::string&) { return std::optional<std::string>(); };
  const auto a = assign_devices(std::vector<int>{0, 1, 2}, slots, {}, none);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (std::vector<std::size_t>{0, 0, 1}));
  EXPECT_FALSE(assign_devices(std::vector<int>{0, 1, 3}, slots, {}, none).has_value());
  // A constraint on an attribute no device has: nothing.
  EXPECT_FALSE(assign_devices(std::vector<int>{0, 1, 2}, slots, {{{0}, "x", false}}, none));
  // Distinct values that do not exist fail at once, however many devices.
  std::vector<int> many(64);
  for (int i = 0; i < 64; ++i) many[static_cast<std::size_t>(i)] = i;
  const AttributeOf same = [](int, const std::string&) { return std::optional<std::string>("v"); };
  EXPECT_TRUE(valid_unions({{many, false, 32}, {many, false, 32}}, {{{0, 1}, "x", true}}, same)
                  .sets.empty());
  // 10 of 20 devices: C(20,10) = 184,756 sets; the search keeps the first valid ones and says so.
  const std::vector<int> twenty(many.begin(), many.begin() + 20);
  const ValidUnions u = valid_unions({{twenty, false, 10}}, {}, none);
  EXPECT_TRUE(u.truncated);
  EXPECT_EQ(u.sets.size(), kUnionsKept);
}

TEST(DraClaimsTogether, MigInstancesAreDevicesAClaimTakesWhole) {
  Fixture f;
  // GPU 7 is in MIG mode: its three instances are GPUs 7-9 of the core's node, after the seven
  // whole GPUs; the simulator's inventory takes the whole GPUs only.
  EXPECT_EQ(f.spec.gpu_count, 10);
  ASSERT_EQ(f.inv.node(kNode)->whole_gpus, 7);
  EXPECT_EQ(f.inv.gpu_of("gpu.gpuorch.io", kNode, "gpu-7-mig-1-0"),
            std::make_pair(std::string(kNode), 7));
  cluster::NodeSpec whole;
  whole.name = kNode;
  ASSERT_TRUE(f.inv.apply(whole, false));
  EXPECT_EQ(whole.gpu_count, 7);
  EXPECT_EQ(whole.gpu_links.size(), 49U);
  EXPECT_EQ(whole.gpu_links[1], f.spec.gpu_links[1]);

  DeviceClassObject mig;
  mig.selectors = {
      R"(device.driver == "gpu.gpuorch.io" && device.attributes["gpu.gpuorch.io"].type == "mig")"};
  f.classes["mig.gpuorch.io"] = mig;
  json slice = request("slice", 1, R"(device.attributes["gpu.gpuorch.io"].profile == "3g.40gb")");
  slice["exactly"]["deviceClassName"] = "mig.gpuorch.io";
  const ClaimPlan one = f.plan({claim("mig", json::array({slice}))});
  ASSERT_EQ(one.refused, "");
  ASSERT_EQ(one.choices.size(), 1U);
  EXPECT_EQ(one.choices[0].groups[0].groups, (std::vector<std::vector<int>>{{7}}));
  PodObject pod;
  pod.uid = "pod-uid";
  pod.name = "p";
  const json status = claim_status_for(f.claims.at("default/mig"), pod, kNode,
                                       device_results(one.choices[0], kNode, {7}, f.inv),
                                       one.choices[0].parts, f.inv);
  EXPECT_EQ(status["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-7-mig-1-0");
  // Whole-GPU requests never take an instance: All is the seven GPUs.
  const ClaimPlan all = f.plan({claim("all", json::array({request("gpus", 0, "", "All")}))});
  ASSERT_EQ(all.choices.size(), 1U);
  EXPECT_EQ(all.choices[0].groups[0].groups,
            (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6}}));
  // A pod with a whole-GPU pair and a 3g.40gb instance: the union holds GPU 7's instance.
  const ClaimPlan both =
      f.plan({claim("pair", json::array({request("gpus", 2)}), json::array({match(kDomain)})),
              claim("mig", json::array({slice}))});
  ASSERT_EQ(both.refused, "");
  const auto gpus = f.pick(both.choices[0], {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_EQ(gpus.size(), 3U);
  EXPECT_EQ(gpus.back(), 7);
  EXPECT_EQ(domain(gpus[0]), domain(gpus[1]));

  // The core: the instance is one unit; a second claim for a 3g.40gb waits (fits when it is
  // free), a whole-GPU claim is not affected.
  Core core(f.spec);
  const auto first = core.place(1, one.choices[0].groups);
  ASSERT_EQ(first.outcome, sched::Outcome::kPlaced);
  EXPECT_EQ(first.placement.gpus, (std::vector<int>{7}));
  EXPECT_EQ(core.place(1, one.choices[0].groups).outcome, sched::Outcome::kWaiting);
  EXPECT_EQ(core.place(7, all.choices[0].groups).outcome, sched::Outcome::kPlaced);
}

TEST(DraClaimsTogether, FiveHundredNodesArePlannedOnceThenFromTheCache) {
  // 500 DGX nodes (3,500 whole GPUs): a pod with a one-domain pair and a single GPU.
  Fixture f;
  dra::SliceOptions o;
  for (int i = 0; i < 500; ++i) {
    o.node_name = "dgx-" + std::to_string(i);
    f.inv.update_slice(dra::resource_slice(dra::two_domain_host(), o), false);
    f.gpu_nodes.insert(o.node_name);
  }
  const std::vector<json> objects = {
      claim("pair", json::array({request("gpus", 2)}), json::array({match(kDomain)})),
      claim("one", json::array({request("gpus", 1)}))};
  PodObject pod;
  pod.ns = "default";
  for (const json& c : objects) {
    const ClaimObject obj = claim_from_json(c);
    f.claims[obj.key()] = obj;
    pod.claims.push_back({obj.name, obj.name, ""});
  }
  EligibilityCache cache;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const ClaimPlan first = plan_claims(pod, f.claims, f.classes, f.inv, f.gpu_nodes, &cache);
  const auto t1 = Clock::now();
  const ClaimPlan again = plan_claims(pod, f.claims, f.classes, f.inv, f.gpu_nodes, &cache);
  const auto t2 = Clock::now();
  std::cout << "two claims at 501 nodes: first plan "
            << std::chrono::duration<double, std::milli>(t1 - t0).count() << " ms, from the cache "
            << std::chrono::duration<double, std::milli>(t2 - t1).count() << " ms\n";
  ASSERT_EQ(first.refused, "");
  ASSERT_EQ(first.choices.size(), 1U);
  EXPECT_EQ(first.choices[0].groups.size(), 501U);  // every node, the fixture's own included
  for (const auto& g : first.choices[0].groups) EXPECT_EQ(g.groups.size(), 35U) << g.node;
  ASSERT_EQ(again.choices.size(), 1U);
  EXPECT_EQ(again.choices[0].groups, first.choices[0].groups);
}

}  // namespace
}  // namespace gpuorch::k8s
