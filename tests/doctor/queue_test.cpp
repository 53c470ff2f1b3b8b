// doctor queue on recorded API objects (a kubectl List with Queues): each queue's quota, limit,
// fair share and use; a waiting job's reason in the job layer's words (over its limit, over its
// fair share), the pods a job would preempt to reclaim its queue's quota, a job that fits now;
// the verdicts are tried on the same state (one job's trial leaves nothing behind for the next).
#include "gpuorch/doctor/queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/base/error.hpp"
#include "support/kai_queue.hpp"

namespace gpuorch {
namespace {

using nlohmann::json;

json node(const std::string& name, int gpus) {
  const json res = {{"cpu", "96"},
                    {"memory", "768Gi"},
                    {"pods", "110"},
                    {"nvidia.com/gpu", std::to_string(gpus)}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"capacity", res}, {"allocatable", res}}}};
}

json pod(const std::string& name, const std::string& q, int gpus, const std::string& node = "",
         int gpu_index = -1) {
  json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"uid", "uid-" + name},
        {"creationTimestamp", "2026-12-04T08:00:00Z"},
        {"labels", {{"kai.scheduler/queue", q}}}}},
      {"spec",
       {{"schedulerName", "gpuorch"},
        {"containers",
         json::array({{{"name", "c"},
                       {"resources",
                        {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
      {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  if (gpu_index >= 0) {
    p["metadata"]["annotations"]["gpuorch.io/gpus"] = std::to_string(gpu_index);
  }
  return p;
}

const doctor::Finding* find(const std::vector<doctor::Finding>& f, const std::string& prefix) {
  const auto it = std::find_if(
      f.begin(), f.end(), [&](const doctor::Finding& x) { return x.what.rfind(prefix, 0) == 0; });
  return it == f.end() ? nullptr : &*it;
}

std::vector<doctor::Finding> explain(const json& items, const std::string& which = "",
                                     bool preemption = true) {
  const auto objects = doctor::cluster_from_list({{"kind", "List"}, {"items", items}}, "list.json");
  doctor::QueueOptions o;
  o.mirror.policy = "best-fit";
  o.preemption = preemption;
  return doctor::explain_queues(objects, which, o);
}

// One node of 4 GPUs; lab (quota 3) over team-a (quota 1, limit 2) and team-b (quota 2); a
// queue `spare` (quota 1) outside lab. team-a holds 2, team-b 1, spare 1: the node is full.
json cluster() {
  return json::array({node("n1", 4), test::kai_queue("lab", 3, -1),
                      test::kai_queue("team-a", 1, 2, "lab"),
                      test::kai_queue("team-b", 2, -1, "lab"), test::kai_queue("spare", 1, -1),
                      pod("a0", "team-a", 1, "n1", 0), pod("a1", "team-a", 1, "n1", 1),
                      pod("b0", "team-b", 1, "n1", 2), pod("s0", "spare", 1, "n1", 3)});
}

TEST(DoctorQueue, EachQueueSaysItsQuotaShareAndUse) {
  json items = cluster();
  items.push_back(pod("a2", "team-a", 1));
  const auto f = explain(items);
  const auto* a = find(f, "queue team-a (under lab): ");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->what,
            "queue team-a (under lab): GPUs quota 1, limit 2, over-quota weight 1; fair share "
            "now 2; allocated 2, requested 3; 1 job(s) waiting");
  const auto* lab = find(f, "queue lab: ");
  ASSERT_NE(lab, nullptr);
  EXPECT_NE(lab->what.find("quota 3, limit none"), std::string::npos) << lab->what;
  EXPECT_NE(lab->what.find("allocated 3, requested 4; 1 job(s) waiting"), std::string::npos)
      << lab->what;
  // a2 would take team-a past its limit of 2.
  const auto* a2 = find(f, "ml/a2: ");
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(a2->id, "queue.over-limit");
  EXPECT_NE(a2->what.find("would pass its limit"), std::string::npos) << a2->what;
  EXPECT_NE(a2->fix.find("limit"), std::string::npos);
}

TEST(DoctorQueue, AJobWithinItsQuotaWouldReclaimAndTheTrialLeavesNothingBehind) {
  json items = cluster();
  // team-b is below its quota of 2; spare holds 1 against a quota of 1, team-a 2 against 1:
  // b1 would take one GPU back from team-a. b2, tried on the same state, says the same.
  items.push_back(pod("b1", "team-b", 1));
  const auto f = explain(items, "team-b");
  const auto* b1 = find(f, "ml/b1: ");
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->id, "queue.preempts");
  EXPECT_NE(b1->what.find("starts once 1 pod(s) are preempted (ml/a"), std::string::npos)
      << b1->what;
  EXPECT_NE(b1->what.find("reclaim"), std::string::npos) << b1->what;
  EXPECT_EQ(find(f, "queue team-a"), nullptr) << "only team-b was asked for";
  // Without preemption the same job waits: its queue's share is held by others.
  const auto g = explain(items, "team-b", false);
  const auto* waits = find(g, "ml/b1: ");
  ASSERT_NE(waits, nullptr);
  EXPECT_NE(waits->id, "queue.preempts");
  EXPECT_EQ(waits->id.rfind("queue.", 0), 0U);
}

TEST(DoctorQueue, AJobThatFitsSaysNoSchedulerActed) {
  json items = json::array({node("n1", 4), test::kai_queue("solo", 4, -1), pod("x", "solo", 2)});
  const auto f = explain(items);
  const auto* x = find(f, "ml/x: ");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->id, "queue.fits");
  EXPECT_EQ(x->what, "ml/x: fits now (on n1)");
  EXPECT_NE(x->fix.find("--queues"), std::string::npos);
}

// A gang held before placement says why in the scheduler's words (k8s::check_gang): too few
// members to start, or a PodGroup the scheduler cannot use.
TEST(DoctorQueue, AGangNotReadySaysWhyAsTheSchedulerDoes) {
  json member = pod("g-0", "solo", 1);
  member["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "g";
  json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "g"}, {"namespace", "ml"}}},
                {"spec", {{"minMember", 2}}}};
  const auto f =
      explain(json::array({node("n1", 4), test::kai_queue("solo", 4, -1), member, group}));
  const auto* g = find(f, "ml/g: ");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->id, "queue.gang-incomplete");
  EXPECT_EQ(g->what,
            "ml/g: gang ml/g: 1 of minMember 2 pods exist (0 bound); waiting for the rest");
  group["spec"]["minMember"] = "two";
  const auto bad =
      explain(json::array({node("n1", 4), test::kai_queue("solo", 4, -1), member, group}));
  const auto* b = find(bad, "ml/g: ");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->id, "queue.infeasible");
  EXPECT_NE(b->what.find("gang ml/g: PodGroup ml/g is malformed: "), std::string::npos) << b->what;
}

TEST(DoctorQueue, NoQueueApiOrAnUnknownQueueIsOneLine) {
  EXPECT_THROW(explain(json::array({node("n1", 4)})), base::InputError);
  try {
    explain(cluster(), "nope");
    FAIL() << "an unknown queue was accepted";
  } catch (const base::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("queue 'nope' not found (the cluster's queues: "),
              std::string::npos)
        << e.what();
  }
}

TEST(DoctorQueue, QuotasPerGpuModelSayTheirShareAndUse) {
  // Two nodes of 4 GPUs, one of A100s and one of H100s (GFD's product label); team-a is
  // guaranteed 3 A100s and holds 2 of them and 1 H100, and asks for one more A100.
  json a100 = node("na", 4), h100 = node("nh", 4);
  a100["metadata"]["labels"]["nvidia.com/gpu.product"] = "A100";
  h100["metadata"]["labels"]["nvidia.com/gpu.product"] = "H100";
  json team_a = test::kai_queue("team-a", 4, -1);
  team_a["spec"]["resources"]["gpuModels"] =
      json::array({{{"model", "A100"}, {"quota", 3}, {"limit", 3}, {"overQuotaWeight", 1}}});
  json wants_a100 = pod("a3", "team-a", 1);
  wants_a100["spec"]["nodeSelector"] = {{"nvidia.com/gpu.product", "A100"}};
  const auto f = explain(
      json::array({a100, h100, team_a, pod("a0", "team-a", 1, "na", 0),
                   pod("a1", "team-a", 1, "na", 1), pod("a2", "team-a", 1, "nh", 0), wants_a100}));
  const auto* m = find(f, "queue team-a, GPUs of model A100: ");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->what,
            "queue team-a, GPUs of model A100: quota 3, limit 3, over-quota weight 1; fair share "
            "now 3; allocated 2, requested 3");
  EXPECT_EQ(m->evidence, "cluster 4 GPUs of model A100");
}

}  // namespace
}  // namespace gpuorch
