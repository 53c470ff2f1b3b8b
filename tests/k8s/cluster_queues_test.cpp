// The cluster's Queues as the job layer's tree (`gpuorch scheduler --queues`): objects as the API
// server sends them build the tree the simulator's reader would; the default queue is there unless
// the cluster defines one; a set the reader refuses keeps the last good tree and says why once.
#include "gpuorch/k8s/mirror/cluster_queues.hpp"

#include <gtest/gtest.h>

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

json queue(const std::string& name, const std::string& parent, int limit) {
  json q = {{"apiVersion", "scheduling.run.ai/v2"},
            {"kind", "Queue"},
            {"metadata", {{"name", name}, {"uid", "u-" + name}, {"resourceVersion", "7"}}},
            {"spec", {{"resources", {{"gpu", {{"quota", 1}, {"limit", limit}}}}}}},
            {"status", {{"allocated", {{"gpu", "1"}}}}}};
  if (!parent.empty()) q["spec"]["parentQueue"] = parent;
  return q;
}

TEST(ClusterQueues, BuildsTheTreeWithTheDefaultQueue) {
  ClusterQueues qs;
  ASSERT_TRUE(qs.leaf("").has_value());  // the default queue, before any object
  EXPECT_EQ(qs.tree().spec(*qs.leaf("")).name, kDefaultQueue);
  EXPECT_EQ(qs.update(queue("lab", "", 3), false), "");
  EXPECT_EQ(qs.update(queue("team-a", "lab", 2), false), "");
  ASSERT_TRUE(qs.leaf("team-a").has_value());
  EXPECT_FALSE(qs.leaf("lab").has_value());  // not a leaf: holds no pods
  EXPECT_FALSE(qs.leaf("nope").has_value());
  EXPECT_TRUE(qs.leaf("").has_value());
  EXPECT_EQ(qs.tree().limit(*qs.leaf("team-a"))[0], 2000.0);  // milli-GPUs
  // A cluster's own queue named default replaces the added one.
  EXPECT_EQ(qs.update(queue(kDefaultQueue, "lab", 1), false), "");
  EXPECT_EQ(qs.tree().limit(*qs.leaf(""))[0], 1000.0);
  EXPECT_EQ(qs.update(queue(kDefaultQueue, "", 1), true), "");
  EXPECT_TRUE(qs.leaf("").has_value());
  EXPECT_EQ(qs.tree().size(), 3U);  // lab, team-a, the added default
}

TEST(ClusterQueues, ARefusedSetKeepsTheLastGoodTreeAndSaysSoOnce) {
  ClusterQueues qs;
  ASSERT_EQ(qs.update(queue("team-a", "", 2), false), "");
  // A parent that does not exist: refused, with the reader's words, the tree unchanged.
  const std::string refused = qs.update(queue("team-b", "ghost", 2), false);
  EXPECT_NE(refused.find("parentQueue 'ghost' is not defined"), std::string::npos) << refused;
  EXPECT_TRUE(qs.leaf("team-a").has_value());
  EXPECT_FALSE(qs.leaf("team-b").has_value());
  // The same refusal again is not repeated; the fix makes the set good again.
  EXPECT_EQ(qs.update(queue("team-b", "ghost", 2), false), "");
  EXPECT_EQ(qs.update(queue("ghost", "", -1), false), "");
  EXPECT_TRUE(qs.leaf("team-b").has_value());
  // KAI's fields gpuorch does not act on are left out, named once, and the queue counts.
  json kai = queue("team-c", "", 4);
  kai["spec"]["preemptMinRuntime"] = "10m";
  kai["spec"]["reclaimMinRuntime"] = "5m";
  const std::string left_out = qs.update(kai, false);
  EXPECT_EQ(left_out,
            "queue team-c: spec fields gpuorch does not act on are left out: preemptMinRuntime, "
            "reclaimMinRuntime");
  EXPECT_TRUE(qs.leaf("team-c").has_value());
  EXPECT_EQ(qs.update(kai, false), "");
  // Objects without a name are left out with a line.
  EXPECT_FALSE(qs.update(json{{"kind", "Queue"}}, false).empty());
  EXPECT_FALSE(qs.update(json::array(), false).empty());
}

TEST(ClusterQueues, ReadsQuotasPerGpuModelAndWritesTheirStatus) {
  ClusterQueues qs;
  json q = queue("team-a", "", -1);
  q["spec"]["resources"]["gpuModels"] = json::array(
      {{{"model", "H100"}, {"quota", 2}, {"limit", 4}}, {{"model", "A100"}, {"quota", 1}}});
  EXPECT_EQ(qs.update(q, false), "");  // read, not left out as an unknown field
  const auto& tree = qs.tree();
  ASSERT_EQ(tree.gpu_models(), (std::vector<std::string>{"H100", "A100"}));
  const std::size_t a = *qs.leaf("team-a");
  EXPECT_EQ(tree.limit(a)[*tree.model_slot("H100")], 4000.0);
  EXPECT_EQ(tree.quota(a)[*tree.model_slot("A100")], 1000.0);
  // Two pods bound, one on each model, and one pending that accepts only H100s.
  const auto pod = [](const std::string& name, const std::string& node,
                      std::vector<std::string> models) {
    PodObject p;
    p.uid = p.name = name;
    p.ns = "default";
    p.queue = "team-a";
    p.node_name = node;
    p.spec.gpu_count = 1;
    p.spec.gpu_milli = 1000;
    p.spec.allowed_models = std::move(models);
    return p;
  };
  const PodObject on_h100 = pod("x", "node-h", {}), on_a100 = pod("y", "node-a", {});
  const PodObject waits = pod("z", "", {"H100"});
  const auto model_of = [](const std::string& node) {
    return node == "node-h" ? std::string("H100") : std::string("A100");
  };
  const auto st = qs.statuses({&on_h100, &on_a100}, {&waits}, nullptr, model_of);
  const json& s = st.at("team-a");
  EXPECT_EQ(s["allocated"]["nvidia.com/gpu"], "2");
  EXPECT_EQ(s["gpuModels"]["H100"]["allocated"], "1");
  EXPECT_EQ(s["gpuModels"]["H100"]["requested"], "2");
  EXPECT_EQ(s["gpuModels"]["A100"]["allocated"], "1");
  EXPECT_EQ(s["gpuModels"]["A100"]["requested"], "1");
  // Without the nodes' models (or quotas per model) the status is KAI's alone.
  EXPECT_FALSE(qs.statuses({&on_h100}, {}, nullptr).at("team-a").contains("gpuModels"));
}

}  // namespace
}  // namespace gpuorch::k8s
