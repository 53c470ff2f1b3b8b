// The deployment on real nodes (docs/k8s-testenv.md, "Controllers" and "The deployment test"):
// the image of scripts/build-image imported into two real nodes, `gpuorch manifests` applied as
// it writes them, and kube-controller-manager turning its DaemonSets and Deployment into pods;
// the node labeller, the device plugin and the exporter run on both nodes with their probes
// passing, the labeller's labels and the plugin's nvidia.com/gpu appear on the Nodes, and the
// scheduler Deployment's two replicas, one per node, share one Lease. A pod with
// `schedulerName: gpuorch` runs on the GPU the scheduler chose. Then three faults, a pod created
// at each: the leader's process SIGKILLed (it cannot give the Lease up: a live replica takes it
// when it expires), the leader's node removed (the standby on the other node takes the Lease),
// the leader's pod deleted (it gives the Lease up; the ReplicaSet's replacement takes it). Every
// pod runs, and none is bound by two scheduler processes.
//
// The nodes have no GPUs: the three GPU agents read a recorded host (tests/fixtures/topo/t4x2,
// two T4s) through their own --sysfs-root, the one change made to the DaemonSets as written.
// Label real-node; skips where real nodes cannot run, or no image builder is installed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/apply_support.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/paths.hpp"
#include "support/recorded_host.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kNs = "gpuorch";
const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kAgentPods = "/api/v1/namespaces/gpuorch/pods";
const std::string kLease =
    "/apis/coordination.k8s.io/v1/namespaces/gpuorch/leases/gpuorch-scheduler";
const std::string kRecordedHost = "/recorded-host";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string phase(const json& pod) { return pod["status"].value("phase", ""); }
bool finished(const json& pod) { return phase(pod) == "Succeeded" || phase(pod) == "Failed"; }

bool running_and_ready(const json& pod) {
  if (phase(pod) != "Running" || pod["metadata"].contains("deletionTimestamp")) return false;
  const json& statuses = pod["status"].value("containerStatuses", json::array());
  if (statuses.empty()) return false;
  for (const auto& c : statuses) {
    if (!c.value("ready", false)) return false;
  }
  return true;
}

std::string name_of(const json& obj) { return obj["metadata"].value("name", ""); }

// The first container's status field (restartCount, containerID, ...); `fallback` before the
// kubelet reported one.
template <typename T>
T container_status(const json& pod, const char* field, T fallback) {
  const json statuses = pod["status"].value("containerStatuses", json::array());
  return statuses.empty() ? fallback : statuses[0].value(field, fallback);
}

// The Lease's holder as written (HOSTNAME_RANDOM: one process of one replica).
std::string lease_identity(k8s::ApiClient& api) {
  const auto r = api.request("GET", kLease, nullptr, "");
  return r.status == 200 ? json::parse(r.body)["spec"].value("holderIdentity", "") : "";
}

// The Lease's holder, as the pod name.
std::string lease_holder(k8s::ApiClient& api) {
  const std::string holder = lease_identity(api);
  return holder.substr(0, holder.rfind('_'));
}

// Polls until pred() holds; on timeout a failure naming `what` and the last state `describe`
// gives. Returns whether it held.
bool wait_until(const std::function<bool()>& pred, std::chrono::seconds timeout,
                const std::string& what, const std::function<std::string()>& describe) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(200ms);
  }
  ADD_FAILURE() << "waited " << timeout.count() << " s for " << what << "; last: " << describe();
  return false;
}

// One line per pod of the deployment: name, node, phase, readiness, restarts, waiting reason.
std::string describe_agents(k8s::ApiClient& api) {
  std::string out;
  const json pods = api.get(kAgentPods);  // the loop must not run over a temporary's member
  for (const auto& p : pods["items"]) {
    out += fmt::format("\n  {} on {}: {}", name_of(p), p["spec"].value("nodeName", "-"), phase(p));
    for (const auto& c : p["status"].value("containerStatuses", json::array())) {
      out +=
          fmt::format(" ready={} restarts={}", c.value("ready", false), c.value("restartCount", 0));
      if (c["state"].contains("waiting")) {
        out += fmt::format(" waiting: {} {}", c["state"]["waiting"].value("reason", ""),
                           c["state"]["waiting"].value("message", ""));
      }
    }
  }
  return out;
}

std::vector<json> scheduler_pods(k8s::ApiClient& api) {
  std::vector<json> out;
  const json pods = api.get(kAgentPods);  // the loop must not run over a temporary's member
  for (const auto& p : pods["items"]) {
    if (name_of(p).rfind("gpuorch-scheduler-", 0) == 0) out.push_back(p);
  }
  return out;
}

std::string pod_log(k8s::ApiClient& api, const std::string& pods, const std::string& name,
                    bool previous = false) {
  const auto r = api.request(
      "GET", fmt::format("{}/{}/log{}", pods, name, previous ? "?previous=true" : ""), nullptr, "");
  return r.status == 200 ? r.body : "";
}

// A 1-GPU busybox pod for gpuorch's scheduler that prints what its container was given.
json gpu_pod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"schedulerName", "gpuorch"},
            {"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", 1},
            {"containers",
             json::array(
                 {{{"name", "c"},
                   {"image", "docker.io/library/busybox:local"},
                   {"imagePullPolicy", "Never"},
                   {"command", {"sh", "-c", "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"}},
                   {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}};
}

// The pod ran to Succeeded on the GPU gpuorch's scheduler chose: its container's
// NVIDIA_VISIBLE_DEVICES is the UUID of the GPU in gpuorch.io/gpus, and the device plugin marked
// the pod (Allocate followed the scheduler).
void expect_ran_on_chosen_gpu(k8s::ApiClient& api, const std::string& name,
                              const std::vector<std::string>& uuids) {
  const json pod = test::wait_for(api, kPods + "/" + name, finished, 90s);
  ASSERT_EQ(phase(pod), "Succeeded") << pod.dump();
  const json& annotations = pod["metadata"].value("annotations", json::object());
  const std::string gpus = annotations.value("gpuorch.io/gpus", "");
  ASSERT_FALSE(gpus.empty()) << name << " carries no gpuorch.io/gpus: " << pod.dump();
  const std::string want = "NVIDIA_VISIBLE_DEVICES=" + uuids.at(std::stoul(gpus));
  const std::string log = pod_log(api, kPods, name);
  EXPECT_NE(log.find(want), std::string::npos) << name << " got: " << log << " want " << want;
  EXPECT_FALSE(annotations.value("gpuorch.io/gpus-allocated", "").empty())
      << name << ": the device plugin did not mark the pod it allocated for";
}

TEST(RealNodeDeploy, ManifestsComeUpAndTheStandbyTakesOverFromAKilledLeader) {
  const std::string why = test::ControlPlane::real_nodes_unavailable();
  if (!why.empty()) GTEST_SKIP() << "real nodes cannot run on this machine: " << why;
  if (std::system("command -v buildah >/dev/null 2>&1 || command -v umoci >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "scripts/build-image needs buildah or umoci (scripts/setup installs buildah)";
  }
  const auto t_start = std::chrono::steady_clock::now();
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  cp.start_controller_manager();
  cp.start_kube_scheduler();  // the deployment's own pods have no schedulerName
  cp.add_node("node1");
  cp.add_node("node2");
  const double cluster_s = seconds_since(t_start);

  // The image, as a user builds it, imported into both nodes as a registry pull would leave it.
  auto t0 = std::chrono::steady_clock::now();
  test::TempDir tmp;
  const auto built =
      test::run_command({std::string(test::source_dir()) + "/scripts/build-image", "--binary",
                         test::binary_path(), "--out", tmp.file("image")},
                        tmp, "build-image");
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  // "build-image: ghcr.io/gpuorch/gpuorch:0.1.0 (buildah, 69 MiB) in oci:DIR:0.1.0"
  const auto at = built.out.find("build-image: ");
  ASSERT_NE(at, std::string::npos) << built.out;
  const std::string image = built.out.substr(at + 13, built.out.find(' ', at + 13) - (at + 13));
  ASSERT_NE(image.rfind(':'), std::string::npos) << image;
  cp.import_image(tmp.file("image") + "/oci", image.substr(0, image.rfind(':')));
  const double image_s = seconds_since(t0);

  // `gpuorch manifests`, as written, but for the GPU agents' view of a recorded host.
  std::vector<std::string> args = {"manifests", "--json", "--image", image};
  // An instrumented build's processes need far more memory than the components' default limits
  // (64-256 MiB; ASan's shadow and the 230 MB binary's pages): raised as a user would, with
  // --limits. A release build runs with the defaults.
  if (test::kSanitized) {
    for (const char* c : {"device-plugin", "node-labeller", "exporter", "scheduler"}) {
      args.insert(args.end(), {"--limits", fmt::format("{}:memory=1Gi", c)});
    }
  }
  const auto manifests = test::run_cli(args, tmp, "manifests");
  ASSERT_EQ(manifests.exit_code, 0) << manifests.err;
  const std::string recording = std::string(test::fixtures_dir()) + "/topo/t4x2";
  const auto uuids = test::recorded_uuids(recording + "/expected/topo.json");
  t0 = std::chrono::steady_clock::now();
  int objects = 0;
  for (json obj : json::parse(manifests.out)) {
    if (obj["kind"] == "DaemonSet") {
      json& spec = obj["spec"]["template"]["spec"];
      json& c = spec["containers"][0];
      const std::string verb = c["args"][0];
      if (verb == "node-labeller" || verb == "device-plugin" || verb == "exporter") {
        c["args"].insert(c["args"].end(), {"--sysfs-root", kRecordedHost});
        c["volumeMounts"].push_back(
            {{"name", "recorded-host"}, {"mountPath", kRecordedHost}, {"readOnly", true}});
        spec["volumes"].push_back({{"name", "recorded-host"},
                                   {"hostPath", {{"path", recording}, {"type", "Directory"}}}});
      }
    }
    SCOPED_TRACE(obj["kind"].get<std::string>() + " " + name_of(obj));
    ASSERT_NO_THROW(
        k8s::test_apply::create_or_replace(api, k8s::test_apply::resource_of(api, obj), obj));
    ++objects;
  }

  // The DaemonSets: a Ready pod on each node (the exporter's readiness probe), the Deployment:
  // two Ready replicas (liveness and readiness probes over the pod network).
  for (const char* ds :
       {"gpuorch-node-labeller", "gpuorch-device-plugin-nvidia", "gpuorch-exporter"}) {
    const std::string path = fmt::format("/apis/apps/v1/namespaces/{}/daemonsets/{}", kNs, ds);
    wait_until(
        [&] {
          const json s = api.get(path)["status"];
          return s.value("desiredNumberScheduled", 0) == 2 && s.value("numberReady", 0) == 2 &&
                 s.value("updatedNumberScheduled", 0) == 2;
        },
        180s, fmt::format("DaemonSet {}: 2 pods Ready", ds),
        [&] { return api.get(path)["status"].dump() + describe_agents(api); });
  }
  const std::string deployment = "/apis/apps/v1/namespaces/gpuorch/deployments/gpuorch-scheduler";
  const auto two_ready = [&] {
    const json s = api.get(deployment)["status"];
    return s.value("readyReplicas", 0) == 2 && s.value("replicas", 0) == 2;
  };
  const auto describe_deployment = [&] {
    return api.get(deployment)["status"].dump() + describe_agents(api);
  };
  wait_until(two_ready, 180s, "Deployment gpuorch-scheduler: 2 replicas Ready",
             describe_deployment);
  const double up_s = seconds_since(t0);
  std::map<std::string, std::set<std::string>> nodes_of;  // DaemonSet -> nodes of its pods
  const json pods = api.get(kAgentPods);  // the loop must not run over a temporary's member
  for (const auto& p : pods["items"]) {
    EXPECT_TRUE(running_and_ready(p)) << describe_agents(api);
    const std::string name = name_of(p);
    nodes_of[name.substr(0, name.rfind('-'))].insert(p["spec"].value("nodeName", ""));
  }
  for (const char* ds :
       {"gpuorch-node-labeller", "gpuorch-device-plugin-nvidia", "gpuorch-exporter"}) {
    EXPECT_EQ(nodes_of[ds], (std::set<std::string>{"node1", "node2"})) << ds;
  }

  // The labeller's labels and the plugin's GPUs on both Nodes.
  for (const char* node : {"node1", "node2"}) {
    const json n = test::wait_for(
        api, std::string("/api/v1/nodes/") + node,
        [](const json& o) { return o["status"]["allocatable"].value("nvidia.com/gpu", "") == "2"; },
        60s);
    const json& labels = n["metadata"]["labels"];
    EXPECT_EQ(labels.value("gpuorch.io/gpu.vendor", ""), "nvidia") << node;
    EXPECT_EQ(labels.value("nvidia.com/gpu.product", ""), "Tesla-T4") << node;
    EXPECT_EQ(labels.value("nvidia.com/gpu.count", ""), "2") << node;
    EXPECT_EQ(labels.value("gpuorch.io/gpu.model", ""), "T4") << node;
  }

  // One leader and one standby, on different nodes (the Deployment's pod anti-affinity).
  std::vector<std::string> replicas;
  for (const auto& p : scheduler_pods(api)) replicas.push_back(name_of(p));
  ASSERT_EQ(replicas.size(), 2U) << describe_agents(api);
  std::string leader;
  wait_until([&] { return !(leader = lease_holder(api)).empty(); }, 60s,
             "the scheduler Lease to be held", [] { return std::string("no holder"); });
  ASSERT_TRUE(leader == replicas[0] || leader == replicas[1]) << leader;
  const std::string standby = leader == replicas[0] ? replicas[1] : replicas[0];
  EXPECT_NE(pod_log(api, kAgentPods, standby).find("standing by"), std::string::npos)
      << pod_log(api, kAgentPods, standby);
  const auto node_of = [&](const std::string& pod) {
    return api.get(kAgentPods + "/" + pod)["spec"].value("nodeName", "");
  };
  ASSERT_NE(node_of(leader), node_of(standby)) << describe_agents(api);

  t0 = std::chrono::steady_clock::now();
  api.create(kPods, gpu_pod("first"));
  expect_ran_on_chosen_gpu(api, "first", uuids);
  const double first_s = seconds_since(t0);

  // Every scheduler container's log, by pod and restart, kept once read: a container that is
  // gone (its pod deleted, its node removed) keeps what was read before.
  std::map<std::string, std::string> logs;
  const auto collect_logs = [&] {
    for (const auto& p : scheduler_pods(api)) {
      const int restarts = container_status(p, "restartCount", 0);
      for (int previous = 0; previous <= (restarts > 0 ? 1 : 0); ++previous) {
        const std::string text = pod_log(api, kAgentPods, name_of(p), previous == 1);
        if (!text.empty()) logs[fmt::format("{}/{}", name_of(p), restarts - previous)] = text;
      }
    }
  };
  const auto describe_lease = [&] {
    return "holder " + lease_identity(api) + describe_agents(api);
  };
  collect_logs();

  // 1. The leader's process killed (SIGKILL through its node's containerd, as in a crash): it
  // cannot give the Lease up. When the Lease expires (15 s), a live replica takes it: the
  // standby, or the killed replica's container that its kubelet restarted, whichever sees the
  // expiry first (as with client-go's leader election); never the killed process.
  const std::string killed = lease_identity(api);
  const json leader_pod = api.get(kAgentPods + "/" + leader);
  const std::string container = container_status(leader_pod, "containerID", std::string());
  ASSERT_EQ(container.rfind("containerd://", 0), 0U) << leader_pod.dump();
  const std::string socket = cp.dir() + "/nodes/" + node_of(leader) + "/containerd/containerd.sock";
  t0 = std::chrono::steady_clock::now();
  const auto kill = test::run_command({"ctr", "--address", socket, "-n", "k8s.io", "task", "kill",
                                       "--signal", "SIGKILL", container.substr(13)},
                                      tmp, "kill");
  ASSERT_EQ(kill.exit_code, 0) << kill.out << kill.err;
  api.create(kPods, gpu_pod("during"));
  wait_until(
      [&] {
        const std::string now = lease_identity(api);
        return !now.empty() && now != killed;
      },
      60s, "a live replica to take the Lease from the killed " + killed, describe_lease);
  const double kill_s = seconds_since(t0);
  const std::string after_kill =
      lease_holder(api) == leader ? "its restarted container" : "the standby";
  expect_ran_on_chosen_gpu(api, "during", uuids);
  wait_until(two_ready, 120s, "the killed replica's container to come back Ready",
             describe_deployment);
  EXPECT_GE(container_status(api.get(kAgentPods + "/" + leader), "restartCount", 0), 1);
  collect_logs();

  // 2. The leader's node lost (`node remove`: every process of the node SIGKILLed, the Node
  // deleted). The replica on the other node is the only one alive and takes the Lease when it
  // expires; the lost node's pod stays in the API (no node lifecycle controller or pod GC
  // here), so the ReplicaSet makes no third replica to race it.
  const std::string lost_leader = lease_holder(api);
  const std::string survivor = lost_leader == replicas[0] ? replicas[1] : replicas[0];
  const std::string lost_node = node_of(lost_leader);
  ASSERT_NE(lost_node, node_of(survivor)) << describe_agents(api);
  t0 = std::chrono::steady_clock::now();
  cp.remove_node(lost_node);
  api.create(kPods, gpu_pod("lost"));
  wait_until([&] { return lease_holder(api) == survivor; }, 60s,
             fmt::format("the standby {} to take the Lease from {}, whose node {} was removed",
                         survivor, lost_leader, lost_node),
             describe_lease);
  const double node_s = seconds_since(t0);
  expect_ran_on_chosen_gpu(api, "lost", uuids);
  EXPECT_EQ(api.get(kPods + "/lost")["spec"].value("nodeName", ""), node_of(survivor));
  collect_logs();
  EXPECT_NE(pod_log(api, kAgentPods, survivor).find("bound default/lost "), std::string::npos)
      << pod_log(api, kAgentPods, survivor);

  // 3. The leader's pod deleted: it gives the Lease up on SIGTERM, and the ReplicaSet's
  // replacement (the only other live replica) takes it at once and binds.
  t0 = std::chrono::steady_clock::now();
  api.remove(kAgentPods + "/" + survivor);
  std::string next;
  wait_until(
      [&] {
        next = lease_holder(api);
        return !next.empty() && next != survivor && next != lost_leader;
      },
      90s,
      fmt::format("the ReplicaSet's replacement to take the Lease from the deleted {}", survivor),
      describe_lease);
  const double delete_s = seconds_since(t0);
  api.create(kPods, gpu_pod("after"));
  expect_ran_on_chosen_gpu(api, "after", uuids);
  collect_logs();
  EXPECT_NE(pod_log(api, kAgentPods, next).find("bound default/after "), std::string::npos)
      << pod_log(api, kAgentPods, next);

  // Each pod bound by exactly one scheduler container, once.
  for (const char* pod : {"first", "during", "lost", "after"}) {
    const std::string line = fmt::format("bound default/{} ", pod);
    int binds = 0;
    std::string who;
    for (const auto& [container_name, text] : logs) {
      for (auto at_line = text.find(line); at_line != std::string::npos;
           at_line = text.find(line, at_line + 1)) {
        ++binds;
        who += " " + container_name;
      }
    }
    EXPECT_EQ(binds, 1) << pod << " bound by:" << who;
  }
  std::printf(
      "deployment on real nodes: control plane + controllers + 2 nodes %.1f s, image built and "
      "imported %.1f s, %d objects applied to all Ready %.1f s, first GPU pod %.1f s; the Lease "
      "taken over %.1f s after the leader's SIGKILL (by %s), %.1f s after its node's removal (by "
      "the "
      "standby), %.1f s after its pod's deletion (by the replacement); whole test %.1f s\n",
      cluster_s, image_s, objects, up_s, first_s, kill_s, after_kill.c_str(), node_s, delete_s,
      seconds_since(t_start));
}

}  // namespace
}  // namespace gpuorch
