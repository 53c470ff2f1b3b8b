// Quotas per GPU model over the pods a cluster has bound (ClusterMirror::admit, the decision of
// `gpuorch scheduler --queues`): a pod that accepts any model is given its queue's model and
// placed there, and reclaim takes back only pods on that model.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

workload::QueueSpec queue(std::string name, std::string model) {
  workload::QueueSpec q;
  q.name = std::move(name);
  q.gpu.quota = 4000;
  q.gpu_models.push_back({std::move(model), {4000, workload::kUnlimited, 1}});
  return q;
}

// A node of 4 A100s and one of 4 H100s; queue a is guaranteed the A100s, b the H100s.
class MirrorModelQuotas : public ::testing::Test {
 protected:
  MirrorModelQuotas()
      : queues_({queue("a", "A100"), queue("b", "H100")}),
        mirror_(MirrorOptions{"best-fit", 42, {}, {}}) {
    std::map<std::string, cluster::NodeSpec> nodes;
    for (const auto& n : {test::gpu_node("a100", 64000, 4, "A100", 262144),
                          test::gpu_node("h100", 64000, 4, "H100", 262144)}) {
      nodes.emplace(n.name, n);
    }
    mirror_.set_nodes(nodes);
    EXPECT_TRUE(mirror_.ensure_built({test::pod("h", 1000, 1, 1000)}));
  }

  static PodObject pod(const std::string& name, const std::string& queue) {
    PodObject p;
    p.uid = name;
    p.ns = "default";
    p.name = name;
    p.queue = queue;
    p.spec = test::pod(p.key(), 1000, 1, 1000);
    return p;
  }

  void bind(PodObject p, const std::string& node, int gpu) {
    p.node_name = node;
    p.gpus = {gpu};
    p.started_s = 1000;
    ASSERT_TRUE(mirror_.account(p));
    node_of_[p.uid] = node;
  }

  ClusterMirror::Admission admit(const PodObject& p) {
    ClusterMirror::AdmitOptions o;
    o.queue_of = [this](const PodObject& x) { return queues_.find(x.queue); };
    o.preempt = true;
    o.now_s = 5000;
    o.preemptible = [](const PodObject&) { return true; };
    return mirror_.admit(queues_, *queues_.find(p.queue), {p}, o);
  }

  sched::jobs::QueueTree queues_;
  ClusterMirror mirror_;
  std::map<std::string, std::string> node_of_;
};

TEST_F(MirrorModelQuotas, APodTakesItsQueuesModelAndReclaimsOnlyThere) {
  // a holds its A100s and, over its share, the H100s nobody wanted.
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("aa{}", i), "a"), "a100", i);
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("ah{}", i), "a"), "h100", i);
  for (int i = 0; i < 4; ++i) {
    const auto got = admit(pod(fmt::format("b{}", i), "b"));
    ASSERT_TRUE(got.placement.placed) << got.why;
    EXPECT_EQ(got.placement.nodes.front(), "h100");
    ASSERT_EQ(got.victims.size(), 1U);
    EXPECT_EQ(node_of_.at(got.victims.front().uid), "h100") << "a victim on the A100s";
  }
  // b now holds its 4 H100s; a fifth b pod would take an A100 of a's quota: it waits.
  const auto fifth = admit(pod("b4", "b"));
  EXPECT_FALSE(fifth.placement.placed);
  EXPECT_TRUE(fifth.victims.empty());
  EXPECT_NE(fifth.why.find("H100"), std::string::npos) << fifth.why;
}

}  // namespace
}  // namespace gpuorch::k8s
