// Issue 32 item 5 on the real kube-apiserver: an elastic gang's growth is decided by the speed it
// measured. `gpuorch launch` publishes a job's throughput as its pod's gpuorch.io/throughput
// annotation (here written by the test, as the launcher would, and by the launcher itself with
// --kubeconfig), and `gpuorch scheduler --queues` fits Pollux's throughput model to one sample per
// size the gang's pods report: a gang that scales is grown, one whose next pod adds nothing is
// not, and its pods and PodGroup say why; pods that add nothing go back when a job waits. The
// resize interval goes by the API's clock (SchedulerResizeClock).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/workload/throughput_report.hpp"
#include "support/cluster_objects.hpp"
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

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kQueues = "/apis/scheduling.run.ai/v2/queues";
const std::string kGroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";

// What the launcher of a job of `pods` pods (one rank each) measured.
std::string measured(int pods, double samples_per_second) {
  workload::ThroughputReport r;
  r.world_size = pods;
  r.nodes = pods;
  r.local_batch = 32;
  r.samples_per_second = samples_per_second;
  r.step_time = pods * 32 / samples_per_second;
  r.time = fmt::format("2026-12-04T16:00:0{}Z", pods);
  return workload::to_annotation(r);
}

json gpu_pod(const std::string& name, const std::string& group = "",
             const std::string& throughput = "") {
  json p = test::gpu_pod(name, {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  p["metadata"]["labels"] = {{"kai.scheduler/queue", "q"}};
  if (!group.empty()) p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = group;
  if (!throughput.empty()) {
    p["metadata"]["annotations"][workload::kThroughputAnnotation] = throughput;
  }
  return p;
}

int count_bound(k8s::ApiClient& api, const std::string& prefix, int pods) {
  int n = 0;
  for (int i = 0; i < pods; ++i) {
    n += int(!node_of(api.get(fmt::format("{}/{}-{}", kPods, prefix, i))).empty());
  }
  return n;
}

int wait_bound(k8s::ApiClient& api, const std::string& prefix, int pods, int want) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && count_bound(api, prefix, pods) != want) {
    std::this_thread::sleep_for(100ms);
  }
  return count_bound(api, prefix, pods);
}

std::string events_about(k8s::ApiClient& api, const std::string& name) {
  std::string out;
  const json list =
      api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + name);
  for (const auto& e : list["items"]) {
    out += e.value("reason", "") + ": " + e.value("message", "") + "\n";
  }
  return out;
}

// An empty cluster but for queue q (quota 8 GPUs) and node n1 with `gpus` GPUs.
void one_queue_one_node(k8s::ApiClient& api, int gpus) {
  test::clear_cluster(api);
  test::install_podgroup_crd(api, kGroups);
  test::install_podgroup_crd(api, kQueues);
  try {
    api.remove(kQueues);
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404) throw;
  }
  api.create(kQueues, test::kai_queue("q", 8, -1));
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  const json res = {{"cpu", "64"},
                    {"memory", "512Gi"},
                    {"pods", "110"},
                    {"nvidia.com/gpu", std::to_string(gpus)}};
  api.patch("/api/v1/nodes/n1/status", {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

// `ago` seconds before now, as the API writes times.
std::string before_now(std::chrono::seconds ago) {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() - ago);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// `gpuorch scheduler --queues` resizing at most once a second, a resize costing 0.1 s, with
// `more` flags (its periodic retry, its backoff).
std::vector<std::string> fast_resizing(const test::ControlPlane& cp,
                                       std::vector<std::string> more) {
  std::vector<std::string> args = {"--kubeconfig", cp.kubeconfig(),     "--queues", "--listen",
                                   "127.0.0.1:0",  "--resize-interval", "1",        "--resize-cost",
                                   "0.1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// What a kubelet writes when it starts the pod (a replay writes the simulated start instead).
void started(k8s::ApiClient& api, const std::string& name, std::chrono::seconds ago) {
  api.patch(kPods + "/" + name + "/status",
            {{"status", {{"phase", "Running"}, {"startTime", before_now(ago)}}}},
            "application/merge-patch+json");
}

TEST(SchedulerMeasuredGrowth, AGangThatScalesGrowsAndOneThatDoesNotSaysWhy) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  one_queue_one_node(api, 8);
  test::TempDir dir;
  test::SchedulerProcess scheduler(fast_resizing(cp, {"--retry-unschedulable", "1"}),
                                   dir.file("scheduler.log"));
  // Three single-GPU pods hold 3 of the 8 GPUs for now.
  for (int i = 0; i < 3; ++i) {
    api.create(kPods, gpu_pod(fmt::format("o-{}", i)));
    test::wait_for(api, fmt::format("{}/o-{}", kPods, i),
                   [](const json& p) { return !node_of(p).empty(); });
  }
  // flat (minMember 3, 4 pods) measured 100, 110 and 112 samples/s at 1, 2 and 3 pods: its
  // fourth pod adds nothing, so it runs 3 even though a GPU is free.
  for (const char* g : {"flat", "fast"}) {
    api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                         {"kind", "PodGroup"},
                         {"metadata", {{"name", g}}},
                         {"spec", {{"minMember", std::string(g) == "flat" ? 3 : 2}}}});
  }
  const std::vector<std::string> flat = {measured(1, 100), measured(2, 110), measured(3, 112), ""};
  for (int i = 0; i < 4; ++i) {
    api.create(kPods, gpu_pod(fmt::format("flat-{}", i), "flat", flat[std::size_t(i)]));
  }
  ASSERT_EQ(wait_bound(api, "flat", 4, 3), 3) << scheduler.log();
  // fast (minMember 2, 4 pods) measured 100 and 198 samples/s at 1 and 2 pods: it starts with
  // the 2 GPUs left and grows to 4 once the others finish.
  api.create(kPods, gpu_pod("fast-0", "fast", measured(1, 100)));
  api.create(kPods, gpu_pod("fast-1", "fast", measured(2, 198)));
  for (int i = 2; i < 4; ++i) api.create(kPods, gpu_pod(fmt::format("fast-{}", i), "fast"));
  ASSERT_EQ(wait_bound(api, "fast", 4, 2), 2) << scheduler.log();
  for (int i = 0; i < 3; ++i) api.remove(fmt::format("{}/o-{}?gracePeriodSeconds=0", kPods, i));
  EXPECT_EQ(wait_bound(api, "fast", 4, 4), 4) << scheduler.log();
  test::wait_for(api, "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dfast",
                 [](const json& l) {
                   for (const auto& e : l["items"]) {
                     if (e.value("reason", "") == "Resized") return true;
                   }
                   return false;
                 });
  EXPECT_NE(
      events_about(api, "fast")
          .find("measured 198 samples/s at 2 pods, fitted speedup at 4 pods 2.00x: grown to 4"),
      std::string::npos)
      << events_about(api, "fast");
  // flat still runs 3, and its waiting pod and its PodGroup say why.
  const json waiting = test::wait_for(api, kPods + "/flat-3", [](const json& p) {
    return test::unschedulable_message(p).find("fitted speedup") != std::string::npos;
  });
  const std::string why = test::unschedulable_message(waiting);
  EXPECT_NE(why.find("gang default/flat: measured 112 samples/s at 3 pods, fitted speedup at 4 "
                     "pods"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("not grown"), std::string::npos) << why;
  EXPECT_NE(events_about(api, "flat").find("NotResized: gang default/flat: measured 112"),
            std::string::npos)
      << events_about(api, "flat");
  EXPECT_EQ(count_bound(api, "flat", 4), 3);

  // fast then measures 200 samples/s at 4 pods: its last 2 pods add 1 %. A job asking 3 GPUs
  // (1 is free) gets them: fast gives back its last 2 pods, never one below minMember.
  const json annotation = {{workload::kThroughputAnnotation, measured(4, 200)}};
  api.patch(kPods + "/fast-2", {{"metadata", {{"annotations", annotation}}}});
  json late = gpu_pod("late");
  late["spec"]["containers"][0]["resources"] = {
      {"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "3"}}}, {"limits", {{"nvidia.com/gpu", "3"}}}};
  api.create(kPods, late);
  const auto going = [&] {
    std::vector<std::string> out;
    for (int i = 0; i < 4; ++i) {
      const json p = api.get(fmt::format("{}/fast-{}", kPods, i));
      if (p["metadata"].contains("deletionTimestamp")) out.push_back(p["metadata"]["name"]);
    }
    return out;
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline && going().size() < 2) {
    std::this_thread::sleep_for(100ms);
  }
  const auto gone = going();
  EXPECT_EQ(gone, (std::vector<std::string>{"fast-2", "fast-3"})) << scheduler.log();
  // A shrink starts no pod: its time is marked on the PodGroup, where the resize interval
  // reads it (and a restarted scheduler or a replay's clock finds it).
  const json group = test::wait_for(api, kGroups + "/fast", [](const json& g) {
    return g["metadata"].contains("annotations") &&
           g["metadata"]["annotations"].contains("gpuorch.io/resized-at");
  });
  const std::int64_t shrunk = k8s::rfc3339_seconds(
      group["metadata"]["annotations"]["gpuorch.io/resized-at"].get<std::string>());
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  EXPECT_LE(shrunk, now_s);
  EXPECT_GE(shrunk, now_s - 60);
  EXPECT_NE(events_about(api, "fast").find("fitted speedup of 4 pods over 2 1.01x"),
            std::string::npos)
      << events_about(api, "fast");
  for (const auto& n : gone) api.remove(kPods + "/" + n + "?gracePeriodSeconds=0");
  test::wait_for(api, kPods + "/late", [](const json& p) { return !node_of(p).empty(); });
  EXPECT_EQ(count_bound(api, "fast", 2), 2);
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

// A shrink made for a waiting job is a preemption made for it: the job is nominated onto what
// the evicted pods free (status.nominatedNodeName, an Event), nobody else is placed there while
// they terminate, and it is bound as soon as they are gone, not after its backoff
// (docs/sim-timeline.md, "Same answer over time", workload-6 at t = 3600).
TEST(SchedulerMeasuredGrowth, AShrinksGpusAreHeldForTheJobItWasMadeFor) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  one_queue_one_node(api, 4);
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      fast_resizing(cp, {"--retry-unschedulable", "600", "--pod-max-backoff", "30"}),
      dir.file("scheduler.log"));
  // big (minMember 2, 4 pods) scales from 1 to 2 pods: it starts with all 4 GPUs.
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "big"}}},
                       {"spec", {{"minMember", 2}}}});
  api.create(kPods, gpu_pod("big-0", "big", measured(1, 100)));
  api.create(kPods, gpu_pod("big-1", "big", measured(2, 198)));
  for (int i = 2; i < 4; ++i) api.create(kPods, gpu_pod(fmt::format("big-{}", i), "big"));
  ASSERT_EQ(wait_bound(api, "big", 4, 4), 4) << scheduler.log();
  std::vector<std::string> freed;  // the GPUs of the pods it will give back
  for (int i = 2; i < 4; ++i) {
    const json p = api.get(fmt::format("{}/big-{}", kPods, i));
    freed.push_back(p["metadata"]["annotations"].value("gpuorch.io/gpus", ""));
  }
  std::this_thread::sleep_for(2s);  // its resize interval (1 s) has passed
  // Then it measures 200 samples/s at 4 pods: its last 2 add 1 %. w (1 GPU) waits for one.
  api.patch(
      kPods + "/big-2",
      {{"metadata", {{"annotations", {{workload::kThroughputAnnotation, measured(4, 200)}}}}}});
  api.create(kPods, gpu_pod("w"));
  const json nominated = test::wait_for(api, kPods + "/w", [](const json& p) {
    return p.contains("status") && !p["status"].value("nominatedNodeName", "").empty();
  });
  EXPECT_EQ(nominated["status"]["nominatedNodeName"], "n1");
  EXPECT_TRUE(node_of(nominated).empty());
  for (int i = 2; i < 4; ++i) {
    test::wait_for(api, fmt::format("{}/big-{}", kPods, i),
                   [](const json& p) { return p["metadata"].contains("deletionTimestamp"); });
  }
  // other (2 GPUs), created after: nothing is placed on what the shrink frees meanwhile.
  json other = gpu_pod("other");
  other["spec"]["containers"][0]["resources"] = {
      {"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "2"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}};
  api.create(kPods, other);
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(node_of(api.get(kPods + "/w")).empty());
  EXPECT_TRUE(node_of(api.get(kPods + "/other")).empty());
  // The evicted pods go: w is bound on a GPU one of them held, at once; other still waits.
  const auto gone = std::chrono::steady_clock::now();
  for (int i = 2; i < 4; ++i) api.remove(fmt::format("{}/big-{}?gracePeriodSeconds=0", kPods, i));
  const json bound =
      test::wait_for(api, kPods + "/w", [](const json& p) { return !node_of(p).empty(); });
  EXPECT_LT(std::chrono::steady_clock::now() - gone, 5s) << scheduler.log();
  const std::string gpus = bound["metadata"]["annotations"].value("gpuorch.io/gpus", "");
  EXPECT_TRUE(gpus == freed[0] || gpus == freed[1]) << gpus;
  EXPECT_NE(events_about(api, "w").find("Preempting"), std::string::npos) << events_about(api, "w");
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(node_of(api.get(kPods + "/other")).empty()) << "1 GPU is free, it asks 2";
  EXPECT_EQ(count_bound(api, "big", 2), 2);
  if (HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

// The resize interval runs on the cluster's clock as the API shows it, not on the scheduler's
// own: from the gang's newest member's status.startTime (or its binding, before the kubelet
// starts it), so it holds across scheduler restarts and a time-compressed replay can move it
// (scripts/k8s-timeline-replay backdates the starts to their simulated times). A start time
// that moves is a change the waiting gang is decided again for. `late_members`: the gang starts
// with its minMember pods alone and the other two come after (what the first case may also see,
// when the scheduler decides before they are created).
void resize_clock_case(bool late_members) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  one_queue_one_node(api, 4);
  test::TempDir dir;
  // No periodic retry within the test: what lets the gang grow must be the start time moving.
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--queues", "--listen", "127.0.0.1:0", "--resize-interval",
       "300", "--retry-unschedulable", "600"},
      dir.file("scheduler.log"));
  for (const char* o : {"o-0", "o-1"}) {
    api.create(kPods, gpu_pod(o));
    test::wait_for(api, kPods + "/" + o, [](const json& p) { return !node_of(p).empty(); });
  }
  // g: minMember 2, 4 pods; it starts with the 2 GPUs free, and its kubelet starts them now.
  api.create(kGroups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                       {"kind", "PodGroup"},
                       {"metadata", {{"name", "g"}}},
                       {"spec", {{"minMember", 2}}}});
  for (int i = 0; i < (late_members ? 2 : 4); ++i) {
    api.create(kPods, gpu_pod(fmt::format("g-{}", i), "g"));
  }
  for (const char* g : {"g-0", "g-1"}) {
    test::wait_for(api, kPods + "/" + g, [](const json& p) { return !node_of(p).empty(); });
    started(api, g, 0s);
  }
  if (late_members) {
    for (int i = 2; i < 4; ++i) api.create(kPods, gpu_pod(fmt::format("g-{}", i), "g"));
  }
  // The other pods go: 2 GPUs free, but the gang started less than 300 s ago.
  for (const char* o : {"o-0", "o-1"}) api.remove(kPods + "/" + o + "?gracePeriodSeconds=0");
  const json held = test::wait_for(api, kPods + "/g-2", [](const json& p) {
    return test::unschedulable_message(p).find("grows at most once per resize interval (300 s)") !=
           std::string::npos;
  });
  const std::string why = test::unschedulable_message(held);
  const auto next = why.find("next in ");
  ASSERT_NE(next, std::string::npos) << why;
  EXPECT_GE(std::stoi(why.substr(next + 8)), 290) << why;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(count_bound(api, "g", 4), 2) << scheduler.log();
  // Its starts seen 302 s back (more than the interval's seconds: the API's times are whole
  // seconds), as a replay writes them: it grows to 4 at once, not at the next periodic retry.
  for (const char* g : {"g-0", "g-1"}) started(api, g, 302s);
  EXPECT_EQ(wait_bound(api, "g", 4, 4), 4) << scheduler.log();
  if (::testing::Test::HasFailure()) ADD_FAILURE() << "scheduler log:\n" << scheduler.log();
}

TEST(SchedulerResizeClock, TheIntervalRunsFromTheGangsNewestStart) { resize_clock_case(false); }

TEST(SchedulerResizeClock, AGangThatStartedAtMinMemberAndGotMorePodsToo) {
  resize_clock_case(true);
}

// The launcher's side: a worker appends a step report to $GPUORCH_THROUGHPUT_FILE and the
// launcher (outside any pod here, so with --kubeconfig and POD_NAME) patches the annotation; a
// pod that does not exist costs a logged failure, never the training.
TEST(SchedulerMeasuredGrowth, LaunchPublishesTheWorkersStepReportOnItsPod) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  api.create(kPods, gpu_pod("trainer"));
  test::TempDir dir;
  const std::vector<std::string> args = {
      "launch",
      "--kubeconfig",
      cp.kubeconfig(),
      "--standalone",
      "--nproc-per-node",
      "1",
      "--",
      "/bin/sh",
      "-c",
      "echo '{\"local_bsz\": 32, \"optim_step_time\": 0.25}' >> \"$GPUORCH_THROUGHPUT_FILE\"; "
      "sleep 0.3"};
  {
    const test::ScopedEnv pod("POD_NAME", "trainer");
    const test::ScopedEnv ns("POD_NAMESPACE", "default");
    const auto r = test::run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const json p = api.get(kPods + "/trainer");
  const std::string text = p["metadata"]["annotations"].value(workload::kThroughputAnnotation, "");
  std::string bad;
  const auto report = workload::parse_throughput_annotation(text, &bad);
  ASSERT_TRUE(report) << bad << ": " << p["metadata"].dump();
  EXPECT_EQ(report->world_size, 1);
  EXPECT_EQ(report->nodes, 1);
  EXPECT_EQ(report->local_batch, 32);
  EXPECT_DOUBLE_EQ(report->samples_per_second, 128);
  {
    const test::ScopedEnv pod("POD_NAME", "no-such-pod");
    const auto r = test::run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("throughput: publishing failed"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace gpuorch
