// Real nodes (scripts/k8s-testenv node add: upstream kubelet v1.37.2, Debian's containerd and
// runc, images made locally; docs/k8s-testenv.md, "Nodes"): a node joins and runs a container to
// Succeeded whose log reads back through the API server, and removing it leaves nothing on the
// machine; `gpuorch scheduler` places GPU pods on a node whose GPUs come from a recorded DGX H100
// (`gpuorch device-plugin --topology ... --no-nvml`), the kubelet admits them, and each
// container's NVIDIA_VISIBLE_DEVICES names exactly the GPUs the scheduler wrote on the pod.
//
// ctest label `real-node` (`ctest --preset asan -L real-node`); they skip, saying why, where the
// machine cannot run a node (not root, a package missing: `scripts/k8s-testenv node check`).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/net.hpp"
#include "support/paths.hpp"
#include "support/podgroup_crd.hpp"
#include "support/real_node_pods.hpp"
#include "support/recorded_host.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::busybox_pod;
using test::finished;
using test::kPods;
using test::phase;
using test::pod_log;
using test::seconds_since;
using test::training_pod;

// KEY=VALUE lines of a shell-sourceable env file written by the script (values unquoted here).
std::map<std::string, std::string> read_env(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// What a removed node left on the machine, checked here independently of the script: processes
// naming its folder, mounts under it, its cgroups in any hierarchy, its bridge.
std::vector<std::string> leftovers(const std::map<std::string, std::string>& node) {
  std::vector<std::string> found;
  const std::string dir = node.at("NODE_DIR");
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);) {
    if (line.find(dir) != std::string::npos) found.push_back("mount: " + line);
  }
  std::error_code ec;
  for (const auto& h : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    for (const std::string suffix : {"", ".daemons"}) {
      const auto cg = h.path() / (node.at("NODE_CGROUP") + suffix);
      if (std::filesystem::exists(cg, ec)) found.push_back("cgroup: " + cg.string());
    }
  }
  if (std::filesystem::exists("/sys/class/net/" + node.at("NODE_BRIDGE"), ec)) {
    found.push_back("bridge: " + node.at("NODE_BRIDGE"));
  }
  for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream cmdline(p.path() / "cmdline", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::replace(text.begin(), text.end(), '\0', ' ');
    if (text.find(dir + "/") != std::string::npos) found.push_back("process: " + text);
  }
  if (std::filesystem::exists(dir, ec)) found.push_back("folder: " + dir);
  return found;
}

TEST(RealNode, JoinsRunsAPodAndLeavesNothingWhenRemoved) {
  SKIP_WITHOUT_REAL_NODES();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  auto t0 = std::chrono::steady_clock::now();
  cp.add_node("node1");
  const double join_s = seconds_since(t0);
  const json node = api.get("/api/v1/nodes/node1");
  ASSERT_EQ(node["status"]["addresses"].size(), 1U) << node.dump();
  EXPECT_EQ(node["status"]["addresses"][0].value("address", ""), "127.0.0.1");
  EXPECT_EQ(node["status"]["nodeInfo"].value("kubeletVersion", ""), "v1.37.2");
  EXPECT_NE(node["status"]["nodeInfo"].value("containerRuntimeVersion", "").find("containerd"),
            std::string::npos);

  t0 = std::chrono::steady_clock::now();
  json pod = busybox_pod("hello", "echo hello from $(hostname); cat /proc/self/cgroup | grep pids");
  pod["spec"]["nodeName"] = "node1";
  api.create(kPods, pod);
  pod = test::wait_for(api, kPods + "/hello", finished, 60s);
  const double pod_s = seconds_since(t0);
  ASSERT_EQ(phase(pod), "Succeeded") << pod.dump();
  const std::string log = pod_log(api, "hello");
  EXPECT_NE(log.find("hello from hello"), std::string::npos) << log;
  const auto env = read_env(cp.dir() + "/nodes/node1.env");
  ASSERT_TRUE(env.count("NODE_CGROUP")) << "no " << cp.dir() << "/nodes/node1.env";
  // The container ran under the node's own cgroup root.
  EXPECT_NE(log.find(env.at("NODE_CGROUP") + "/kubepods"), std::string::npos) << log;
  ASSERT_TRUE(std::filesystem::exists("/sys/class/net/" + env.at("NODE_BRIDGE")));

  // A pod still running when the node goes: its processes, mounts and network go too.
  json sleeper = busybox_pod("sleeper", "sleep 300");
  sleeper["spec"]["nodeName"] = "node1";
  api.create(kPods, sleeper);
  test::wait_for(
      api, kPods + "/sleeper", [](const json& p) { return phase(p) == "Running"; }, 60s);
  t0 = std::chrono::steady_clock::now();
  cp.remove_node("node1");
  const double remove_s = seconds_since(t0);
  const auto left = leftovers(env);
  EXPECT_TRUE(left.empty()) << fmt::format("{}", fmt::join(left, "\n"));
  EXPECT_EQ(api.request("GET", "/api/v1/nodes/node1", nullptr, "").status, 404);
  std::printf("real node: join %.1f s, pod created to Succeeded %.1f s, remove %.1f s\n", join_s,
              pod_s, remove_s);
}

std::set<std::string> split(const std::string& text, char sep) {
  std::set<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.insert(item);
  }
  return out;
}

// The UUIDs of the GPUs gpuorch's scheduler wrote on the pod (gpuorch.io/gpus: indices).
std::set<std::string> chosen_uuids(const json& pod, const std::vector<std::string>& uuids) {
  std::set<std::string> out;
  const json& annotations = pod["metadata"]["annotations"];
  if (!annotations.is_object()) return out;
  for (const auto& index : split(annotations.value("gpuorch.io/gpus", ""), ',')) {
    out.insert(uuids.at(std::stoul(index)));
  }
  return out;
}

// NVIDIA_VISIBLE_DEVICES as the container printed it (a line NVIDIA_VISIBLE_DEVICES=...).
std::set<std::string> visible_devices(const std::string& log) {
  const std::string marker = "NVIDIA_VISIBLE_DEVICES=";
  const auto at = log.find(marker);
  if (at == std::string::npos) return {};
  const auto begin = at + marker.size();
  return split(log.substr(begin, log.find('\n', begin) - begin), ',');
}

TEST(RealNode, GpuorchPlacesGpuPodsThatTheKubeletRunsOnTheChosenGpus) {
  SKIP_WITHOUT_REAL_NODES();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/dgx-h100/expected/topo.json";
  const auto uuids = test::recorded_uuids(topo);
  ASSERT_EQ(uuids.size(), 8U);
  auto t0 = std::chrono::steady_clock::now();
  cp.add_node("dgx1", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  const double join_s = seconds_since(t0);
  const json node = api.get("/api/v1/nodes/dgx1");
  EXPECT_EQ(node["status"]["allocatable"].value("nvidia.com/gpu", ""), "8") << node.dump();
  EXPECT_EQ(node["metadata"]["labels"].value("nvidia.com/gpu.product", ""),
            "NVIDIA-H100-80GB-HBM3");

  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--policy", "efd", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  // Pods of different sizes created at once (2 + 4 + 1 GPUs), then a pod with a required node
  // affinity on the recording's GPU model label: each gets exactly the GPUs the scheduler wrote,
  // no GPU twice, and the kubelet admits all. (Two pending pods of the same size at once are not
  // here: the kubelet's Allocate does not say which pod it is for, and the plugin can hand each
  // the other's GPUs; see "Found by these tests".)
  using Wave = std::vector<std::pair<std::string, int>>;
  auto run_wave = [&](const Wave& wave) {
    for (const auto& [name, gpus] : wave) {
      json pod = busybox_pod(name, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; sleep 2");
      pod["spec"]["schedulerName"] = "gpuorch";
      pod["spec"]["containers"][0]["resources"] = {
          {"requests",
           {{"cpu", "100m"}, {"memory", "32Mi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
          {"limits",
           {{"cpu", "100m"}, {"memory", "32Mi"}, {"nvidia.com/gpu", std::to_string(gpus)}}}};
      if (name == "affine") {
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
           ["nodeSelectorTerms"] = json::array(
               {{{"matchExpressions", json::array({{{"key", "nvidia.com/gpu.product"},
                                                    {"operator", "In"},
                                                    {"values", {"NVIDIA-H100-80GB-HBM3"}}}})}}});
      }
      api.create(kPods, pod);
    }
    std::set<std::string> all_given;
    for (const auto& [name, gpus] : wave) {
      const json pod = test::wait_for(api, kPods + "/" + name, finished, 90s);
      ASSERT_EQ(phase(pod), "Succeeded") << pod.dump() << "\n" << scheduler.log();
      EXPECT_EQ(test::node_of(pod), "dgx1");
      const std::set<std::string> expected = chosen_uuids(pod, uuids);
      EXPECT_EQ(expected.size(), static_cast<std::size_t>(gpus)) << name << ": " << pod.dump();
      const std::string log = pod_log(api, name);
      EXPECT_EQ(visible_devices(log), expected) << name << ": " << log << "\n" << pod.dump();
      for (const auto& u : expected) {
        EXPECT_TRUE(all_given.insert(u).second) << u << " given to two pods";
      }
      EXPECT_FALSE(pod["metadata"]["annotations"].value("gpuorch.io/gpus-allocated", "").empty())
          << "the device plugin did not follow the scheduler's choice: " << pod.dump();
    }
  };
  t0 = std::chrono::steady_clock::now();
  run_wave({{"two", 2}, {"four", 4}, {"one", 1}});
  run_wave({{"affine", 1}});
  const double pods_s = seconds_since(t0);
  // The kubelet refused no admission (UnexpectedAdmissionError and the like are Failed pods
  // with an event).
  const json events = api.get("/api/v1/namespaces/default/events");
  for (const auto& e : events["items"]) {
    EXPECT_EQ(e.value("reason", "").find("Admission"), std::string::npos) << e.dump();
  }
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  std::printf("real GPU node: join with device plugin %.1f s, 4 pods created to Succeeded %.1f s\n",
              join_s, pods_s);
}

// A kubelet restart on a GPU node: the device plugin registers again, the allocations of running
// pods survive (their GPUs are not handed out again), and a pod that would over-commit the GPUs
// through nodeName is refused by the restarted kubelet (its accounting came back from its
// checkpoint).
TEST(RealNode, KubeletRestartKeepsAllocationsAndThePluginRegistersAgain) {
  SKIP_WITHOUT_REAL_NODES();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/dgx-h100/expected/topo.json";
  const auto uuids = test::recorded_uuids(topo);
  cp.add_node("dgx2", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--policy", "efd", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  auto gpu_pod = [](const std::string& name, int gpus) {
    json pod = busybox_pod(name, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; sleep 300");
    pod["spec"]["containers"][0]["resources"] = {
        {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}};
    // Its own node (tests run in one process share one control plane and its nodes).
    pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "dgx2"}};
    return pod;
  };
  auto running = [](const json& p) { return phase(p) == "Running"; };
  json before = gpu_pod("before", 4);
  before["spec"]["schedulerName"] = "gpuorch";
  api.create(kPods, before);
  before = test::wait_for(api, kPods + "/before", running, 60s);
  ASSERT_EQ(phase(before), "Running") << before.dump() << scheduler.log();

  const auto t0 = std::chrono::steady_clock::now();
  cp.restart_kubelet("dgx2");
  const double restart_s = seconds_since(t0);

  json after = gpu_pod("after", 4);
  after["spec"]["schedulerName"] = "gpuorch";
  api.create(kPods, after);
  after = test::wait_for(api, kPods + "/after", running, 60s);
  ASSERT_EQ(phase(after), "Running") << after.dump() << scheduler.log();
  // The pod started before the restart still runs, on the same GPUs.
  before = api.get(kPods + "/before");
  EXPECT_EQ(phase(before), "Running") << before.dump();
  const auto gpus_before = visible_devices(pod_log(api, "before"));
  const auto gpus_after = visible_devices(pod_log(api, "after"));
  EXPECT_EQ(gpus_before, chosen_uuids(before, uuids));
  EXPECT_EQ(gpus_after, chosen_uuids(after, uuids));
  ASSERT_EQ(gpus_before.size(), 4U);
  ASSERT_EQ(gpus_after.size(), 4U);
  for (const auto& u : gpus_after) EXPECT_EQ(gpus_before.count(u), 0U) << u << " given twice";

  // All 8 GPUs are taken: one more, bound by hand, is refused by the kubelet.
  json extra = gpu_pod("extra", 1);
  extra["spec"]["nodeName"] = "dgx2";
  api.create(kPods, extra);
  extra = test::wait_for(api, kPods + "/extra", finished, 60s);
  EXPECT_EQ(phase(extra), "Failed") << extra.dump();
  EXPECT_EQ(extra["status"].value("reason", ""), "UnexpectedAdmissionError") << extra.dump();
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  std::printf("real GPU node: kubelet restarted and the plugin registered again in %.1f s\n",
              restart_s);
}

TEST(RealNode, TrainsADdpJobAcrossTwoNodes) {
  SKIP_WITHOUT_REAL_NODES_OR_TORCH();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/t4x2/expected/topo.json";
  const auto uuids = test::recorded_uuids(topo);
  auto t0 = std::chrono::steady_clock::now();
  cp.add_node("t4-a", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  cp.add_node("t4-b", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  const double join_s = seconds_since(t0);
  const std::string groups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
  test::install_podgroup_crd(api, groups);
  api.create(groups, {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                      {"kind", "PodGroup"},
                      {"metadata", {{"name", "ddp"}}},
                      {"spec", {{"minMember", 2}, {"scheduleTimeoutSeconds", 120}}}});
  test::TempDir dir;
  test::SchedulerProcess scheduler(
      {"--kubeconfig", cp.kubeconfig(), "--policy", "efd", "--listen", "127.0.0.1:0"},
      dir.file("scheduler.log"));
  const int port = test::free_loopback_port();
  t0 = std::chrono::steady_clock::now();
  api.create(kPods, training_pod("train-0", "t4-a", 0, port));
  api.create(kPods, training_pod("train-1", "t4-b", 1, port));
  for (const std::string name : {"train-0", "train-1"}) {
    const json pod = test::wait_for(api, kPods + "/" + name, finished, 180s);
    const std::string log = pod_log(api, name);
    ASSERT_EQ(phase(pod), "Succeeded") << pod.dump() << "\n" << log << "\n" << scheduler.log();
    EXPECT_EQ(test::node_of(pod), name == "train-0" ? "t4-a" : "t4-b");
    const auto given = chosen_uuids(pod, uuids);
    EXPECT_EQ(given.size(), 1U) << pod.dump();
    EXPECT_EQ(visible_devices(log), given) << log;
    EXPECT_NE(log.find("result         succeeded"), std::string::npos) << log;
    EXPECT_NE(log.find("2 in all, 1 on this node"), std::string::npos) << log;
    if (name == "train-0") {
      EXPECT_NE(log.find("done: 2 ranks hold identical weights"), std::string::npos) << log;
    }
    std::printf("--- %s on %s, gpuorch.io/gpus %s ---\n%s", name.c_str(),
                test::node_of(pod).c_str(),
                pod["metadata"]["annotations"].value("gpuorch.io/gpus", "").c_str(), log.c_str());
  }
  const double train_s = seconds_since(t0);
  EXPECT_NE(scheduler.log().find("gang default/ddp: 2 members placed"), std::string::npos)
      << scheduler.log();
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  std::printf(
      "real nodes: 2 GPU nodes joined in %.1f s, 2-pod DDP job created to Succeeded %.1f s\n",
      join_s, train_s);
}

// A node removed mid-job: the pod on it dies with it, and the job fails cleanly on the node that
// is left (its rank loses its peer, the launcher stops the worker and exits non-zero: the pod is
// Failed, not hanging); nothing of the removed node stays on the machine.
TEST(RealNode, ANodeRemovedMidJobFailsTheJobCleanly) {
  SKIP_WITHOUT_REAL_NODES_OR_TORCH();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/t4x2/expected/topo.json";
  cp.add_node("t4-c", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  cp.add_node("t4-d", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  const int port = test::free_loopback_port();
  // Bound by hand (no scheduler needed for this one); slow steps, so the job is mid-run.
  const std::vector<std::string> slow{"--steps", "600", "--step-sleep", "0.1"};
  json a = training_pod("long-0", "t4-c", 0, port, slow);
  json b = training_pod("long-1", "t4-d", 1, port, slow);
  for (json* p : {&a, &b}) {
    (*p)["spec"].erase("schedulerName");
    (*p)["spec"]["nodeName"] = (*p)["spec"]["nodeSelector"]["kubernetes.io/hostname"];
    (*p)["spec"].erase("nodeSelector");
    (*p)["metadata"]["labels"].erase("scheduling.x-k8s.io/pod-group");
    api.create(kPods, *p);
  }
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (pod_log(api, "long-0").find("step 5 loss") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_NE(pod_log(api, "long-0").find("step 5 loss"), std::string::npos)
      << pod_log(api, "long-0") << pod_log(api, "long-1");
  const auto t0 = std::chrono::steady_clock::now();
  cp.remove_node("t4-d");
  const json left = test::wait_for(api, kPods + "/long-0", finished, 120s);
  const double fail_s = seconds_since(t0);
  const std::string log = pod_log(api, "long-0");
  EXPECT_EQ(phase(left), "Failed") << left.dump() << "\n" << log;
  EXPECT_NE(log.find("result         failed"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 599 loss"), std::string::npos) << log;
  std::printf("real nodes: node removed mid-job; the pod left was Failed %.1f s later\n%s", fail_s,
              log.substr(log.size() > 1500 ? log.size() - 1500 : 0).c_str());
}

// The same, elastic (`--nnodes 1:2`, restarts allowed, checkpoints in the pod): the node that is
// left drops the silent one (15 s without a heartbeat), re-forms the rendezvous alone, resumes
// from its checkpoint and finishes: its pod Succeeds with world size 1.
TEST(RealNode, AnElasticJobFinishesOnTheNodeLeftWhenOneIsRemoved) {
  SKIP_WITHOUT_REAL_NODES_OR_TORCH();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/t4x2/expected/topo.json";
  cp.add_node("t4-e", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  cp.add_node("t4-f", {"--gpus-from", topo, "--gpuorch", test::binary_path()});
  const int port = test::free_loopback_port();
  auto elastic = [port](const std::string& name, const std::string& node, int rank) {
    json p = training_pod(name, node, rank, port,
                          {"--steps", "60", "--step-sleep", "0.1", "--ckpt-dir", "/ckpt"});
    auto& command = p["spec"]["containers"][0]["command"];
    json edited = json::array();
    for (std::size_t i = 0; i < command.size(); ++i) {
      if (command[i] == "--nnodes") {
        edited.push_back("--nnodes");
        edited.push_back("1:2");
        edited.push_back("--max-restarts");
        edited.push_back("3");
        edited.push_back("--rdzv-conf");
        edited.push_back("last_call_timeout=2");
        ++i;  // the old count
        continue;
      }
      edited.push_back(command[i]);
    }
    command = edited;
    p["spec"]["containers"][0]["volumeMounts"].push_back(
        {{"name", "ckpt"}, {"mountPath", "/ckpt"}});
    p["spec"]["volumes"].push_back({{"name", "ckpt"}, {"emptyDir", json::object()}});
    p["spec"].erase("schedulerName");
    p["spec"].erase("nodeSelector");
    p["spec"]["nodeName"] = node;
    p["metadata"]["labels"].erase("scheduling.x-k8s.io/pod-group");
    return p;
  };
  // long-0 first: its agent serves the rendezvous store, so the store outlives long-1's node.
  api.create(kPods, elastic("elastic-0", "t4-e", 0));
  auto wait_log = [&api](const std::string& pod, const std::string& text, std::chrono::seconds t) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    while (pod_log(api, pod).find(text) == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(200ms);
    }
    return pod_log(api, pod).find(text) != std::string::npos;
  };
  ASSERT_TRUE(wait_log("elastic-0", "(served here)", 60s)) << pod_log(api, "elastic-0");
  api.create(kPods, elastic("elastic-1", "t4-f", 1));
  ASSERT_TRUE(wait_log("elastic-0", "step 5 loss", 90s)) << pod_log(api, "elastic-0");
  ASSERT_NE(pod_log(api, "elastic-0").find("world 2"), std::string::npos)
      << pod_log(api, "elastic-0");
  const auto t0 = std::chrono::steady_clock::now();
  cp.remove_node("t4-f");
  const json left = test::wait_for(api, kPods + "/elastic-0", finished, 120s);
  const double finish_s = seconds_since(t0);
  const std::string log = pod_log(api, "elastic-0");
  EXPECT_EQ(phase(left), "Succeeded") << left.dump() << "\n" << log;
  EXPECT_NE(log.find("start: world 1"), std::string::npos) << log;
  EXPECT_NE(log.find("result         succeeded"), std::string::npos) << log;
  std::printf("real nodes: node removed mid-job; the elastic job finished alone %.1f s later\n%s",
              finish_s, log.substr(log.size() > 2500 ? log.size() - 2500 : 0).c_str());
}

// Bad input to `scripts/k8s-testenv node`, start --nodes, kubelet-build and containerd-build: one
// line, exit 2, nothing made (no root needed: checked before anything runs).
TEST(K8sTestenvNodeUsage, BadInputIsOneLineAndExitTwo) {
  test::TempDir dir;
  const std::string script = std::string(test::source_dir()) + "/scripts/k8s-testenv";
  const std::string topo = std::string(test::fixtures_dir()) + "/topo/t4x2/expected/topo.json";
  const std::vector<std::vector<std::string>> cases{
      {"node"},
      {"node", "frob"},
      {"node", "add"},
      {"node", "add", dir.path().string(), "n1"},  // no control plane there
      {"node", "add", dir.path().string(), "Bad_Name"},
      {"node", "add", dir.path().string(), "n1", "--labels", "no-equals-sign"},
      {"node", "add", dir.path().string(), "n1", "--gpus-from", dir.file("missing.json")},
      {"node", "add", dir.path().string(), "n1", "--gpus-from"},
      {"node", "add", dir.path().string(), "n1", "--frob"},
      {"node", "remove", dir.path().string(), "n1", "--gpus-from", topo},
      {"node", "add", dir.path().string(), "n1", "--containerd", "3"},
      {"node", "remove", dir.path().string(), "n1", "--containerd", "2"},
      {"node", "check", "extra"},
      {"start", "--nodes", "many", dir.file("cp")},
      {"start", "--nodes", "99", dir.file("cp")},
      {"run", "--nodes"},
      {"kubelet-build", "extra"},
      {"containerd-build", "extra"},
  };
  for (const auto& args : cases) {
    std::vector<std::string> argv{script};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = test::run_command(argv, dir);
    const std::string what = fmt::format("{}", fmt::join(args, " "));
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_EQ(test::lines_of(r.err).size(), 1U) << what << ": " << r.err;
    EXPECT_EQ(r.err.rfind("k8s-testenv: ", 0), 0U) << what << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("logs")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("cp")));
}

}  // namespace
}  // namespace gpuorch
