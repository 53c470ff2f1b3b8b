// Both gang APIs read in one place: scheduler-plugins' PodGroup (minMember, the timeout) and the
// upstream scheduling.k8s.io/v1beta1 PodGroup of Kubernetes v1.37 (gang.minCount, basic), told
// apart by apiVersion or, for a list's items that carry none, by their shape; malformed objects
// say which field holds what.
#include "gpuorch/k8s/mirror/pod_group.hpp"

#include <gtest/gtest.h>

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

json plugins(json spec) {
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", "g"}, {"namespace", "team"}}},
          {"spec", std::move(spec)}};
}

json upstream(json policy, bool with_version = true) {
  json g = {{"metadata", {{"name", "w"}, {"namespace", "team"}}},
            {"spec", {{"schedulingPolicy", std::move(policy)}}}};
  if (with_version) g["apiVersion"] = "scheduling.k8s.io/v1beta1";
  return g;
}

TEST(PodGroup, SchedulerPluginsMinMemberAndTimeout) {
  const PodGroup g =
      podgroup_from_json(plugins({{"minMember", 3}, {"scheduleTimeoutSeconds", 60}}));
  EXPECT_EQ(g.key, "team/g");
  EXPECT_FALSE(g.upstream);
  EXPECT_TRUE(g.gang);
  EXPECT_EQ(g.min_member, 3);
  EXPECT_EQ(g.timeout_seconds, 60);
  EXPECT_EQ(g.error, "");
  EXPECT_EQ(podgroup_from_json(plugins(json::object())).min_member, 1) << "minMember defaults to 1";
  EXPECT_EQ(podgroup_from_json(plugins({{"minMember", 0}})).error,
            "spec.minMember 0 is not a whole number in [1, 100000]");
  EXPECT_EQ(podgroup_from_json(plugins({{"minMember", "3"}})).error,
            "spec.minMember \"3\" is not a whole number in [1, 100000]");
  EXPECT_EQ(podgroup_from_json(plugins({{"scheduleTimeoutSeconds", -1}})).error,
            "spec.scheduleTimeoutSeconds -1 is not a whole number >= 0");
  EXPECT_FALSE(podgroup_from_json(plugins("not an object")).error.empty());
}

TEST(PodGroup, UpstreamGangAndBasicWithOrWithoutApiVersion) {
  for (const bool with_version : {true, false}) {
    const PodGroup g = podgroup_from_json(upstream({{"gang", {{"minCount", 4}}}}, with_version));
    EXPECT_TRUE(g.upstream) << with_version;
    EXPECT_TRUE(g.gang);
    EXPECT_EQ(g.min_member, 4);
    EXPECT_EQ(g.key, "team/w");
    const PodGroup b = podgroup_from_json(upstream({{"basic", json::object()}}, with_version));
    EXPECT_TRUE(b.upstream);
    EXPECT_FALSE(b.gang) << "basic: each pod on its own";
    EXPECT_EQ(b.error, "");
  }
  EXPECT_EQ(podgroup_from_json(upstream({{"gang", {{"minCount", 0}}}})).error,
            "spec.schedulingPolicy.gang.minCount 0 is not a whole number in [1, 100000]");
  EXPECT_EQ(podgroup_from_json(upstream(json::object())).error,
            "spec.schedulingPolicy names neither gang nor basic");
  // Not objects at all: an error, never a throw.
  EXPECT_NO_THROW(podgroup_from_json(json::array()));
  EXPECT_NO_THROW(podgroup_from_json("text"));
  EXPECT_FALSE(podgroup_from_json(json(nullptr)).error.empty());
}

}  // namespace
}  // namespace gpuorch::k8s
