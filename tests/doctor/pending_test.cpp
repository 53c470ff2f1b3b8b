// doctor pod on recorded API objects (a kubectl List): waiting vs infeasible, a gang short of
// members, a pod that fits, bound pods counted whatever their scheduler.
#include "gpuorch/doctor/pending.hpp"

#include <gtest/gtest.h>

#include "doctor/doctor_test_util.hpp"

namespace gpuorch {
namespace {

using nlohmann::json;

json node(const std::string& name) {
  const json res = {{"cpu", "96"}, {"memory", "768Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "H100"}}}}},
          {"status", {{"capacity", res}, {"allocatable", res}}}};
}

json pod(const std::string& name, int gpus, const std::string& bound_to = "") {
  json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}}},
      {"spec",
       {{"schedulerName", "default-scheduler"},
        {"containers",
         json::array({{{"name", "c"},
                       {"resources",
                        {{"requests", {{"cpu", "4"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}},
      {"status", {{"phase", bound_to.empty() ? "Pending" : "Running"}}}};
  if (!bound_to.empty()) p["spec"]["nodeName"] = bound_to;
  return p;
}

std::vector<doctor::Finding> explain(const json& items, const std::string& which = "") {
  const auto objects = doctor::cluster_from_list({{"kind", "List"}, {"items", items}}, "list.json");
  return doctor::explain_pending(objects, which, {});
}

TEST(DoctorPending, WaitingWhenANodeWouldFitOnceFreed) {
  const json items = json::array({node("n1"), pod("busy", 8, "n1"), pod("next", 1)});
  const auto f = explain(items, "ml/next");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "pod.waiting");
  EXPECT_NE(f[0].what.find("ml/next: 0/1 nodes are available: "), std::string::npos) << f[0].what;
  EXPECT_NE(f[0].what.find("Waiting: the pod fits once resources on a node are freed."),
            std::string::npos)
      << f[0].what;
}

TEST(DoctorPending, InfeasibleWhenNoNodeCouldEverHoldIt) {
  const auto f = explain(json::array({node("n1"), pod("huge", 16)}), "ml/huge");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "pod.infeasible");
  EXPECT_NE(f[0].what.find("Infeasible"), std::string::npos) << f[0].what;
  EXPECT_NE(f[0].fix.find("fewer GPUs"), std::string::npos) << f[0].fix;
}

TEST(DoctorPending, FitsWhenNoSchedulerActedAndEveryPendingPodExplained) {
  json gang = pod("g-0", 1);
  gang["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "g";
  const json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                      {"kind", "PodGroup"},
                      {"metadata", {{"name", "g"}, {"namespace", "ml"}}},
                      {"spec", {{"minMember", 2}}}};
  const auto f = explain(json::array({node("n1"), pod("small", 1), gang, group}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(test::problem_ids(f), (std::vector<std::string>{"pod.fits", "pod.gang-incomplete"}));
  for (const auto& x : f) {
    if (x.id == "pod.gang-incomplete") {
      EXPECT_EQ(x.what,
                "ml/g-0: gang ml/g: 1 of minMember 2 pods exist (0 bound); waiting for the rest");
    } else {
      EXPECT_NE(x.fix.find("'default-scheduler'"), std::string::npos) << x.fix;
    }
  }
  EXPECT_EQ(explain(json::array({node("n1"), pod("busy", 8, "n1")}))[0].id, "pod.none-pending");
  EXPECT_EQ(test::input_error([] { explain(json::array({node("n1")}), "ml/nope"); }),
            "pod ml/nope not found (or it has finished)");
  EXPECT_EQ(test::input_error([] { doctor::cluster_from_list(json::array(), "x.json"); }),
            "x.json: not a Kubernetes List (kubectl get nodes,pods -A -o json)");
}

// A gang member the scheduler refuses (a field it does not evaluate) is said so, as the scheduler
// says it (k8s::check_gang), instead of the gang being tried as if the field were not there.
TEST(DoctorPending, AGangMemberWithAFieldNobodyEvaluatesIsRefusedAsTheSchedulerRefusesIt) {
  json a = pod("g-0", 1);
  json b = pod("g-1", 1);
  for (json* m : {&a, &b}) (*m)["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "g";
  b["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      json::array({{{"topologyKey", "kubernetes.io/hostname"}}});
  const json group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                      {"kind", "PodGroup"},
                      {"metadata", {{"name", "g"}, {"namespace", "ml"}}},
                      {"spec", {{"minMember", 2}}}};
  const auto f = explain(json::array({node("n1"), a, b, group}), "ml/g-0");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "pod.infeasible");
  EXPECT_NE(f[0].what.find("ml/g-0: gang ml/g: member ml/g-1: Unsupported: "
                           "spec.affinity.podAntiAffinity"),
            std::string::npos)
      << f[0].what;
}

// The API server's conditions are read by shape: kube-scheduler's verdict is shown, and a
// status of another shape is no condition rather than an exception (found beside the extender's
// fuzzing: a JSON pointer through an array throws).
TEST(DoctorPending, TheirConditionIsShownAndAMisshapenStatusIsNone) {
  json theirs = pod("next", 16);
  theirs["status"]["conditions"] = json::array({"not an object",
                                                {{"type", "PodScheduled"},
                                                 {"status", "False"},
                                                 {"reason", "Unschedulable"},
                                                 {"message", "0/1 nodes are available"}}});
  auto f = explain(json::array({node("n1"), theirs}), "ml/next");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].evidence.find("the pod's condition says Unschedulable: 0/1 nodes are available"),
            std::string::npos)
      << f[0].evidence;
  for (const json& status : {json::array({"x"}), json{{"conditions", {{"type", 1}}}},
                             json{{"phase", "Pending"}, {"conditions", "PodScheduled"}}}) {
    json odd = pod("odd", 16);
    odd["status"] = status;
    f = explain(json::array({node("n1"), odd}), "ml/odd");
    ASSERT_EQ(f.size(), 1u) << status;
    EXPECT_EQ(f[0].evidence.find("the pod's condition says"), std::string::npos) << f[0].evidence;
  }
}

}  // namespace
}  // namespace gpuorch
