// The placeability check's verdicts on a mirror without an API server: Ready when the Workload's
// pods fit now (and their room is kept for the next Workload), Pending while terminating pods are
// to go, Retry when they fit only an emptier cluster, Rejected when not even the empty cluster
// holds them or the Workload cannot be read; a verdict already written is not written again.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuorch/k8s/kueue/placeable.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::kueue {
namespace {

using nlohmann::json;

std::map<std::string, cluster::NodeSpec> nodes(int count, int gpus) {
  std::map<std::string, cluster::NodeSpec> out;
  for (int i = 0; i < count; ++i) {
    auto n = test::gpu_node(fmt::format("n{}", i), 16000, gpus, "H100", 65536);
    out.emplace(n.name, n);
  }
  return out;
}

json check(const std::string& name = "placeable") {
  return {{"metadata", {{"name", name}, {"generation", 1}}},
          {"spec", {{"controllerName", "gpuorch.io/placeable"}}}};
}

// A Workload of `count` pods of `gpus` GPUs each, quota reserved, our check in `state` at index 1
// (after another controller's check).
json workload(const std::string& name, int count, int gpus, const std::string& state = "Pending",
              const std::string& rv = "1") {
  const json tmpl = {
      {"metadata", {{"labels", {{"app", name}}}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "c"},
                       {"resources",
                        {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})},
        {"schedulingGates", json::array({{{"name", "kueue.x-k8s.io/admission"}}})}}}};
  return {{"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"uid", "wl-" + name},
            {"resourceVersion", rv},
            {"creationTimestamp", "2026-12-04T10:00:00Z"},
            {"ownerReferences",
             json::array({{{"kind", "Pod"}, {"name", name}, {"uid", "pod-" + name}}})}}},
          {"spec",
           {{"podSets", json::array({{{"name", "main"}, {"count", count}, {"template", tmpl}}})}}},
          {"status",
           {{"conditions", json::array({{{"type", "QuotaReserved"}, {"status", "True"}}})},
            {"admission",
             {{"clusterQueue", "cq"},
              {"podSetAssignments",
               json::array({{{"name", "main"}, {"flavors", {{"nvidia.com/gpu", "default"}}}}})}}},
            {"admissionChecks",
             json::array({{{"name", "other"}, {"state", "Ready"}, {"message", ""}},
                          {{"name", "placeable"}, {"state", state}, {"message", ""}}})}}}};
}

PodObject bound_pod(const std::string& uid, const std::string& node, int gpus) {
  PodObject p;
  p.uid = uid;
  p.ns = "default";
  p.name = uid;
  p.node_name = node;
  p.spec = test::pod(uid, 1000, gpus, 1000);
  return p;
}

json pod_json(const PodObject& p, bool deleting = false) {
  json meta = {{"uid", p.uid}, {"name", p.name}, {"namespace", p.ns}};
  if (deleting) meta["deletionTimestamp"] = "2026-12-04T10:00:00Z";
  return {{"metadata", meta}, {"spec", {{"nodeName", p.node_name}}}};
}

struct Fixture {
  ClusterMirror now{MirrorOptions{"best-fit", 42, {}, {}}};
  ClusterMirror empty{MirrorOptions{"best-fit", 42, {}, {}}};
  PlaceableChecks checks;
  explicit Fixture(int node_count = 2, int gpus = 8) {
    now.set_nodes(nodes(node_count, gpus));
    empty.set_nodes(nodes(node_count, gpus));
    now.ensure_built({test::pod("h", 1000, 1, 1000)});
    empty.ensure_built({test::pod("h", 1000, 1, 1000)});
    checks.admission_check(check(), false);
  }
  // n0 and n1 with `used` GPUs each taken by pods bound outside Kueue.
  void fragment(int used, bool deleting = false) {
    for (const std::string node : {"n0", "n1"}) {
      PodObject p = bound_pod("filler-" + node, node, used);
      p.deleting = deleting;
      now.account(p);
      checks.pod(pod_json(p, deleting), p, false);
    }
  }
  std::vector<Verdict> run() { return checks.evaluate(now, empty); }
};

TEST(KueuePlaceable, ReadyWhenItFitsNowAndTheJsonPatchTestsTheEntryItReplaces) {
  Fixture f;
  f.checks.workload(workload("a", 2, 4), false);
  const auto v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].state, "Ready");
  EXPECT_TRUE(v[0].message.starts_with("placeable now: 2 pods on n")) << v[0].message;
  EXPECT_EQ(v[0].index, 1U);
  const json patch = check_patch(v[0], "2026-12-04T10:00:01Z");
  ASSERT_EQ(patch.size(), 4U);
  EXPECT_EQ(
      patch[0],
      json({{"op", "test"}, {"path", "/status/admissionChecks/1/name"}, {"value", "placeable"}}));
  EXPECT_EQ(patch[1]["value"], "Ready");
  // The what-if placement is gone: the mirror holds nothing.
  EXPECT_EQ(f.now.cluster().fully_free_gpus(0) + f.now.cluster().fully_free_gpus(1), 16);
  EXPECT_TRUE(f.run().empty()) << "written on this resourceVersion: not again";
}

TEST(KueuePlaceable, RetryWhenOnlyAnEmptierClusterHoldsItRejectedWhenNoneDoes) {
  Fixture f;
  f.fragment(5);  // 3 free GPUs on each node
  f.checks.workload(workload("four", 1, 4), false);
  f.checks.workload(workload("twelve", 1, 12), false);
  auto v = f.run();
  ASSERT_EQ(v.size(), 2U);
  const Verdict& four = v[0].name == "four" ? v[0] : v[1];
  const Verdict& twelve = v[0].name == "four" ? v[1] : v[0];
  EXPECT_EQ(four.state, "Retry");
  EXPECT_EQ(four.requeue_after_s, 15);
  EXPECT_NE(four.message.find("not placeable now"), std::string::npos) << four.message;
  EXPECT_EQ(check_patch(four, "t").back(),
            json({{"op", "add"},
                  {"path", "/status/admissionChecks/1/requeueAfterSeconds"},
                  {"value", 15}}));
  EXPECT_EQ(twelve.state, "Rejected");
  EXPECT_NE(twelve.message.find("does not fit even on the empty cluster"), std::string::npos)
      << twelve.message;
  // Kueue counted two retries: the wait doubles twice.
  json again = workload("four", 1, 4, "Pending", "2");
  again["status"]["admissionChecks"][1]["retryCount"] = 2;
  f.checks.workload(again, false);
  v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].requeue_after_s, 60);
}

TEST(KueuePlaceable, TerminatingPodsMakeItWaitPendingOnceAndSayNothingNew) {
  Fixture f;
  f.fragment(5, /*deleting=*/true);
  f.checks.workload(workload("four", 1, 4), false);
  auto v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].state, "Pending");
  EXPECT_NE(v[0].message.find("until 2 terminating pods are gone"), std::string::npos)
      << v[0].message;
  // The object now says so: nothing more to write.
  json said = workload("four", 1, 4, "Pending", "2");
  said["status"]["admissionChecks"][1]["message"] = v[0].message;
  f.checks.workload(said, false);
  EXPECT_TRUE(f.run().empty());
}

TEST(KueuePlaceable, AReadyWorkloadKeepsItsRoomUntilItsPodsAreBound) {
  Fixture f(1, 8);
  f.checks.workload(workload("first", 1, 4), false);
  auto v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].state, "Ready");
  // Kueue admitted it; its pod exists (ungated), not bound yet: its 4 GPUs are still held.
  f.checks.workload(workload("first", 1, 4, "Ready", "2"), false);
  PodObject pending = bound_pod("pod-first", "", 4);
  f.checks.pod(pod_json(pending), pending, false);
  f.checks.workload(workload("second", 1, 6), false);
  v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].name, "second");
  EXPECT_EQ(v[0].state, "Retry") << "the 4 GPUs told Ready are held: " << v[0].message;
  // Once the pod is bound the mirror counts it, and the check no longer holds it twice: another
  // 4 GPUs fit.
  PodObject placed = bound_pod("pod-first", "n0", 4);
  f.now.account(placed);
  f.checks.pod(pod_json(placed), placed, false);
  f.checks.workload(workload("third", 1, 4), false);
  v = f.run();
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].name, "third");
  EXPECT_EQ(v[0].state, "Ready") << v[0].message;
}

// A Job's Workload: its owner is the Job, whose pods carry the same controller owner. Bound pods
// are the mirror's, pending ones hold their room, and those not created yet count from the
// template: 8 GPUs - 2 bound - 2 pending - 2 not yet created leaves room for 2, not 3.
TEST(KueuePlaceable, AJobsPodsAreFoundThroughTheirOwner) {
  Fixture f(1, 8);
  json job = workload("job", 3, 2, "Ready", "2");
  job["metadata"]["ownerReferences"] =
      json::array({{{"kind", "Job"}, {"name", "job"}, {"uid", "job-uid"}, {"controller", true}}});
  f.checks.workload(job, false);
  auto owned = [](const PodObject& p) {
    json j = pod_json(p);
    j["metadata"]["ownerReferences"] =
        json::array({{{"kind", "Job"}, {"name", "job"}, {"uid", "job-uid"}, {"controller", true}}});
    return j;
  };
  PodObject running = bound_pod("job-0", "n0", 2);
  f.now.account(running);
  f.checks.pod(owned(running), running, false);
  PodObject waiting = bound_pod("job-1", "", 2);
  f.checks.pod(owned(waiting), waiting, false);
  f.checks.workload(workload("two", 1, 2), false);
  f.checks.workload(workload("three", 1, 3), false);
  const auto v = f.run();
  ASSERT_EQ(v.size(), 2U);
  for (const Verdict& x : v) {
    EXPECT_EQ(x.state, x.name == "two" ? "Ready" : "Retry") << x.name << ": " << x.message;
  }
}

TEST(KueuePlaceable, AWorkloadThatCannotBeReadIsRejectedWithWhy) {
  Fixture f;
  json bad = workload("bad", 1, 1);
  bad["spec"]["podSets"][0]["count"] = 10'000'000;
  f.checks.workload(bad, false);
  json odd = workload("odd", 1, 1);
  odd["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {
      {"requests", {{"nvidia.com/gpu", "lots"}}}, {"limits", {{"nvidia.com/gpu", "lots"}}}};
  f.checks.workload(odd, false);
  json none = workload("none", 1, 1);
  none["spec"]["podSets"] = "not a list";
  f.checks.workload(none, false);
  const auto v = f.run();
  ASSERT_EQ(v.size(), 3U);
  for (const Verdict& x : v) {
    EXPECT_EQ(x.state, "Rejected") << x.name;
    EXPECT_FALSE(x.message.empty());
  }
  // Not ours, not reserved, not a Workload: nothing.
  PlaceableChecks other;
  other.admission_check(check("placeable"), false);
  other.admission_check({{"metadata", {{"name", "placeable"}}},
                         {"spec", {{"controllerName", "kueue.x-k8s.io/provisioning-request"}}}},
                        false);
  other.workload(workload("a", 1, 1), false);
  other.workload(json::array({1, 2}), false);
  other.workload("text", false);
  EXPECT_FALSE(other.waiting());
  EXPECT_TRUE(other.evaluate(f.now, f.empty).empty());
}

TEST(KueuePlaceable, TheAdmissionCheckIsMarkedActiveOnce) {
  PlaceableChecks c;
  EXPECT_TRUE(c.inactive_checks().empty());
  c.admission_check(check("p1"), false);
  ASSERT_EQ(c.inactive_checks().size(), 1U);
  const json status = active_status(c.inactive_checks()[0], "2026-12-04T10:00:00Z");
  EXPECT_EQ(status["status"]["conditions"][0]["type"], "Active");
  EXPECT_EQ(status["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(status["status"]["conditions"][0]["observedGeneration"], 1);
  c.mark_active("p1");
  EXPECT_TRUE(c.inactive_checks().empty());
}

}  // namespace
}  // namespace gpuorch::k8s::kueue
