// What bound pods hold per queue, kept across decisions (AdmitOptions::queues_generation), must
// decide exactly as the sum made again at every decision: random binds, releases, queue label
// changes, preemptions with evictions that go through or are refused, and a tree that changes,
// on two mirrors side by side. A stale sum would start a pod over its queue's limit directly
// (admit's free-room path), where the layer would have refused it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "sched/jobs/gpu_queue.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

ClusterMirror make_mirror() {
  ClusterMirror m(MirrorOptions{"best-fit", 42, {}, {}});
  std::map<std::string, cluster::NodeSpec> nodes;
  for (int i = 0; i < 4; ++i) {
    auto n = test::gpu_node(fmt::format("n{}", i), 64000, 4, "A100", 262144);
    nodes.emplace(n.name, n);
  }
  m.set_nodes(nodes);
  EXPECT_TRUE(m.ensure_built({test::pod("h", 1000, 1, 1000)}));
  return m;
}

sched::jobs::QueueTree tree_with_limits(int a, int b) {
  return sched::jobs::QueueTree(
      {test::gpu_queue("a", 4, a), test::gpu_queue("b", 4, b), test::gpu_queue("c", 0, 3)});
}

TEST(MirrorQueueHoldings, KeptAcrossDecisionsTheyDecideAsSummedEachTime) {
  const char* kQueues[] = {"a", "b", "c"};
  for (const unsigned seed : {1U, 2U, 3U, 4U, 5U}) {
    std::mt19937 rng(seed);
    ClusterMirror summed = make_mirror();
    ClusterMirror kept = make_mirror();
    sched::jobs::QueueTree tree = tree_with_limits(6, 5);
    std::uint64_t generation = 1;
    std::map<std::string, PodObject> bound;  // by uid
    int next = 0;
    int placed = 0;
    int victims = 0;
    for (int step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 6) {
        PodObject p;
        p.uid = fmt::format("p{}", next++);
        p.ns = "default";
        p.name = p.uid;
        p.queue = kQueues[rng() % 3];
        p.priority = static_cast<int>(rng() % 3);
        p.spec = test::pod(p.key(), 1000, 1 + static_cast<int>(rng() % 2), 1000);
        ClusterMirror::AdmitOptions o;
        o.queue_of = [&tree](const PodObject& x) { return tree.find(x.queue); };
        o.preempt = rng() % 2 == 0;
        o.now_s = 5000;
        o.preemptible = [](const PodObject&) { return true; };
        const std::size_t leaf = *tree.find(p.queue);
        const auto s = summed.admit(tree, leaf, {p}, o);
        o.queues_generation = generation;
        const auto k = kept.admit(tree, leaf, {p}, o);
        ASSERT_EQ(s.placement.placed, k.placement.placed) << "seed " << seed << " step " << step;
        ASSERT_EQ(s.placement.nodes, k.placement.nodes) << "seed " << seed << " step " << step;
        ASSERT_EQ(s.placement.gpus, k.placement.gpus) << "seed " << seed << " step " << step;
        ASSERT_EQ(s.victims.size(), k.victims.size()) << "seed " << seed << " step " << step;
        for (std::size_t v = 0; v < s.victims.size(); ++v) {
          ASSERT_EQ(s.victims[v].uid, k.victims[v].uid);
          // The eviction goes through (the pod is gone) or is refused (it runs on).
          if (rng() % 3 != 0) {
            summed.release(s.victims[v].uid);
            kept.release(s.victims[v].uid);
            bound.erase(s.victims[v].uid);
          } else {
            summed.restore(s.victims[v].uid);
            kept.restore(s.victims[v].uid);
          }
          ++victims;
        }
        if (s.placement.placed) {
          p.node_name = s.placement.nodes.front();
          p.gpus = s.placement.gpus.front();
          bound[p.uid] = p;
          ++placed;
        }
      } else if (op < 8 && !bound.empty()) {
        auto it = bound.begin();
        std::advance(it, static_cast<long>(rng() % bound.size()));
        summed.release(it->first);
        kept.release(it->first);
        bound.erase(it);
      } else if (op == 8 && !bound.empty()) {
        // A bound pod's queue label edited.
        auto it = bound.begin();
        std::advance(it, static_cast<long>(rng() % bound.size()));
        it->second.queue = kQueues[rng() % 3];
        summed.refresh(it->second);
        kept.refresh(it->second);
      } else {
        // The Queues changed: other limits, a new generation.
        tree = tree_with_limits(4 + static_cast<int>(rng() % 6), 3 + static_cast<int>(rng() % 6));
        ++generation;
      }
    }
    EXPECT_GT(placed, 50) << "seed " << seed;
    EXPECT_EQ(summed.cluster().fully_free_gpus_total(), kept.cluster().fully_free_gpus_total());
    if (seed == 1) {
      EXPECT_GT(victims, 0);
    }
  }
}

}  // namespace
}  // namespace gpuorch::k8s
