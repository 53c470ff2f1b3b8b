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

}  // namespace
}  // namespace gpuorch::k8s
