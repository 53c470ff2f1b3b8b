// `gpuorch scheduler --queues` preempts on the real kube-apiserver: a queue below its quota takes
// back from a queue that borrowed idle GPUs, evicting the fewest pods through the Eviction API
// (a PodDisruptionBudget that forbids an eviction makes it choose another victim, never break
// the budget); a higher priority takes a whole lower-priority gang, never one member of it; a
// pod whose preemptionPolicy is Never waits instead; the preemptor is nominated to the node and
// bound on the freed GPUs only once its victims are gone (graceful termination: the test deletes
// them as the kubelet would once their containers stopped); Events on both sides say why.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kai_queue.hpp"
#include "support/kube_objects.hpp"
#include "support/podgroup_crd.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::node_of;
using test::wait_for;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kQueues = "/apis/scheduling.run.ai/v2/queues";
const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
const std::string kBudgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
const std::string kClasses = "/apis/scheduling.k8s.io/v1/priorityclasses";

void drop(k8s::ApiClient& api, const std::string& path) {
  try {
    api.remove(path);
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404) throw;
  }
}

// A fresh start: no pods, nodes, budgets or queues of other tests; the CRDs served.
void fresh(k8s::ApiClient& api) {
  test::clear_cluster(api);
  drop(api, kBudgets);
  test::install_podgroup_crd(api, kGroups);
  test::install_podgroup_crd(api, kQueues);
  drop(api, kQueues);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && !api.get(kQueues)["items"].empty()) {
    std::this_thread::sleep_for(100ms);
  }
}

void add_node(k8s::ApiClient& api, int gpus) {
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const json res = {{"cpu", "64"},
                    {"memory", "512Gi"},
                    {"pods", "110"},
                    {"nvidia.com/gpu", std::to_string(gpus)}};
  api.patch("/api/v1/nodes/n1/status", {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

void put_queue(k8s::ApiClient& api, const std::string& name, int quota) {
  api.create(kQueues, test::kai_queue(name, quota, -1));
}

void put_priority_class(k8s::ApiClient& api, const std::string& name, int value,
                        bool never = false) {
  drop(api, kClasses + "/" + name);
  json c = {{"apiVersion", "scheduling.k8s.io/v1"},
            {"kind", "PriorityClass"},
            {"metadata", {{"name", name}}},
            {"value", value}};
  if (never) c["preemptionPolicy"] = "Never";
  for (int attempt = 0;; ++attempt) {
    try {
      api.create(kClasses, c);
      return;
    } catch (const k8s::ApiError& e) {
      if (e.status() != 409 || attempt > 100) throw;  // the delete above is still under way
      std::this_thread::sleep_for(100ms);
    }
  }
}

json pod(const std::string& name, const std::string& queue, int gpus = 1,
         const std::string& priority_class = "", const std::string& group = "") {
  const std::string n = std::to_string(gpus);
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"labels", {{"kai.scheduler/queue", queue}}}}},
            {"spec",
             {{"schedulerName", "gpuorch"},
              {"containers", json::array({{{"name", "c"},
                                           {"image", "registry.k8s.io/pause:3.10"},
                                           {"resources",
                                            {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", n}}},
                                             {"limits", {{"nvidia.com/gpu", n}}}}}}})}}}};
  if (!priority_class.empty()) p["spec"]["priorityClassName"] = priority_class;
  if (!group.empty()) p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  return p;
}

void put_group(k8s::ApiClient& api, const std::string& name, int min_member) {
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", name}}},
                       {"spec", {{"minMember", min_member}}}});
}

json bound(k8s::ApiClient& api, const std::string& name) {
  return wait_for(api, kPods + "/" + name, [](const json& p) { return !node_of(p).empty(); });
}

bool terminating(const json& p) { return p["metadata"].contains("deletionTimestamp"); }

// Which of `names` are being evicted (deletionTimestamp set; no kubelet finishes them here).
std::set<std::string> evicted(k8s::ApiClient& api, const std::vector<std::string>& names) {
  std::set<std::string> out;
  for (const auto& n : names) {
    try {
      if (terminating(api.get(kPods + "/" + n))) out.insert(n);
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404) throw;
      out.insert(n);
    }
  }
  return out;
}

// Waits until `count` of `names` are being evicted, then a little longer, so a victim too many
// would show.
std::set<std::string> wait_evicted(k8s::ApiClient& api, const std::vector<std::string>& names,
                                   std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline && evicted(api, names).size() < count) {
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);
  return evicted(api, names);
}

// What a kubelet reports once the containers run and are ready: only then does a
// PodDisruptionBudget guard the pod (the Eviction API lets Pending pods go regardless).
void run(k8s::ApiClient& api, const std::string& name) {
  api.patch(kPods + "/" + name + "/status",
            {{"status",
              {{"phase", "Running"},
               {"startTime", "2026-12-04T00:00:00Z"},
               {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}},
                                           {{"type", "PodScheduled"}, {"status", "True"}}})}}}},
            "application/merge-patch+json");
}

// What a kubelet does once a terminating pod's containers have stopped.
void finish(k8s::ApiClient& api, const std::string& name) {
  drop(api, kPods + "/" + name + "?gracePeriodSeconds=0");
}

// "Reason: message" of the Events about pod `name`.
std::vector<std::string> events_of(k8s::ApiClient& api, const std::string& name) {
  std::vector<std::string> out;
  const json list =
      api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + name);
  for (const auto& e : list["items"]) {
    out.push_back(e.value("reason", "") + ": " + e.value("message", ""));
  }
  return out;
}

bool has_event(k8s::ApiClient& api, const std::string& name, const std::string& words) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : events_of(api, name)) {
      if (e.find(words) != std::string::npos) return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::vector<int> gpus_of(const json& p) {
  std::vector<int> out;
  const std::string s =
      p["metadata"].value("annotations", json::object()).value("gpuorch.io/gpus", "");
  for (std::size_t at = 0; at < s.size();) {
    std::size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::stoi(s.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

TEST(SchedulerPreemption, AQueueReclaimsItsQuotaAndABudgetMakesItChooseAnotherVictim) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  fresh(api);
  put_queue(api, "a", 2);
  put_queue(api, "b", 2);
  add_node(api, 4);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  // a borrows the whole node: 4 GPUs against a quota of 2, nobody else wanting them.
  const std::vector<std::string> as = {"a0", "a1", "a2", "a3"};
  for (const auto& n : as) {
    api.create(kPods, pod(n, "a"));
    ASSERT_EQ(node_of(bound(api, n)), "n1") << scheduler.log();
    run(api, n);
  }
  // b wants 1 of its 2: exactly one of a's pods is evicted, and b0 waits for it, nominated.
  api.create(kPods, pod("b0", "b"));
  const auto first = wait_evicted(api, as, 1);
  ASSERT_EQ(first.size(), 1U) << scheduler.log();
  const std::string victim = *first.begin();
  const std::vector<int> victim_gpus = gpus_of(api.get(kPods + "/" + victim));
  json b0 = wait_for(api, kPods + "/b0", [](const json& p) {
    return p.value("status", json::object()).value("nominatedNodeName", "") == "n1";
  });
  EXPECT_TRUE(node_of(b0).empty()) << "bound before its victim is gone";
  EXPECT_TRUE(has_event(api, victim,
                        "Preempted: Preempted by default/b0 to reclaim queue b's "
                        "quota (queue a is over its fair share)"))
      << testing::PrintToString(events_of(api, victim));
  EXPECT_TRUE(has_event(api, "b0", "Preempting: Preempting 1 pod(s) (default/" + victim + ")"))
      << testing::PrintToString(events_of(api, "b0"));
  // The victim's containers stopped: b0 is bound on the GPU it freed.
  finish(api, victim);
  b0 = bound(api, "b0");
  EXPECT_EQ(node_of(b0), "n1");
  EXPECT_EQ(gpus_of(b0), victim_gpus);

  // A budget forbids evicting all but one of a's pods left (its status as the disruption
  // controller writes it: no disruption allowed). b1 needs one GPU: the one pod the budget does
  // not cover is evicted, whichever the layer would have chosen first.
  std::vector<std::string> left;
  for (const auto& n : as) {
    if (n != victim) left.push_back(n);
  }
  for (std::size_t i = 0; i + 1 < left.size(); ++i) {
    api.patch(kPods + "/" + left[i], {{"metadata", {{"labels", {{"guard", "yes"}}}}}});
  }
  const json budget = api.create(
      kBudgets,
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "guard"}}},
       {"spec", {{"maxUnavailable", 0}, {"selector", {{"matchLabels", {{"guard", "yes"}}}}}}}});
  api.patch(kBudgets + "/guard/status",
            {{"status",
              {{"observedGeneration", budget["metadata"].value("generation", 1)},
               {"disruptionsAllowed", 0},
               {"currentHealthy", 2},
               {"desiredHealthy", 2},
               {"expectedPods", 2}}}},
            "application/merge-patch+json");
  api.create(kPods, pod("b1", "b"));
  const auto second = wait_evicted(api, left, 1);
  EXPECT_EQ(second, (std::set<std::string>{left.back()})) << scheduler.log();
  // With one start time for all, the layer's first choice is one the budget guards (the first
  // by name): its dry run was refused, and the layer chose again.
  EXPECT_NE(scheduler.log().find("eviction of default/" + left[0] + " refused, choosing again"),
            std::string::npos)
      << scheduler.log();
  finish(api, left.back());
  EXPECT_EQ(node_of(bound(api, "b1")), "n1") << scheduler.log();

  // b holds its quota; a holds its own: b2 waits, and nothing more is evicted.
  api.create(kPods, pod("b2", "b"));
  const json b2 = wait_for(api, kPods + "/b2",
                           [](const json& p) { return !test::unschedulable_message(p).empty(); });
  EXPECT_TRUE(node_of(b2).empty());
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(evicted(api, {left[0], left[1]}).empty()) << scheduler.log();
  // doctor queue gives the scheduler's verdict on b2, with b's quota, share and use.
  const auto report =
      test::run_cli({"doctor", "queue", "b", "--kubeconfig", cp.kubeconfig(), "--json"}, dir);
  EXPECT_EQ(report.exit_code, 1) << report.out << report.err;
  std::map<std::string, std::string> said;  // id -> what
  const json parsed = json::parse(report.out);
  for (const auto& f : parsed["checks"][0]["findings"]) {
    said[f["id"].get<std::string>()] = f["what"].get<std::string>();
  }
  EXPECT_EQ(
      said["queue.state"],
      "queue b: GPUs quota 2, limit none, over-quota weight 1; fair share now 2; allocated 2, "
      "requested 3; 1 job(s) waiting")
      << report.out;
  EXPECT_EQ(said["queue.over-quota"], "default/b2: " + test::unschedulable_message(b2).substr(
                                                           std::string("queue admission: ").size()))
      << report.out;
  const auto unknown =
      test::run_cli({"doctor", "queue", "nope", "--kubeconfig", cp.kubeconfig()}, dir);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err.rfind("gpuorch: queue 'nope' not found (the cluster's queues: ", 0), 0U)
      << unknown.err;
  drop(api, kBudgets + "/guard");
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

TEST(SchedulerPreemption, AHigherPriorityTakesAWholeGangAndNeverDoesNotPreempt) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  fresh(api);
  put_queue(api, "p", 4);
  put_priority_class(api, "gpuorch-test-low", 10);
  put_priority_class(api, "gpuorch-test-high", 1000);
  put_priority_class(api, "gpuorch-test-high-never", 1000, true);
  add_node(api, 4);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  // A low-priority gang of two 2-GPU pods holds the node.
  put_group(api, "low", 2);
  const std::vector<std::string> low = {"low-0", "low-1"};
  for (const auto& n : low) api.create(kPods, pod(n, "p", 2, "gpuorch-test-low", "low"));
  for (const auto& n : low) ASSERT_EQ(node_of(bound(api, n)), "n1") << scheduler.log();
  // A high priority that may not preempt waits, and nothing is evicted for it.
  api.create(kPods, pod("never", "p", 1, "gpuorch-test-high-never"));
  wait_for(api, kPods + "/never",
           [](const json& p) { return !test::unschedulable_message(p).empty(); });
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(evicted(api, low).empty()) << scheduler.log();
  // A high-priority gang of two 1-GPU pods: one low member's GPUs would do, but a rigid gang
  // is never broken, so both go; the high gang is nominated and bound once they are gone.
  put_group(api, "high", 2);
  for (const char* n : {"high-0", "high-1"}) {
    api.create(kPods, pod(n, "p", 1, "gpuorch-test-high", "high"));
  }
  EXPECT_EQ(wait_evicted(api, low, 2).size(), 2U) << scheduler.log();
  EXPECT_TRUE(has_event(api, low[0], "Preempted: Preempted by gang default/high (priority 1000)"))
      << testing::PrintToString(events_of(api, low[0]));
  for (const char* n : {"high-0", "high-1"}) {
    EXPECT_TRUE(node_of(api.get(kPods + "/" + n)).empty()) << n << " bound before the gang went";
  }
  EXPECT_TRUE(node_of(api.get(kPods + "/never")).empty())
      << "the GPUs the terminating gang still holds went to a pod";
  for (const auto& n : low) finish(api, n);
  std::set<int> used;
  for (const char* n : {"high-0", "high-1"}) {
    const json p = bound(api, n);
    EXPECT_EQ(node_of(p), "n1");
    for (int g : gpus_of(p)) EXPECT_TRUE(used.insert(g).second) << "GPU " << g << " twice";
  }
  // What the gang left beyond the high gang's need is free again: the pod that would not
  // preempt takes it now.
  EXPECT_EQ(node_of(bound(api, "never")), "n1") << scheduler.log();
  for (const char* c : {"gpuorch-test-low", "gpuorch-test-high", "gpuorch-test-high-never"}) {
    drop(api, kClasses + "/" + std::string(c));
  }
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

TEST(SchedulerPreemption, AnElasticGangStartsAtMinGrowsByTheIntervalAndShrinksFirst) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  fresh(api);
  put_queue(api, "e", 2);
  put_queue(api, "o", 4);
  add_node(api, 6);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0", "--resize-interval",
       "4", "--retry-unschedulable", "1"},
      dir.file("scheduler.log"));
  // o holds 4 of the 6 GPUs, within its quota.
  const std::vector<std::string> os = {"o0", "o1", "o2", "o3"};
  for (const auto& n : os) {
    api.create(kPods, pod(n, "o"));
    ASSERT_EQ(node_of(bound(api, n)), "n1") << scheduler.log();
  }
  // An elastic gang: minMember 2, 6 pods. It starts with the 2 GPUs that are free.
  put_group(api, "el", 2);
  std::vector<std::string> el;
  for (int i = 0; i < 6; ++i) {
    el.push_back(fmt::format("el-{}", i));
    api.create(kPods, pod(el.back(), "e", 1, "", "el"));
  }
  const auto count_bound = [&] {
    int n = 0;
    for (const auto& name : el) {
      try {
        n += int(!node_of(api.get(kPods + "/" + name)).empty());
      } catch (const k8s::ApiError& e) {
        if (e.status() != 404) throw;  // a replica preempted and gone
      }
    }
    return n;
  };
  const auto wait_bound = [&](int want) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline && count_bound() != want) {
      std::this_thread::sleep_for(100ms);
    }
    return count_bound();
  };
  ASSERT_EQ(wait_bound(2), 2) << scheduler.log();
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(count_bound(), 2);
  // o's pods finish: the gang grows to 6, but not before the resize interval has passed.
  for (const auto& n : os) finish(api, n);
  ASSERT_EQ(wait_bound(6), 6) << scheduler.log();
  EXPECT_GE(std::chrono::steady_clock::now() - started, 3500ms) << "grew faster than 4 s";
  for (const auto& name : el) run(api, name);
  // o wants 2 GPUs within its quota: e is over its share, and exactly its 2 replicas above
  // what it must keep go (elastic replicas before whole jobs, never below minMember).
  api.create(kPods, pod("o4", "o", 2));
  const auto gone = wait_evicted(api, el, 2);
  EXPECT_EQ(gone.size(), 2U) << scheduler.log();
  for (const auto& name : gone) finish(api, name);
  EXPECT_EQ(node_of(bound(api, "o4")), "n1") << scheduler.log();
  EXPECT_EQ(count_bound(), 4);
  // No pod was bound twice.
  const std::string log = scheduler.log();
  for (const auto& name : el) {
    std::size_t binds = 0;
    for (std::size_t at = log.find("bound default/" + name + " to"); at != std::string::npos;
         at = log.find("bound default/" + name + " to", at + 1)) {
      ++binds;
    }
    EXPECT_LE(binds, 1U) << name;
  }
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << log;
}

// Quotas per GPU model (spec.resources.gpuModels, docs/jobs.md): a node of 4 A100s and one of 4
// H100s (GFD's product label); a is guaranteed the A100s, b the H100s. a's pods, accepting any
// model, fill its A100s first, then borrow the H100s; b's pod takes back one H100, never an A100.
TEST(SchedulerPreemption, ReclaimByGpuModelTakesOnlyPodsOnThatModel) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  fresh(api);
  for (const auto& [q, model] : {std::pair{"a", "A100"}, {"b", "H100"}}) {
    json queue = test::kai_queue(q, 4, -1);
    queue["spec"]["resources"]["gpuModels"] =
        json::array({{{"model", model}, {"quota", 4}, {"limit", -1}, {"overQuotaWeight", 1}}});
    api.create(kQueues, queue);
  }
  for (const auto& [name, model] : {std::pair{"na", "A100"}, {"nh", "H100"}}) {
    api.create("/api/v1/nodes",
               {{"apiVersion", "v1"},
                {"kind", "Node"},
                {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", model}}}}}});
    const json res = {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}};
    api.patch(std::string("/api/v1/nodes/") + name + "/status",
              {{"status", {{"capacity", res}, {"allocatable", res}}}});
  }
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  const std::vector<std::string> on_a100 = {"a0", "a1", "a2", "a3"};
  const std::vector<std::string> on_h100 = {"a4", "a5", "a6", "a7"};
  for (std::size_t i = 0; i < 8; ++i) {
    const std::string& n = i < 4 ? on_a100[i] : on_h100[i - 4];
    api.create(kPods, pod(n, "a"));
    ASSERT_EQ(node_of(bound(api, n)), i < 4 ? "na" : "nh") << n << "\n" << scheduler.log();
    run(api, n);
  }
  api.create(kPods, pod("b0", "b"));
  const auto victims = wait_evicted(api, on_h100, 1);
  ASSERT_EQ(victims.size(), 1U) << scheduler.log();
  EXPECT_TRUE(evicted(api, on_a100).empty()) << "a victim on the A100s\n" << scheduler.log();
  finish(api, *victims.begin());
  EXPECT_EQ(node_of(bound(api, "b0")), "nh") << scheduler.log();
  // The Queue's status per model: b holds one H100.
  const json b = wait_for(api, kQueues + "/b", [](const json& q) {
    return q.value("status", json::object())
               .value("gpuModels", json::object())
               .value("H100", json::object())
               .value("allocated", "") == "1";
  });
  EXPECT_EQ(b["status"]["gpuModels"]["H100"]["allocated"], "1") << b.dump();
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

}  // namespace
}  // namespace gpuorch
