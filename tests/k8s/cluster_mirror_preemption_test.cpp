// The job layer's preemption over the pods a cluster has bound (ClusterMirror::admit with
// preempt): a queue below its fair share takes back exactly what it needs from a queue above
// its own, a higher priority takes from lower ones of its queue, a pod that may not be a victim
// is never one, a rigid gang goes whole or not at all while an elastic one gives its replicas
// above minMember first, a victim whose eviction is refused counts again when restored, and a
// pod whose GPUs are a ResourceClaim's is a victim with them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"
#include "sched/jobs/gpu_queue.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using sched::jobs::PreemptReason;

// One node of 4 GPUs; queues a and b with a quota of 2 GPUs each.
class MirrorPreemption : public ::testing::Test {
 protected:
  MirrorPreemption()
      : queues_({test::gpu_queue("a", 2), test::gpu_queue("b", 2)}),
        mirror_(MirrorOptions{"best-fit", 42, {}, {}}) {
    std::map<std::string, cluster::NodeSpec> nodes;
    auto n = test::gpu_node("n0", 64000, 4, "A100", 262144);
    nodes.emplace(n.name, n);
    mirror_.set_nodes(nodes);
    EXPECT_TRUE(mirror_.ensure_built({test::pod("h", 1000, 1, 1000)}));
  }

  PodObject pod(const std::string& name, const std::string& queue, int gpus = 1, int priority = 0,
                const std::string& gang = "") {
    PodObject p;
    p.uid = name;
    p.ns = "default";
    p.name = name;
    p.queue = queue;
    p.priority = priority;
    p.gang = gang.empty() ? "" : "default/" + gang;
    p.spec = test::pod(p.key(), 1000, gpus, 1000);
    return p;
  }

  // Bound on n0 with the GPUs given (as gpuorch.io/gpus says).
  void bind(PodObject p, std::vector<int> gpus, std::int64_t started = 1000) {
    p.node_name = "n0";
    p.gpus = std::move(gpus);
    p.started_s = started;
    ASSERT_TRUE(mirror_.account(p));
    pods_[p.uid] = p;
  }

  // a holds the node: a priority-1 gang g0, g1 (minMember `min`) and two priority-5 pods.
  void gang_of_two_and_two_above(int min) {
    bind(pod("g0", "a", 1, 1, "g"), {0});
    bind(pod("g1", "a", 1, 1, "g"), {1});
    bind(pod("x2", "a", 1, 5), {2});
    bind(pod("x3", "a", 1, 5), {3});
    gang_min_["default/g"] = min;
  }

  ClusterMirror::Admission admit(const std::vector<PodObject>& members, bool preempt = true) {
    ClusterMirror::AdmitOptions o;
    o.queue_of = [this](const PodObject& p) { return queues_.find(p.queue); };
    o.preempt = preempt;
    o.now_s = 5000;
    o.preemptible = [this](const PodObject& p) { return !protected_.contains(p.uid); };
    o.gang_min = [this](const std::string& g) {
      const auto it = gang_min_.find(g);
      return it == gang_min_.end() ? 0 : it->second;
    };
    return mirror_.admit(queues_, *queues_.find(members.front().queue), members, o);
  }

  static std::set<std::string> uids(const ClusterMirror::Admission& a) {
    std::set<std::string> out;
    for (const auto& v : a.victims) out.insert(v.uid);
    return out;
  }

  int free_gpus() const { return mirror_.cluster().fully_free_gpus(0); }

  sched::jobs::QueueTree queues_;
  ClusterMirror mirror_;
  std::map<std::string, PodObject> pods_;
  std::set<std::string> protected_;
  std::map<std::string, int> gang_min_;
};

TEST_F(MirrorPreemption, AQueueBelowItsShareReclaimsExactlyWhatItNeeds) {
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("a{}", i), "a"), {i});
  // Without preemption b's pod waits: a holds the node.
  const auto waits = admit({pod("b0", "b")}, false);
  EXPECT_FALSE(waits.placement.placed);
  EXPECT_TRUE(waits.victims.empty());
  EXPECT_EQ(free_gpus(), 0);

  const auto a = admit({pod("b0", "b")});
  ASSERT_TRUE(a.placement.placed) << a.why;
  ASSERT_EQ(a.victims.size(), 1U) << "one GPU needed, one victim";
  EXPECT_EQ(a.victims[0].reason, PreemptReason::kReclaim);
  EXPECT_EQ(a.victims[0].queue, *queues_.find("a"));
  // The preemptor holds the victim's GPU; nothing else is free.
  const auto victim_gpus = pods_.at(a.victims[0].uid).gpus;
  EXPECT_EQ(a.placement.gpus.front(), victim_gpus);
  EXPECT_EQ(mirror_.assumed("b0")->second, victim_gpus);
  EXPECT_FALSE(mirror_.assumed(a.victims[0].uid)) << "a victim counts nowhere while it goes";
  EXPECT_EQ(free_gpus(), 0);
  // b is within its quota (1 of 2) and a above it (3 of 2): a second b pod reclaims one more;
  // a third would take b past its share, so it waits.
  const auto second = admit({pod("b1", "b")});
  ASSERT_TRUE(second.placement.placed) << second.why;
  EXPECT_EQ(second.victims.size(), 1U);
  const auto third = admit({pod("b2", "b")});
  EXPECT_FALSE(third.placement.placed);
  EXPECT_TRUE(third.victims.empty());
}

TEST_F(MirrorPreemption, APodThatMayNotBeAVictimIsNeverOne) {
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("a{}", i), "a"), {i});
  protected_ = {"a0", "a1", "a2"};
  const auto a = admit({pod("b0", "b")});
  ASSERT_TRUE(a.placement.placed);
  EXPECT_EQ(uids(a), (std::set<std::string>{"a3"}));
  protected_.insert("a3");
  const auto none = admit({pod("b1", "b")});
  EXPECT_FALSE(none.placement.placed) << "every pod left is protected";
  EXPECT_TRUE(none.victims.empty());
}

TEST_F(MirrorPreemption, TheFewestGpuHoursLostGoFirst) {
  // a3 started last: preempting it loses the least work.
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("a{}", i), "a"), {i}, 1000 + i * 100);
  const auto a = admit({pod("b0", "b")});
  ASSERT_TRUE(a.placement.placed);
  EXPECT_EQ(uids(a), (std::set<std::string>{"a3"}));
}

TEST_F(MirrorPreemption, ARigidGangGoesWholeOrNotAtAll) {
  // A low-priority gang of two 1-GPU pods, minMember 2, and two pods of a higher priority:
  // freeing one GPU for a higher priority still takes the whole gang, never one member of it.
  gang_of_two_and_two_above(2);
  const auto a = admit({pod("high", "a", 1, 10)});
  ASSERT_TRUE(a.placement.placed) << a.why;
  EXPECT_EQ(uids(a), (std::set<std::string>{"g0", "g1"}));
  // The gang still runs while it terminates: the GPU the preemptor does not take is held until
  // it is gone, so nothing else is placed on it meanwhile.
  EXPECT_EQ(free_gpus(), 0);
  EXPECT_FALSE(admit({pod("other", "a", 1, 10)}, false).placement.placed);
  mirror_.release("g0");
  mirror_.release("g1");
  EXPECT_EQ(free_gpus(), 1);
}

TEST_F(MirrorPreemption, AnElasticGangGivesItsReplicasAboveMinFirst) {
  // The same gang with minMember 1: one replica above min is enough, the other keeps running.
  gang_of_two_and_two_above(1);
  const auto a = admit({pod("high", "a", 1, 10)});
  ASSERT_TRUE(a.placement.placed) << a.why;
  ASSERT_EQ(a.victims.size(), 1U);
  EXPECT_TRUE(mirror_.assumed(a.victims[0].uid == "g0" ? "g1" : "g0")) << "the other one stays";
  EXPECT_EQ(free_gpus(), 0);
}

TEST_F(MirrorPreemption, AHigherPriorityTakesFromLowerOnesOfItsQueueUnlessItMayNot) {
  bind(pod("low0", "a", 2, 1), {0, 1});
  bind(pod("low1", "a", 1, 1), {2});
  bind(pod("same", "a", 1, 5), {3});
  // preemptionPolicy Never: it waits rather than preempt.
  PodObject never = pod("never", "a", 1, 10);
  never.preempt_never = true;
  const auto waits = admit({never});
  EXPECT_FALSE(waits.placement.placed);
  EXPECT_TRUE(waits.victims.empty());
  // Priority 10 takes the cheapest lower-priority GPU: low1 (one GPU), never `same`'s peer.
  const auto a = admit({pod("high", "a", 1, 10)});
  ASSERT_TRUE(a.placement.placed) << a.why;
  EXPECT_EQ(uids(a), (std::set<std::string>{"low1"}));
  EXPECT_EQ(a.victims[0].reason, PreemptReason::kPriority);
  // Priority 5 finds nothing below it but low0, whose 2 GPUs make room for 2.
  const auto b = admit({pod("mid", "a", 2, 5)});
  ASSERT_TRUE(b.placement.placed) << b.why;
  EXPECT_EQ(uids(b), (std::set<std::string>{"low0"}));
  // Priority 1 finds nothing lower left.
  EXPECT_FALSE(admit({pod("equal", "a", 1, 1)}).placement.placed);
}

TEST_F(MirrorPreemption, ARefusedVictimCountsAgainAndARebuildSkipsVictims) {
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("a{}", i), "a"), {i});
  const auto a = admit({pod("b0", "b")});
  ASSERT_EQ(a.victims.size(), 1U);
  const std::string victim = a.victims[0].uid;
  // The eviction was refused: the preemptor lets go, the victim counts again, on its GPU.
  mirror_.release("b0");
  mirror_.restore(victim);
  EXPECT_EQ(mirror_.assumed(victim)->second, pods_.at(victim).gpus);
  EXPECT_EQ(free_gpus(), 0);
  // Chosen again, then a rebuild (a node set change) while it terminates: not counted again.
  const auto again = admit({pod("b0", "b")});
  ASSERT_EQ(again.victims.size(), 1U);
  std::map<std::string, cluster::NodeSpec> nodes;
  for (const char* name : {"n0", "n1"}) {
    auto n = test::gpu_node(name, 64000, 4, "A100", 262144);
    nodes.emplace(n.name, n);
  }
  mirror_.set_nodes(nodes);
  ASSERT_TRUE(mirror_.ensure_built({}));
  EXPECT_FALSE(mirror_.assumed(again.victims[0].uid));
  EXPECT_EQ(free_gpus(), 0) << "3 of a's pods and b0 on n0";
  mirror_.release(again.victims[0].uid);  // gone: nothing to give back twice
  EXPECT_EQ(free_gpus(), 0);
}

// DRA (docs/dra.md, "Claims in gangs and queues"): a claim's GPUs are held under the claim, not
// its pod; when the claim is reserved for that one pod (held_for), the pod counts with them and is
// a victim with them, the claim a victim of its own that is never evicted (gone when it is
// deallocated), and nothing is freed twice.
TEST_F(MirrorPreemption, AClaimPodIsAVictimWithItsClaimsGpus) {
  auto claim_holder = [this](const std::string& claim, const std::string& pod_name,
                             std::vector<int> gpus) {
    bind(pod(pod_name, "a", 0), {});
    PodObject h = pod("resourceclaim:" + claim, "a", static_cast<int>(gpus.size()));
    h.name = claim;
    bind(h, std::move(gpus));
    protected_.insert(h.uid);  // a claim is never evicted itself
  };
  claim_holder("c0", "a0", {0, 1});
  claim_holder("c1", "a1", {2, 3});
  // Without knowing whose the claims are, a's pods hold no GPU: nothing to take back.
  // Without knowing whose the claims are, a's pods hold no GPU: nothing to take back.
  const auto blind = admit({pod("b0", "b", 2)});
  EXPECT_FALSE(blind.placement.placed);
  EXPECT_TRUE(blind.victims.empty());

  ClusterMirror::AdmitOptions o;
  o.queue_of = [this](const PodObject& p) { return queues_.find(p.queue); };
  o.preempt = true;
  o.now_s = 5000;
  o.preemptible = [this](const PodObject& p) { return !protected_.contains(p.uid); };
  o.held_for = [](const PodObject& p) {
    return p.uid == "resourceclaim:c0" ? "a0" : p.uid == "resourceclaim:c1" ? "a1" : "";
  };
  // b wants its quota of 2: one of a's pods goes with its claim's 2 GPUs.
  const auto a = mirror_.admit(queues_, *queues_.find("b"), {pod("b0", "b", 2)}, o);
  ASSERT_TRUE(a.placement.placed) << a.why;
  ASSERT_EQ(a.victims.size(), 2U) << "the pod and its claim";
  EXPECT_FALSE(a.victims[0].claim);
  EXPECT_TRUE(a.victims[1].claim);
  const std::string claim = a.victims[1].uid;
  EXPECT_EQ(claim, a.victims[0].uid == "a0" ? "resourceclaim:c0" : "resourceclaim:c1");
  EXPECT_EQ(a.victims[1].reason, PreemptReason::kReclaim);
  EXPECT_TRUE(mirror_.evicting(claim));
  EXPECT_FALSE(
      mirror_.evicting(a.victims[0].uid == "a0" ? "resourceclaim:c1" : "resourceclaim:c0"));
  EXPECT_EQ(a.placement.gpus.front(), pods_.at(claim).gpus) << "the claim's GPUs, reserved";
  EXPECT_EQ(free_gpus(), 0);
  // The pod and then its claim going frees nothing twice: the reservation holds the GPUs.
  mirror_.release(a.victims[0].uid);
  mirror_.release(claim);
  EXPECT_EQ(free_gpus(), 0);
  mirror_.release("b0");
  EXPECT_EQ(free_gpus(), 2);
}

// An admission binds the pods of one job: a running elastic gang that gives a replica above
// minMember to it does not grow back in its round onto what the other victims free (the layer
// would grow it there, and the pending job's next member would be bound as its replica, on a
// GPU nobody released). docs/sim-timeline.md, "Same answer over time", workload-3 at t = 9720.
TEST_F(MirrorPreemption, AGangThatGaveAReplicaDoesNotGrowBackInTheSameAdmission) {
  // a may hold 3 GPUs, b 1; b holds the node: gang g (minMember 1) on GPUs 0 and 1, z on 2-3.
  const sched::jobs::QueueTree queues({test::gpu_queue("a", 3), test::gpu_queue("b", 1)});
  bind(pod("g0", "b", 1, 0, "g"), {0});
  bind(pod("g1", "b", 1, 0, "g"), {1});
  bind(pod("z", "b", 2), {2, 3}, 4900);  // started last: the cheapest whole victim
  gang_min_["default/g"] = 1;
  // a's elastic gang p of 3 pods, of which 2 must start: g's replica above minMember goes
  // first, then z; p takes the lowest GPUs free (1 and 2), and GPU 3 is left.
  std::vector<PodObject> p;
  for (int i = 0; i < 3; ++i) p.push_back(pod(fmt::format("p{}", i), "a", 1, 0, "p"));
  ClusterMirror::AdmitOptions o;
  o.queue_of = [&](const PodObject& x) { return queues.find(x.queue); };
  o.preempt = true;
  o.now_s = 5000;
  o.preemptible = [](const PodObject&) { return true; };
  o.gang_min = [this](const std::string& g) { return gang_min_[g]; };
  o.min_members = 2;
  const auto a = mirror_.admit(queues, *queues.find("a"), p, o);
  ASSERT_TRUE(a.placement.placed) << a.why;
  EXPECT_EQ(uids(a), (std::set<std::string>{"g1", "z"}));
  EXPECT_EQ(a.placement.uids.size(), 3U) << "p grows onto GPU 3; g does not";
  // No GPU is counted for two pods: each of p's is free of every pod that stays.
  std::set<int> taken;
  for (const auto& gpus : a.placement.gpus) taken.insert(gpus.begin(), gpus.end());
  EXPECT_EQ(taken, (std::set<int>{1, 2, 3}));
  EXPECT_EQ(mirror_.assumed("g0")->second, std::vector<int>{0});
  EXPECT_FALSE(mirror_.assumed("g1")) << "a victim: its GPU is p's now";
  EXPECT_EQ(free_gpus(), 0);
}

// An elastic gang's shrink (the scheduler's shrink_for) evicts pods of its own accord: marked
// evicting they count nowhere, so the job they are given back for is placed on their GPUs, and
// what it does not take is held until they are gone; restore() undoes it.
TEST_F(MirrorPreemption, AShrunkPodsGpusGoToTheJobItWasShrunkFor) {
  for (int i = 0; i < 4; ++i) bind(pod(fmt::format("a{}", i), "a"), {i});
  mirror_.mark_evicting("a3");
  EXPECT_FALSE(mirror_.assumed("a3"));
  EXPECT_EQ(free_gpus(), 1);
  const auto b = admit({pod("b0", "b")}, false);
  ASSERT_TRUE(b.placement.placed) << b.why;
  EXPECT_TRUE(b.victims.empty()) << "it starts on what the shrink frees, nothing more";
  EXPECT_EQ(b.placement.gpus.front(), std::vector<int>{3});
  mirror_.hold_evicted("a3");
  EXPECT_EQ(free_gpus(), 0);
  mirror_.release("a3");  // gone: its GPU stays b0's
  EXPECT_EQ(free_gpus(), 0);
  EXPECT_EQ(mirror_.assumed("b0")->second, std::vector<int>{3});
  // Not placed on it (b0 let go): the shrunk pod holds its GPU until gone, or again when kept.
  mirror_.release("b0");
  mirror_.mark_evicting("a2");
  mirror_.hold_evicted("a2");
  EXPECT_EQ(free_gpus(), 1) << "GPU 3 only";
  mirror_.restore("a2");
  EXPECT_EQ(mirror_.assumed("a2")->second, std::vector<int>{2});
  EXPECT_EQ(free_gpus(), 1);
}

}  // namespace
}  // namespace gpuorch::k8s
