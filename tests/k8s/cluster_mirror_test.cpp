// The scheduler core's view of a Kubernetes cluster: pods bound by any scheduler are counted on
// their nodes (GPU indices from gpuorch's annotation when valid), an overcommitted node never goes
// below zero, a rebuild for a new node set keeps every bound pod, and decisions are the core's.
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

std::map<std::string, cluster::NodeSpec> nodes(int count) {
  std::map<std::string, cluster::NodeSpec> out;
  for (int i = 0; i < count; ++i) {
    auto n = test::gpu_node(fmt::format("n{}", i), 8000, 4, "A100", 65536);
    out.emplace(n.name, n);
  }
  return out;
}

PodObject bound_pod(const std::string& uid, const std::string& node, int gpus,
                    std::vector<int> annotated = {}, std::int64_t cpu = 1000) {
  PodObject p;
  p.uid = uid;
  p.ns = "default";
  p.name = uid;
  p.node_name = node;
  p.spec = test::pod(uid, cpu, gpus, 1000);
  p.gpus = std::move(annotated);
  return p;
}

// efd cannot be built without a workload history. A failed build must leave the mirror unbuilt
// (it once kept the cluster without a policy, and the next schedule went through a null
// scheduler), so the next call builds again, with the bound pods counted.
TEST(ClusterMirror, AFailedBuildLeavesItUnbuiltAndTheNextOneWorks) {
  ClusterMirror m(MirrorOptions{"efd", 42, {}, {}});
  m.set_nodes(nodes(2));
  EXPECT_FALSE(m.account(bound_pod("a", "n0", 2, {0, 1})));
  EXPECT_THROW(m.ensure_built({}), std::exception);
  EXPECT_FALSE(m.built());
  EXPECT_THROW(m.ensure_built({}), std::exception) << "still unbuilt: tries again";
  ASSERT_TRUE(m.ensure_built({test::pod("h", 1000, 1, 1000)}));
  EXPECT_TRUE(m.built());
  EXPECT_EQ(test::gpu_left(m.cluster(), 0), (std::vector<std::int32_t>{0, 0, 1000, 1000}));
  PodObject p = bound_pod("p", "", 1);
  EXPECT_EQ(m.schedule(p).decision.outcome, sched::Outcome::kPlaced);
}

TEST(ClusterMirror, CountsBoundPodsAndKeepsThemAcrossRebuilds) {
  ClusterMirror m(MirrorOptions{"best-fit", 42, {}, {}});
  m.set_nodes(nodes(2));
  ASSERT_TRUE(m.ensure_built({test::pod("h", 1000, 1, 1000)}));
  EXPECT_FALSE(m.ensure_built({})) << "same nodes: no rebuild";
  EXPECT_TRUE(m.account(bound_pod("a", "n0", 2, {2, 3})));
  const auto& c = m.cluster();
  EXPECT_EQ(test::gpu_left(c, 0), (std::vector<std::int32_t>{1000, 1000, 0, 0}));
  // An annotation that does not fit (GPU 3 is taken) falls back to the core's own choice.
  EXPECT_TRUE(m.account(bound_pod("b", "n0", 1, {3})));
  EXPECT_EQ(test::gpu_left(m.cluster(), 0), (std::vector<std::int32_t>{0, 1000, 0, 0}));
  // More CPU than the node has left (another scheduler overcommitted): counted down to zero.
  EXPECT_TRUE(m.account(bound_pod("c", "n0", 0, {}, 7000)));
  EXPECT_EQ(m.cluster().cpu_free(0), 0);
  // A pod on a node not known yet counts once the node appears.
  EXPECT_FALSE(m.account(bound_pod("d", "n2", 4)));
  m.set_nodes(nodes(3));
  ASSERT_TRUE(m.ensure_built({}));
  EXPECT_EQ(m.cluster().node_count(), 3U);
  EXPECT_EQ(m.cluster().fully_free_gpus(2), 0);
  EXPECT_EQ(m.cluster().fully_free_gpus(0), 1);
  m.release("d");
  EXPECT_EQ(m.cluster().fully_free_gpus(2), 4);
  EXPECT_FALSE(m.accounted("d"));
}

TEST(ClusterMirror, DecidesWithTheCoreAndAssumesTheResult) {
  ClusterMirror m(MirrorOptions{"best-fit", 42, {}, {}});
  m.set_nodes(nodes(2));
  ASSERT_TRUE(m.ensure_built({test::pod("h", 1000, 1, 1000)}));
  PodObject p = bound_pod("p", "", 4);
  auto r = m.schedule(p);
  ASSERT_EQ(r.decision.outcome, sched::Outcome::kPlaced);
  EXPECT_TRUE(m.accounted("p"));
  PodObject q = bound_pod("q", "", 4);
  r = m.schedule(q);
  ASSERT_EQ(r.decision.outcome, sched::Outcome::kPlaced);
  EXPECT_NE(r.node, "") << "the other node";
  PodObject x = bound_pod("x", "", 1);
  x.spec.allowed_models = {"H100"};
  r = m.schedule(x);
  EXPECT_EQ(r.decision.outcome, sched::Outcome::kInfeasible);
  EXPECT_EQ(r.unknown_model, "H100");
  sched::RequestResolver resolver(m.cluster());
  const std::string msg = unschedulable_message(r, resolver.resolve(x.spec), 2);
  EXPECT_EQ(msg,
            "GPU model 'H100' is on no node. 0/2 nodes are available: 2 have the wrong GPU model. "
            "Infeasible: the pod fits no node even when it is empty.");
}

// What a kubelet's status report changes (nothing the core reads) leaves a node the same, so the
// extender and the scheduler keep their node set; what the core reads does not.
TEST(ClusterMirror, SameNodeIsWhatTheCoreReads) {
  cluster::NodeSpec a;
  a.name = "n1";
  a.cpu_milli = 8000;
  a.memory_mib = 65536;
  a.gpu_count = 2;
  a.gpu_model = "A100";
  a.labels = {{"pool", "gpu"}};
  cluster::NodeSpec b = a;
  b.gpu_memory_mib = 81920;  // not read from a Node object
  EXPECT_TRUE(ClusterMirror::same_node(a, b));
  for (const auto& change : std::vector<std::function<void(cluster::NodeSpec&)>>{
           [](cluster::NodeSpec& n) { n.cpu_milli = 4000; },
           [](cluster::NodeSpec& n) { n.gpu_count = 1; },
           [](cluster::NodeSpec& n) { n.labels.emplace_back("team", "a"); },
           [](cluster::NodeSpec& n) {
             n.taints.push_back({"k", "v", "NoSchedule"});
           },
           [](cluster::NodeSpec& n) { n.unschedulable = true; },
           [](cluster::NodeSpec& n) { n.max_pods = 10; },
           // The node labeller's link matrix changed: the GPU picker reads it.
           [](cluster::NodeSpec& n) {
             n.gpu_links = {0, 100, 100, 0};
           }}) {
    b = a;
    change(b);
    EXPECT_FALSE(ClusterMirror::same_node(a, b));
  }
}

}  // namespace
}  // namespace gpuorch::k8s
