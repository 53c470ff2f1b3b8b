// The job layer's decisions on running training jobs, on real nodes (issue 33): `gpuorch
// scheduler --queues` preempts a rigid training job whole for a higher priority, grows an
// elastic one when GPUs free up and shrinks it by one member when another queue reclaims its
// quota; the evicted pods' containers are stopped gracefully by their kubelets (Eviction API),
// and the elastic job's `gpuorch launch` agents re-form through the c10d rendezvous at each
// size, resume from the checkpoint and finish. docs/k8s-testenv.md, "End-to-end tests".
//
// Two nodes with a recorded T4 pair each: 4 GPUs. Queues `rig` (quota 3) and `el` (quota 1).
//   1. rigid (queue rig, low priority): a gang of 3 training pods, `--nnodes 3`, holds 3 GPUs;
//      elastic (queue el, PodGroup minMember 1, 3 pods, `--nnodes 1:3`) starts with the 1 left:
//      world 1.
//   2. preemptor (queue rig, high priority, 1 GPU): all 3 rigid pods are evicted (a rigid gang
//      goes whole though one GPU would do), the preemptor is bound once they are gone.
//   3. Of the 2 GPUs left, the elastic job grows (Resized): its agents re-form at world 3.
//   4. reclaimer (queue rig, 1 GPU): el holds 3 against a share of 2, so one elastic member is
//      evicted; the two left re-form at world 2 from the checkpoint and finish; the reclaimer
//      runs to Succeeded on the GPU it freed.
// Run alone (ctest gives each test its own control plane): other tests' nodes would change the
// queues' fair shares.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
#include "support/net.hpp"
#include "support/paths.hpp"
#include "support/podgroup_crd.hpp"
#include "support/real_node_pods.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::kPods;
using test::node_of;
using test::phase;
using test::pod_log;
using test::seconds_since;

const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
const std::string kQueues = "/apis/scheduling.run.ai/v2/queues";
const std::string kClasses = "/apis/scheduling.k8s.io/v1/priorityclasses";

void create_ignoring_conflict(k8s::ApiClient& api, const std::string& path, const json& o) {
  try {
    api.create(path, o);
  } catch (const k8s::ApiError& e) {
    if (e.status() != 409) throw;  // made by an earlier test of this process
  }
}

// The pod, or null once it is gone (an evicted pod is deleted once its containers stopped).
json get_pod(k8s::ApiClient& api, const std::string& name) {
  try {
    return api.get(kPods + "/" + name);
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404) throw;
    return nullptr;
  }
}

// A busybox pod of one GPU.
json gpu_pod(const std::string& name, const std::string& script) {
  json p = test::busybox_pod(name, script);
  p["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  return p;
}

bool gone_or_going(const json& p) {
  return p.is_null() || p["metadata"].contains("deletionTimestamp");
}

// "Reason: message" of the Events about object `name`.
std::vector<std::string> events_of(k8s::ApiClient& api, const std::string& name) {
  std::vector<std::string> out;
  const json list =
      api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + name);
  for (const auto& e : list["items"])
    out.push_back(e.value("reason", "") + ": " + e.value("message", ""));
  return out;
}

bool has_event(k8s::ApiClient& api, const std::string& name, const std::string& reason) {
  for (const auto& e : events_of(api, name)) {
    if (e.rfind(reason + ":", 0) == 0) return true;
  }
  return false;
}

// Polls `done` every 200 ms until it holds or `limit` passes; says whether it held.
bool eventually(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(200ms);
  }
  return true;
}

// The world sizes rank 0 started with, in order ("start: world N, ..." lines of the DDP script).
std::vector<int> worlds(const std::string& log) {
  std::vector<int> out;
  for (std::size_t at = log.find("start: world "); at != std::string::npos;
       at = log.find("start: world ", at + 1)) {
    out.push_back(std::atoi(log.c_str() + at + 13));
  }
  return out;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RealNodePreemption, ARigidJobIsPreemptedWholeAndAnElasticJobGrowsShrinksAndFinishes) {
  SKIP_WITHOUT_REAL_NODES_OR_TORCH();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const auto t_start = std::chrono::steady_clock::now();
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/t4x2/expected/topo.json";
  const std::string label = "gpuorch.io/test=preemption";
  cp.add_node("t4-p", {"--gpus-from", topo, "--gpuorch", test::binary_path(), "--labels", label});
  cp.add_node("t4-q", {"--gpus-from", topo, "--gpuorch", test::binary_path(), "--labels", label});
  const double join_s = seconds_since(t_start);
  test::install_podgroup_crd(api, kGroups);
  test::install_podgroup_crd(api, kQueues);
  create_ignoring_conflict(api, kQueues, test::kai_queue("rig", 3, -1));
  create_ignoring_conflict(api, kQueues, test::kai_queue("el", 1, -1));
  for (const auto& [name, value] : {std::pair{"real-node-low", 10}, {"real-node-high", 1000}}) {
    create_ignoring_conflict(api, kClasses,
                             {{"apiVersion", "scheduling.k8s.io/v1"},
                              {"kind", "PriorityClass"},
                              {"metadata", {{"name", name}}},
                              {"value", value}});
  }
  auto group = [&api](const std::string& name, int min_member) {
    api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                         {"kind", "PodGroup"},
                         {"metadata", {{"name", name}}},
                         {"spec", {{"minMember", min_member}}}});
  };
  // Shared by the pods through a hostPath (one machine): the elastic job's checkpoint (whichever
  // node is rank 0 resumes from it) and the files the test writes to end the pods.
  test::TempDir shared;
  std::filesystem::permissions(shared.path(), std::filesystem::perms::all);
  const auto in_queue = [&](json p, const std::string& queue, const std::string& priority) {
    p["metadata"]["labels"]["kai.scheduler/queue"] = queue;
    if (!priority.empty()) p["spec"]["priorityClassName"] = priority;
    p["spec"]["schedulerName"] = "gpuorch";
    p["spec"]["nodeSelector"] = {{"gpuorch.io/test", "preemption"}};
    // Time for the launcher to stop its workers and leave the rendezvous (SIGTERM first).
    p["spec"]["terminationGracePeriodSeconds"] = 10;
    p["spec"]["containers"][0]["volumeMounts"].push_back(
        {{"name", "shared"}, {"mountPath", "/shared"}});
    p["spec"]["volumes"].push_back(
        {{"name", "shared"},
         {"hostPath", {{"path", shared.path().string()}, {"type", "Directory"}}}});
    return p;
  };
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0", "--resize-interval",
       "3", "--retry-unschedulable", "1"},
      dir.file("scheduler.log"));

  // 1. The rigid job holds 3 GPUs; the elastic job starts with the one left.
  const std::vector<std::string> slow{"--steps", "100000", "--step-sleep", "0.1"};
  const int rigid_port = test::free_loopback_port();
  group("rigid", 3);
  const test::TrainingJob rigid_job{"real-node-rigid", "3", "rigid", {}};
  const std::vector<std::string> rigid = {"rigid-0", "rigid-1", "rigid-2"};
  for (int i = 0; i < 3; ++i) {
    api.create(kPods, in_queue(test::training_pod(rigid[i], "", i, rigid_port, slow, rigid_job),
                               "rig", "real-node-low"));
  }
  for (const auto& n : rigid) {
    ASSERT_TRUE(eventually([&] { return !node_of(api.get(kPods + "/" + n)).empty(); }, 60s))
        << n << "\n"
        << scheduler.log();
  }
  const int elastic_port = test::free_loopback_port();
  group("elastic", 1);
  const test::TrainingJob elastic_job{
      "real-node-elastic",
      "1:3",
      "elastic",
      {"--max-restarts", "3", "--rdzv-conf", "last_call_timeout=2", "--stop-grace", "3"}};
  std::vector<std::string> elastic_args = slow;
  for (const char* a : {"--ckpt-dir", "/shared", "--stop-file", "/shared/stop"})
    elastic_args.push_back(a);
  const std::vector<std::string> elastic = {"elastic-0", "elastic-1", "elastic-2"};
  // 127.0.0.4-6: one length, so the c10d ranks (sorted by address) keep elastic-0 rank 0.
  for (int i = 0; i < 3; ++i) {
    api.create(kPods, in_queue(test::training_pod(elastic[i], "", 3 + i, elastic_port, elastic_args,
                                                  elastic_job),
                               "el", ""));
  }
  const auto t_train = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(
      [&] { return pod_log(api, "elastic-0").find("step 3 loss") != std::string::npos; }, 120s))
      << pod_log(api, "elastic-0") << scheduler.log();
  ASSERT_TRUE(eventually(
      [&] { return pod_log(api, "rigid-0").find("step 3 loss") != std::string::npos; }, 60s))
      << pod_log(api, "rigid-0");
  EXPECT_NE(pod_log(api, "rigid-0").find("start: world 3"), std::string::npos)
      << pod_log(api, "rigid-0");
  EXPECT_EQ(worlds(pod_log(api, "elastic-0")), std::vector<int>{1}) << pod_log(api, "elastic-0");
  for (const auto& n : {"elastic-1", "elastic-2"}) {
    EXPECT_TRUE(node_of(api.get(kPods + "/" + std::string(n))).empty())
        << n << " bound at the start";
  }
  const double started_s = seconds_since(t_train);

  // 2. A higher priority in the rigid job's queue takes one GPU: the whole gang goes.
  const auto t_preempt = std::chrono::steady_clock::now();
  api.create(kPods, in_queue(gpu_pod("preemptor",
                                     "echo preemptor running; i=0; "
                                     "while [ ! -e /shared/release ] && [ $i -lt 1200 ]; "
                                     "do sleep 0.1; i=$((i+1)); done; echo released"),
                             "rig", "real-node-high"));
  ASSERT_TRUE(eventually([&] { return !node_of(api.get(kPods + "/preemptor")).empty(); }, 90s))
      << scheduler.log();
  // Bound only once every victim is gone (its containers stopped: Failed, or deleted by its
  // kubelet after that), and every member of the gang was one.
  for (const auto& n : rigid) {
    const json p = get_pod(api, n);
    EXPECT_TRUE(p.is_null() || (gone_or_going(p) && test::finished(p)))
        << n << " still running when the preemptor was bound: " << p.dump();
    EXPECT_TRUE(has_event(api, n, "Preempted")) << testing::PrintToString(events_of(api, n));
  }
  EXPECT_TRUE(has_event(api, "preemptor", "Preempting"))
      << testing::PrintToString(events_of(api, "preemptor"));
  const double preempt_s = seconds_since(t_preempt);

  // 3. The elastic job grows on the 2 GPUs left: its agents re-form at world 3.
  const auto t_grow = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(
      [&] {
        const auto w = worlds(pod_log(api, "elastic-0"));
        const std::string log = pod_log(api, "elastic-0");
        return !w.empty() && w.back() == 3 &&
               count_of(log.substr(log.rfind("start: world 3")), " loss ") >= 2;
      },
      120s))
      << pod_log(api, "elastic-0") << scheduler.log();
  EXPECT_TRUE(has_event(api, "elastic", "Resized"))
      << testing::PrintToString(events_of(api, "elastic"));
  const double grow_s = seconds_since(t_grow);

  // 4. The rigid job's queue claims a GPU back from el (3 held, share 2): one elastic member.
  const auto t_reclaim = std::chrono::steady_clock::now();
  api.create(kPods, in_queue(gpu_pod("reclaimer", "echo reclaimer running"), "rig", ""));
  ASSERT_TRUE(eventually([&] { return !node_of(api.get(kPods + "/reclaimer")).empty(); }, 90s))
      << scheduler.log();
  std::vector<std::string> evicted, kept;
  for (const auto& n : elastic) (gone_or_going(get_pod(api, n)) ? evicted : kept).push_back(n);
  ASSERT_EQ(evicted.size(), 1U) << testing::PrintToString(evicted) << scheduler.log();
  EXPECT_NE(evicted[0], "elastic-0") << "the member above minMember goes, not the store's";
  EXPECT_TRUE(has_event(api, evicted[0], "Preempted"))
      << testing::PrintToString(events_of(api, evicted[0]));
  ASSERT_TRUE(eventually(
      [&] {
        const auto w = worlds(pod_log(api, "elastic-0"));
        return w.size() >= 3 && w.back() == 2;
      },
      120s))
      << pod_log(api, "elastic-0");
  const double reclaim_s = seconds_since(t_reclaim);
  // A few steps at world 2, then the end.
  ASSERT_TRUE(eventually(
      [&] {
        const std::string log = pod_log(api, "elastic-0");
        return count_of(log.substr(log.rfind("start: world 2")), " loss ") >= 3;
      },
      60s))
      << pod_log(api, "elastic-0");
  std::ofstream(shared.file("stop")) << "stop\n";
  std::ofstream(shared.file("release")) << "release\n";
  for (const auto& n : kept) {
    const json p = test::wait_for(api, kPods + "/" + n, test::finished, 120s);
    EXPECT_EQ(phase(p), "Succeeded") << n << "\n" << pod_log(api, n);
    EXPECT_NE(pod_log(api, n).find("result         succeeded"), std::string::npos)
        << pod_log(api, n);
  }
  for (const std::string n : {"preemptor", "reclaimer"}) {
    const json p = test::wait_for(api, kPods + "/" + n, test::finished, 60s);
    EXPECT_EQ(phase(p), "Succeeded") << n << "\n" << pod_log(api, n);
    EXPECT_NE(pod_log(api, n).find(n + " running"), std::string::npos) << pod_log(api, n);
  }
  const double train_s = seconds_since(t_train);
  const std::string log0 = pod_log(api, "elastic-0");
  const auto w = worlds(log0);
  ASSERT_GE(w.size(), 3U) << log0;
  EXPECT_EQ(w.front(), 1) << log0;
  EXPECT_EQ(w.back(), 2) << log0;
  EXPECT_NE(std::find(w.begin(), w.end(), 3), w.end()) << log0;
  EXPECT_NE(log0.find("done: 2 ranks hold identical weights"), std::string::npos) << log0;
  // Every re-formed round resumed from the checkpoint, never from step 0.
  EXPECT_EQ(count_of(log0, "from step 0,"), 1U) << log0;

  // No pod bound twice.
  const std::string slog = scheduler.log();
  for (const auto& names : {rigid, elastic, std::vector<std::string>{"preemptor", "reclaimer"}}) {
    for (const auto& n : names)
      EXPECT_EQ(count_of(slog, "bound default/" + n + " to"), 1U) << n << "\n" << slog;
  }
  EXPECT_EQ(scheduler.stop(), 0) << slog;
  std::printf("--- elastic-0 (rank 0 throughout) ---\n%s", log0.c_str());
  for (const auto& n : kept) {
    if (n != "elastic-0")
      std::printf("--- %s on %s: last lines ---\n%s", n.c_str(),
                  node_of(api.get(kPods + "/" + n)).c_str(),
                  pod_log(api, n)
                      .substr(pod_log(api, n).size() > 600 ? pod_log(api, n).size() - 600 : 0)
                      .c_str());
  }
  std::string sizes;
  for (int x : w) sizes += (sizes.empty() ? "" : " -> ") + std::to_string(x);
  std::printf(
      "real nodes: 2 joined %.1f s; rigid (3) and elastic (1) training %.1f s; rigid preempted "
      "whole, preemptor bound %.1f s; elastic grown and re-formed %.1f s; member %s evicted, "
      "world 2 re-formed %.1f s; elastic worlds %s; to all finished %.1f s\n",
      join_s, started_s, preempt_s, grow_s, evicted[0].c_str(), reclaim_s, sizes.c_str(), train_s);
}

}  // namespace
}  // namespace gpuorch
