// Kubernetes objects in the scheduler core's terms: quantities exactly, Nodes (allocatable, GPU
// model label, taints, cordon) and Pods (effective requests, GPU fractions, GPU-model affinity,
// tolerations, gangs), and the bad ones refused with one clear reason instead of guessed at.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpuorch/k8s/api/quantity.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/k8s/mirror/topology_annotation.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

// What a preemption would lose is counted from the pod's start: the API server's RFC 3339
// times, with fractions and offsets, and nothing else.
TEST(PodObject, StartTimeAndPreemptionPolicy) {
  EXPECT_EQ(rfc3339_seconds("1970-01-01T00:01:40Z"), 100);
  EXPECT_EQ(rfc3339_seconds("2026-12-04T07:28:05Z"), 1796369285);
  EXPECT_EQ(rfc3339_seconds("2026-12-04T07:28:05.123456Z"), 1796369285);
  EXPECT_EQ(rfc3339_seconds("2026-12-04T09:28:05+02:00"), 1796369285);
  EXPECT_EQ(rfc3339_seconds("2026-12-04T05:28:05-02:00"), 1796369285);
  for (const char* bad : {"", "2026-12-04", "2026-12-04T07:28:05", "2026-13-04T07:28:05Z",
                          "2026-12-04T07:28:05Zjunk", "2026-12-04T07:28:05+2"}) {
    EXPECT_EQ(rfc3339_seconds(bad), -1) << bad;
  }
  const json pod = {{"metadata",
                     {{"name", "p"},
                      {"namespace", "d"},
                      {"uid", "u"},
                      {"creationTimestamp", "1970-01-01T00:00:10Z"}}},
                    {"spec", {{"preemptionPolicy", "Never"}, {"containers", json::array()}}},
                    {"status", {{"startTime", "1970-01-01T00:00:20Z"}}}};
  const PodObject p = pod_from_json(pod);
  EXPECT_TRUE(p.preempt_never);
  EXPECT_EQ(p.started_s, 20);
  json created_only = pod;
  created_only["status"].erase("startTime");
  created_only["spec"]["preemptionPolicy"] = "PreemptLowerPriority";
  const PodObject q = pod_from_json(created_only);
  EXPECT_FALSE(q.preempt_never);
  EXPECT_EQ(q.started_s, 10);
}

// When a member joined its elastic gang's run (the resize interval runs from the newest): its
// start, else its binding (the API server's PodScheduled=True), never its creation.
TEST(PodObject, JoinedAtItsStartElseAtItsBinding) {
  json pod = {{"metadata",
               {{"name", "p"},
                {"namespace", "d"},
                {"uid", "u"},
                {"creationTimestamp", "1970-01-01T00:00:10Z"}}},
              {"spec", {{"nodeName", "n"}, {"containers", json::array()}}},
              {"status",
               {{"conditions", json::array({{{"type", "PodScheduled"},
                                             {"status", "True"},
                                             {"lastTransitionTime", "1970-01-01T00:00:30Z"}}})}}}};
  EXPECT_EQ(pod_from_json(pod).joined_s, 30);
  pod["status"]["startTime"] = "1970-01-01T00:00:31Z";
  EXPECT_EQ(pod_from_json(pod).joined_s, 31);
  pod["status"].erase("startTime");
  pod["status"]["conditions"][0]["status"] = "False";  // not bound: it has not joined
  EXPECT_EQ(pod_from_json(pod).joined_s, -1);
  EXPECT_EQ(pod_from_json(pod).started_s, 10);  // what a preemption would lose, as before
}

TEST(Quantity, CpuMilliExactly) {
  EXPECT_EQ(quantity_milli("4"), 4000);
  EXPECT_EQ(quantity_milli("500m"), 500);
  EXPECT_EQ(quantity_milli("0.1"), 100);
  EXPECT_EQ(quantity_milli("1.5"), 1500);
  EXPECT_EQ(quantity_milli("1e3"), 1000000);
  EXPECT_EQ(quantity_milli("100u"), 1);  // rounded up, as the API server does
  EXPECT_EQ(quantity_milli("0"), 0);
  EXPECT_EQ(quantity_milli("+2"), 2000);
  for (const char* bad :
       {"", "m", "-1", "1x", "1.2.3", "1e", "1e999", "abc", "1 ", "99999999999999999999"}) {
    EXPECT_FALSE(quantity_milli(bad)) << bad;
  }
}

TEST(Quantity, MemoryMiB) {
  EXPECT_EQ(quantity_mib("16Gi", true), 16384);
  EXPECT_EQ(quantity_mib("1000Mi", true), 1000);
  EXPECT_EQ(quantity_mib("1G", true), 954);  // 10^9 bytes, rounded up
  EXPECT_EQ(quantity_mib("1G", false), 953);
  EXPECT_EQ(quantity_mib("1Ki", true), 1);
  EXPECT_EQ(quantity_mib("1Ki", false), 0);
  EXPECT_EQ(quantity_mib("1.5Gi", true), 1536);
  EXPECT_FALSE(quantity_mib("1Xi", true));
}

TEST(Quantity, CountsMustBeWhole) {
  EXPECT_EQ(quantity_count("8"), 8);
  EXPECT_EQ(quantity_count("1k"), 1000);
  EXPECT_FALSE(quantity_count("0.5"));
  EXPECT_FALSE(quantity_count("500m"));
}

json node(json allocatable) {
  return {{"metadata",
           {{"name", "n1"}, {"labels", {{"nvidia.com/gpu.product", "A100"}, {"rack", "r1"}}}}},
          {"spec",
           {{"unschedulable", true},
            {"taints", json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}})}}},
          {"status", {{"allocatable", std::move(allocatable)}}}};
}

TEST(NodeObject, AllocatableLabelsTaints) {
  const auto r = node_from_json(
      node({{"cpu", "96"}, {"memory", "786432Mi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}));
  const auto* spec = std::get_if<cluster::NodeSpec>(&r);
  ASSERT_NE(spec, nullptr) << std::get<std::string>(r);
  EXPECT_EQ(spec->name, "n1");
  EXPECT_EQ(spec->cpu_milli, 96000);
  EXPECT_EQ(spec->memory_mib, 786432);
  EXPECT_EQ(spec->gpu_count, 8);
  EXPECT_EQ(spec->gpu_model, "A100");
  EXPECT_EQ(spec->max_pods, 110);
  EXPECT_TRUE(spec->unschedulable);
  ASSERT_EQ(spec->taints.size(), 1U);
  EXPECT_EQ(spec->taints[0].effect, "NoSchedule");
}

TEST(NodeObject, BadAllocatableIsRefusedWithAReason) {
  const auto r = node_from_json(node({{"cpu", "lots"}}));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("node n1: allocatable cpu 'lots'"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<std::string>(node_from_json(node({{"cpu", 4}}))));
  EXPECT_TRUE(std::holds_alternative<std::string>(node_from_json(json::array())));
  EXPECT_TRUE(std::holds_alternative<std::string>(node_from_json({{"metadata", {{"name", "x"}}}})));
  EXPECT_TRUE(
      std::holds_alternative<std::string>(node_from_json(node({{"nvidia.com/gpu", "0.5"}}))));
}

// A 3-GPU node whose topology annotation (docs/labeller.md) is `annotation` (a string, or any
// JSON value a hostile or broken writer could leave there).
json annotated_node(json annotation) {
  json n = node({{"cpu", "8"}, {"nvidia.com/gpu", "3"}});
  n["metadata"]["annotations"] = {{kTopologyAnnotation, std::move(annotation)}};
  return n;
}

cluster::NodeSpec spec_of(const json& node) {
  auto r = node_from_json(node);
  EXPECT_TRUE(std::holds_alternative<cluster::NodeSpec>(r)) << std::get<std::string>(r);
  return std::holds_alternative<cluster::NodeSpec>(r) ? std::get<cluster::NodeSpec>(r)
                                                      : cluster::NodeSpec{};
}

std::string links_text(const json& links) {
  return json{{"gpus", json::array()}, {"links", links}}.dump();
}

TEST(NodeObject, GpuLinksFromTheTopologyAnnotation) {
  // The diagonal is not read: whatever it holds, the node spec's is 0.
  const auto spec = spec_of(annotated_node(links_text({{7, 137, 10}, {137, 0, 11}, {10, 11, 0}})));
  EXPECT_EQ(spec.name, "n1");
  EXPECT_EQ(spec.gpu_links, (std::vector<std::uint8_t>{0, 137, 10, 137, 0, 11, 10, 11, 0}));
  // No annotation, or one without a matrix (an older labeller's): no links, lowest free GPUs.
  EXPECT_TRUE(spec_of(node({{"nvidia.com/gpu", "3"}})).gpu_links.empty());
  EXPECT_TRUE(
      spec_of(annotated_node(R"({"gpus":[],"nvlink_islands":[[0,1,2]]})")).gpu_links.empty());
}

// A matrix that does not fit the node leaves its links empty (the picker's lowest free GPUs) and
// keeps the node: the links only steer which GPUs, never whether the node can be used.
TEST(NodeObject, MalformedTopologyAnnotationLeavesLinksEmptyAndKeepsTheNode) {
  const json fine = {{0, 137, 10}, {137, 0, 11}, {10, 11, 0}};
  std::string deep(100000, '[');
  const std::vector<std::pair<std::string, json>> cases = {
      {"not JSON", "{\"links\": [[0,1"},
      {"not an object", R"(["links"])"},
      {"nested beyond the parser's limit", R"({"links":)" + deep},
      {"links not a list", links_text("0,1,2")},
      {"two rows for three GPUs", links_text({{0, 1, 2}, {1, 0, 2}})},
      {"four rows for three GPUs",
       links_text({{0, 1, 2, 3}, {1, 0, 2, 3}, {2, 2, 0, 3}, {3, 3, 3, 0}})},
      {"a short row", links_text({{0, 1, 2}, {1, 0}, {2, 2, 0}})},
      {"a row not a list", links_text({{0, 1, 2}, 5, {2, 2, 0}})},
      {"a score above 255", links_text({{0, 256, 2}, {256, 0, 2}, {2, 2, 0}})},
      {"a negative score", links_text({{0, -1, 2}, {-1, 0, 2}, {2, 2, 0}})},
      {"a fractional score", links_text({{0, 1.5, 2}, {1.5, 0, 2}, {2, 2, 0}})},
      {"a score as text", links_text({{0, "1", 2}, {"1", 0, 2}, {2, 2, 0}})},
      {"a huge score", links_text({{0, 18446744073709551615ULL, 2}, {1, 0, 2}, {2, 2, 0}})},
      {"not symmetric", links_text({{0, 137, 10}, {136, 0, 11}, {10, 11, 0}})},
      {"the annotation not a string", json{{"links", fine}}},
  };
  for (const auto& [what, annotation] : cases) {
    SCOPED_TRACE(what);
    const auto spec = spec_of(annotated_node(annotation));
    EXPECT_EQ(spec.name, "n1");
    EXPECT_EQ(spec.gpu_count, 3);
    EXPECT_TRUE(spec.gpu_links.empty());
  }
  // A node with no GPUs, or one, has nothing to choose between.
  EXPECT_TRUE(spec_of([&] {
                auto n = annotated_node(links_text(fine));
                n["status"]["allocatable"]["nvidia.com/gpu"] = "1";
                return n;
              }())
                  .gpu_links.empty());
  EXPECT_EQ(spec_of(annotated_node(links_text(fine))).gpu_links.size(), 9U);
}

// A new matrix on a Node is a change the core reads (the scheduler and the extender rebuild their
// cluster for it); the same matrix again, with a kubelet's new status, is not.
TEST(NodeObject, ANewLinkMatrixIsANewNodeToTheCore) {
  const json before = annotated_node(links_text({{0, 137, 10}, {137, 0, 11}, {10, 11, 0}}));
  json again = before;
  again["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  EXPECT_TRUE(ClusterMirror::same_node(spec_of(before), spec_of(again)));
  const json after = annotated_node(links_text({{0, 10, 137}, {10, 0, 11}, {137, 11, 0}}));
  EXPECT_FALSE(ClusterMirror::same_node(spec_of(before), spec_of(after)));
  EXPECT_FALSE(ClusterMirror::same_node(spec_of(before),
                                        spec_of(node({{"cpu", "8"}, {"nvidia.com/gpu", "3"}}))));
}

json pod(json spec, json annotations = json::object()) {
  return {{"metadata",
           {{"name", "p"},
            {"namespace", "ns"},
            {"uid", "u1"},
            {"annotations", std::move(annotations)}}},
          {"spec", std::move(spec)},
          {"status", {{"phase", "Pending"}}}};
}

json container(json requests) {
  return {{"name", "c"}, {"resources", {{"requests", std::move(requests)}}}};
}

TEST(PodObject, EffectiveRequest) {
  json spec = {{"schedulerName", "gpuorch"},
               {"priority", 7},
               {"containers",
                json::array({container({{"cpu", "2"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "2"}}),
                             container({{"cpu", "500m"}})})},
               {"initContainers", json::array({container({{"cpu", "8"}, {"memory", "100Mi"}})})}};
  const PodObject p = pod_from_json(pod(spec));
  EXPECT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.key(), "ns/p");
  EXPECT_EQ(p.priority, 7);
  EXPECT_EQ(p.spec.cpu_milli, 8000);  // the init container is larger than the sum
  EXPECT_EQ(p.spec.memory_mib, 1024);
  EXPECT_EQ(p.spec.gpu_count, 2);
  EXPECT_EQ(p.spec.gpu_milli, 1000);
}

TEST(PodObject, GpuFractionAndModelAffinity) {
  json spec = {{"containers", json::array({container({{"cpu", "1"}})})},
               {"affinity",
                {{"nodeAffinity",
                  {{"requiredDuringSchedulingIgnoredDuringExecution",
                    {{"nodeSelectorTerms",
                      json::array({{{"matchExpressions",
                                     json::array({{{"key", "nvidia.com/gpu.product"},
                                                   {"operator", "In"},
                                                   {"values", {"A100", "V100M32"}}}})}}})}}}}}}},
               {"tolerations", json::array({{{"key", "gpu"}, {"operator", "Exists"}}})}};
  PodObject p = pod_from_json(pod(spec, {{"gpu-fraction", "0.25"}}));
  EXPECT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.spec.gpu_count, 1);
  EXPECT_EQ(p.spec.gpu_milli, 250);
  EXPECT_EQ(p.spec.allowed_models, (std::vector<std::string>{"A100", "V100M32"}));
  EXPECT_TRUE(p.spec.constraints.required_terms.empty()) << "the model term moved into the request";
  ASSERT_EQ(p.spec.constraints.tolerations.size(), 1U);
  EXPECT_TRUE(p.spec.constraints.tolerations[0].exists);
  p = pod_from_json(pod(spec, {{"gpuorch.io/gpu-milli", "810"}, {"gpuorch.io/gpus", "3"}}));
  EXPECT_EQ(p.spec.gpu_milli, 810);
  EXPECT_EQ(p.gpus, std::vector<int>{3});
  // A GPU named twice is no assignment (fuzz/extender_requests: counted, it took GPU 1 twice).
  for (const char* bad : {"1,1", "0,1,0", "-1", "1,", "x"}) {
    EXPECT_TRUE(pod_from_json(pod(spec, {{"gpuorch.io/gpus", bad}})).gpus.empty()) << bad;
  }
}

TEST(PodObject, BadRequestsSayWhy) {
  const json spec = {{"containers", json::array({container({{"cpu", "1"}})})}};
  // Present is asked: an empty fraction is a bad request, never "no GPU" (issue 29).
  for (const char* f : {"0", "1.5", "-0.5", "half", "", " 0.5", "0.000", "1e400"}) {
    const PodObject p = pod_from_json(pod(spec, {{"gpu-fraction", f}}));
    EXPECT_NE(p.error.find("gpu-fraction '" + std::string(f) + "'"), std::string::npos)
        << f << ": " << p.error;
  }
  for (const char* m : {"", "0", "1001", "x"}) {
    const PodObject p = pod_from_json(pod(spec, {{"gpuorch.io/gpu-milli", m}}));
    EXPECT_NE(p.error.find("gpuorch.io/gpu-milli '" + std::string(m) + "'"), std::string::npos)
        << m << ": " << p.error;
  }
  json both = {{"containers", json::array({container({{"nvidia.com/gpu", "1"}})})}};
  EXPECT_NE(pod_from_json(pod(both, {{"gpu-fraction", "0.5"}})).error.find("at once"),
            std::string::npos);
  json bad_cpu = {{"containers", json::array({container({{"cpu", "two"}})})}};
  EXPECT_NE(pod_from_json(pod(bad_cpu)).error.find("cpu 'two'"), std::string::npos);
  json bad_op = {
      {"containers", json::array()},
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             json::array({{{"matchExpressions",
                            json::array({{{"key", "a"}, {"operator", "Near"}}})}}})}}}}}}}};
  EXPECT_NE(pod_from_json(pod(bad_op)).error.find("'Near'"), std::string::npos);
  // Not even an object: no crash, no uid (ignored by the scheduler).
  EXPECT_TRUE(pod_from_json(json(42)).uid.empty());
}

}  // namespace
}  // namespace gpuorch::k8s
