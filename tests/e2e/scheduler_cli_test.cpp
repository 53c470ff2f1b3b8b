// `gpuorch scheduler` against the real upstream kube-apiserver (scripts/k8s-testenv): whole-GPU
// and shared pods bound with their GPUs written on them, every kind of bad or impossible pod
// reported Unschedulable with the core's explanation and an Event, a waiting pod bound once room
// frees up (not retried in a busy loop), other schedulers' pods left alone, the API server
// restarted mid-run, and refused credentials failing at start with one line and exit 2.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

json make_node(const std::string& name, const std::string& model, json labels = {}) {
  labels["nvidia.com/gpu.product"] = model;
  return {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

void add_node(k8s::ApiClient& api, const std::string& name, int gpus, const std::string& model,
              json labels = json::object(), json taints = json::array(), std::string cpu = "32") {
  json n = make_node(name, model, std::move(labels));
  if (!taints.empty()) n["spec"]["taints"] = std::move(taints);
  api.create("/api/v1/nodes", n);
  const json res = {
      {"cpu", cpu}, {"memory", "256Gi"}, {"pods", "110"}, {"nvidia.com/gpu", std::to_string(gpus)}};
  api.patch(fmt::format("/api/v1/nodes/{}/status", name),
            {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

json make_pod(const std::string& name, json requests, json annotations = json::object(),
              const std::string& scheduler = "gpuorch") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"annotations", annotations}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"containers",
             json::array({{{"name", "c"},
                           {"image", "registry.k8s.io/pause:3.10"},
                           {"resources", {{"requests", requests}, {"limits", requests}}}}})}}}};
}

const std::string kPods = "/api/v1/namespaces/default/pods";

json get_pod(k8s::ApiClient& api, const std::string& name) {
  return api.get(fmt::format("{}/{}", kPods, name));
}

using test::unschedulable_message;

// Polls until pred holds for the pod (bound, or reported); returns the last object seen.
json wait_pod(k8s::ApiClient& api, const std::string& name,
              const std::function<bool(const json&)>& pred, std::chrono::seconds timeout = 60s) {
  return test::wait_for(api, fmt::format("{}/{}", kPods, name), pred, timeout);
}

bool bound(const json& p) { return !test::node_of(p).empty(); }
bool reported(const json& p) { return !unschedulable_message(p).empty(); }

std::size_t events_for(k8s::ApiClient& api, const std::string& pod) {
  const json list = api.get(
      fmt::format("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{}", pod));
  return list["items"].size();
}

// The scheduler as these tests run it: efd, any free port, a short retry period.
class SchedulerProcess : public test::SchedulerProcess {
 public:
  SchedulerProcess(const std::string& kubeconfig, const std::string& log, bool leader_elect = false)
      : test::SchedulerProcess(args(kubeconfig, leader_elect), log) {}

 private:
  static std::vector<std::string> args(const std::string& kubeconfig, bool leader_elect) {
    std::vector<std::string> a{
        "--kubeconfig",          kubeconfig, "--policy", "efd", "--listen", "127.0.0.1:0",
        "--retry-unschedulable", "30"};
    if (leader_elect) a.emplace_back("--leader-elect");
    return a;
  }
};

TEST(SchedulerControlPlane, PlacesExplainsRetriesAndSurvivesARestart) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  add_node(api, "gpu-a", 4, "A100", {{"rack", "r1"}});
  add_node(api, "gpu-b", 4, "A100", {{"rack", "r2"}},
           json::array({{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}}));
  // A quantity the API server takes but no int64 of milli-CPU holds: the node is left out.
  add_node(api, "gpu-bad", 2, "T4", json::object(), json::array(), "1e20");
  test::TempDir dir;
  SchedulerProcess scheduler(cp.kubeconfig(), dir.file("scheduler.log"));

  // Whole GPUs: bound to the only usable node, GPU indices written on the pod.
  api.create(kPods, make_pod("whole", {{"cpu", "4"}, {"memory", "8Gi"}, {"nvidia.com/gpu", "2"}}));
  json p = wait_pod(api, "whole", bound);
  EXPECT_EQ(p["spec"].value("nodeName", ""), "gpu-a") << scheduler.log();
  EXPECT_EQ(p["metadata"]["annotations"].value("gpuorch.io/gpus", ""), "0,1");
  // A share: KAI's gpu-fraction, the milli written back.
  api.create(kPods,
             make_pod("share", {{"cpu", "1"}, {"memory", "1Gi"}}, {{"gpu-fraction", "0.5"}}));
  p = wait_pod(api, "share", bound);
  EXPECT_EQ(p["spec"].value("nodeName", ""), "gpu-a");
  EXPECT_EQ(p["metadata"]["annotations"].value("gpuorch.io/gpu-milli", ""), "500");
  EXPECT_EQ(p["metadata"]["annotations"].value("gpuorch.io/gpus", "").size(), 1U);

  // Impossible pods, each with the core's reason.
  api.create(kPods, make_pod("bad-fraction", {{"cpu", "1"}}, {{"gpu-fraction", "1.5"}}));
  json tainted = make_pod("wants-r2", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  tainted["spec"]["nodeSelector"] = {{"rack", "r2"}};
  api.create(kPods, tainted);
  json h100 = make_pod("wants-h100", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  h100["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"] =
          json::array({{{"matchExpressions", json::array({{{"key", "nvidia.com/gpu.product"},
                                                           {"operator", "In"},
                                                           {"values", {"H100"}}}})}}});
  api.create(kPods, h100);
  EXPECT_NE(
      unschedulable_message(wait_pod(api, "bad-fraction", reported)).find("gpu-fraction '1.5'"),
      std::string::npos);
  const std::string taint_msg = unschedulable_message(wait_pod(api, "wants-r2", reported));
  EXPECT_NE(taint_msg.find("0/2 nodes are available"), std::string::npos) << taint_msg;
  EXPECT_NE(taint_msg.find("1 have a taint the pod does not tolerate"), std::string::npos)
      << taint_msg;
  EXPECT_NE(taint_msg.find("1 do not match the pod's node selector"), std::string::npos)
      << taint_msg;
  EXPECT_NE(taint_msg.find("Infeasible"), std::string::npos) << taint_msg;
  const std::string model_msg = unschedulable_message(wait_pod(api, "wants-h100", reported));
  EXPECT_NE(model_msg.find("GPU model 'H100' is on no node"), std::string::npos) << model_msg;
  EXPECT_NE(model_msg.find("1 have the wrong GPU model"), std::string::npos) << model_msg;
  EXPECT_GE(events_for(api, "wants-r2"), 1U);
  EXPECT_NE(scheduler.log().find("left out node gpu-bad"), std::string::npos) << scheduler.log();

  // Waiting: 3 whole GPUs do not fit next to "whole" and "share"; once they are deleted, it binds.
  api.create(kPods, make_pod("waits", {{"cpu", "1"}, {"nvidia.com/gpu", "3"}}));
  const std::string wait_msg = unschedulable_message(wait_pod(api, "waits", reported));
  EXPECT_NE(wait_msg.find("Waiting"), std::string::npos) << wait_msg;
  std::this_thread::sleep_for(2s);
  EXPECT_LE(events_for(api, "waits"), 1U) << "an unchanged cluster must not retry the pod";
  api.remove(fmt::format("{}/whole?gracePeriodSeconds=0", kPods));
  api.remove(fmt::format("{}/share?gracePeriodSeconds=0", kPods));
  p = wait_pod(api, "waits", bound);
  EXPECT_EQ(p["spec"].value("nodeName", ""), "gpu-a");

  // Another scheduler's pod is not ours to bind.
  api.create(kPods, make_pod("not-ours", {{"cpu", "1"}}, json::object(), "default-scheduler"));

  // The API server restarts: the scheduler's watches reconnect and it goes on binding.
  cp.restart_apiserver();
  api.create(kPods, make_pod("after-restart", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  p = wait_pod(api, "after-restart", bound, 60s);
  EXPECT_EQ(p["spec"].value("nodeName", ""), "gpu-a") << scheduler.log();
  p = get_pod(api, "not-ours");
  EXPECT_FALSE(bound(p));
  EXPECT_TRUE(unschedulable_message(p).empty());
  // /metrics, /healthz and /readyz on the port the start line names.
  const std::string log_text = scheduler.log();
  const std::string marker = "metrics on http://127.0.0.1:";
  const auto marker_at = log_text.find(marker);
  ASSERT_NE(marker_at, std::string::npos) << log_text;
  const int port = std::stoi(log_text.substr(marker_at + marker.size()));
  httplib::Client http("127.0.0.1", port);
  const auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics) << "no answer on port " << port;
  EXPECT_NE(metrics->body.find("gpuorch_scheduler_binds_total 4"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("gpuorch_scheduler_bind_duration_seconds_count 4"),
            std::string::npos);
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  EXPECT_EQ(http.Get("/readyz")->status, 200);
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  // Nothing bound twice: each bind is logged once.
  const std::string log = scheduler.log();
  std::size_t binds = 0;
  for (std::size_t at = log.find("bound default/"); at != std::string::npos;
       at = log.find("bound default/", at + 1)) {
    ++binds;
  }
  EXPECT_EQ(binds, 4U) << log;
}

// Two replicas, one Lease: only the leader binds; when it stops (releasing the lease) the standby
// takes over and binds the next pod.
TEST(SchedulerControlPlane, LeaderElectionOneActiveReplica) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  add_node(api, "gpu-a", 4, "A100");
  test::TempDir dir;
  SchedulerProcess first(cp.kubeconfig(), dir.file("first.log"), true);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (first.log().find("leading:") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_NE(first.log().find("leading:"), std::string::npos) << first.log();
  SchedulerProcess second(cp.kubeconfig(), dir.file("second.log"), true);
  api.create(kPods, make_pod("one", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  wait_pod(api, "one", bound);
  std::this_thread::sleep_for(1s);
  EXPECT_NE(second.log().find("standing by"), std::string::npos) << second.log();
  EXPECT_EQ(second.log().find("leading:"), std::string::npos) << second.log();
  EXPECT_NE(first.log().find("bound default/one"), std::string::npos) << first.log();
  const json lease =
      api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/gpuorch-scheduler");
  EXPECT_FALSE(lease["spec"].value("holderIdentity", "").empty());
  EXPECT_EQ(first.stop(), 0) << first.log();
  EXPECT_NE(first.log().find("released lease"), std::string::npos) << first.log();
  api.create(kPods, make_pod("two", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  wait_pod(api, "two", bound, 30s);
  EXPECT_NE(second.log().find("leading:"), std::string::npos) << second.log();
  EXPECT_NE(second.log().find("bound default/two"), std::string::npos) << second.log();
  EXPECT_EQ(second.log().find("bound default/one"), std::string::npos) << "bound once only";
}

// A credential revoked while the scheduler runs: a clear error in its log (never a crash), and it
// goes on once the credential is valid again.
TEST(SchedulerControlPlane, CredentialRevokedWhileRunning) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  add_node(api, "gpu-a", 4, "A100");
  test::TempDir dir;
  SchedulerProcess scheduler(cp.token_kubeconfig(), dir.file("scheduler.log"));
  api.create(kPods, make_pod("before", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  wait_pod(api, "before", bound);
  const std::string tokens = cp.dir() + "/tokens.csv";
  const std::string saved = test::read_text(tokens);
  std::string revoked;
  for (const auto& line : test::lines_of(saved)) {
    if (line.rfind(cp.admin_token() + ",", 0) != 0) revoked += line + "\n";
  }
  test::write_text(tokens, revoked);
  cp.restart_apiserver();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (scheduler.log().find("401") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_NE(scheduler.log().find("401"), std::string::npos) << scheduler.log();
  test::write_text(tokens, saved);
  cp.restart_apiserver();
  api.create(kPods, make_pod("after", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  wait_pod(api, "after", bound, 90s);
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
}

TEST(SchedulerControlPlane, RefusedCredentialsExitTwoAtStart) {
  auto& cp = test::ControlPlane::shared();
  test::TempDir dir;
  const auto r = test::run_cli({"scheduler", "--kubeconfig", cp.nobody_kubeconfig()}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("refused the credentials"), std::string::npos) << r.err;
  EXPECT_EQ(test::lines_of(r.err).size(), 1U) << r.err;
  const auto bad = test::run_cli({"scheduler", "--kubeconfig", dir.file("missing.yaml")}, dir);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  const auto policy = test::run_cli({"scheduler", "--policy", "nope"}, dir);
  EXPECT_EQ(policy.exit_code, 2) << policy.err;
}

}  // namespace
}  // namespace gpuorch
