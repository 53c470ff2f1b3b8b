// `gpuorch scheduler` against the real kube-apiserver on what it must not decide, or not decide
// again at once: a pod with scheduling gates (Kueue's admission gate) is never bound and shows
// SchedulingGated until its last gate goes, then is bound inside the node selector Kueue added;
// a bind the API server keeps refusing is retried with backoff, never in a loop (counted in the
// API server's own metrics); every required constraint the core does not evaluate, and a GPU
// share asked wrongly, makes the pod Unschedulable with the field's name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/admission_policy.hpp"
#include "support/cluster_objects.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::kDefaultPods;
using Clock = std::chrono::steady_clock;

test::SchedulerProcess start_scheduler(const std::string& kubeconfig, const std::string& log) {
  return test::SchedulerProcess(
      {"--kubeconfig", kubeconfig, "--policy", "efd", "--listen", "127.0.0.1:0"}, log);
}

json pod_at(k8s::ApiClient& api, const std::string& name) {
  return api.get(fmt::format("{}/{}", kDefaultPods, name));
}

json wait_pod(k8s::ApiClient& api, const std::string& name,
              const std::function<bool(const json&)>& pred, std::chrono::seconds timeout = 60s) {
  return test::wait_for(api, fmt::format("{}/{}", kDefaultPods, name), pred, timeout);
}

bool bound(const json& p) { return !test::node_of(p).empty(); }

// POSTs of pods/binding the API server has answered since it started, whatever the answer
// (apiserver_request_total counts refused ones too).
double binding_requests(k8s::ApiClient& api) {
  const auto res = api.request("GET", "/metrics", nullptr, {});
  double total = 0;
  static const std::regex line(R"re(^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$)re");
  std::size_t start = 0;
  while (start < res.body.size()) {
    std::size_t end = res.body.find('\n', start);
    if (end == std::string::npos) end = res.body.size();
    const std::string l = res.body.substr(start, end - start);
    std::smatch m;
    if (std::regex_match(l, m, line) && m[1].str().find("resource=\"pods\"") != std::string::npos &&
        m[1].str().find("subresource=\"binding\"") != std::string::npos &&
        m[1].str().find("verb=\"POST\"") != std::string::npos) {
      total += std::stod(m[2].str());
    }
    start = end + 1;
  }
  return total;
}

std::size_t failed_scheduling_events(k8s::ApiClient& api, const std::string& pod) {
  const json list = api.get(
      fmt::format("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{}", pod));
  std::size_t n = 0;
  for (const auto& e : list["items"]) n += e.value("reason", "") == "FailedScheduling";
  return n;
}

TEST(SchedulerAdmission, GatedPodWaitsUnboundThenBindsInsideKueuesSelector) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  // The pool Kueue's ResourceFlavor names (nodeLabels) is the second node, not the first a
  // scheduler would pick on its own.
  test::add_gpu_node(api, "gpu-a", 8);
  test::add_gpu_node(api, "gpu-b", 8, {{"gpuorch.io/pool", "b"}});
  test::TempDir dir;
  auto scheduler = start_scheduler(cp.kubeconfig(), dir.file("scheduler.log"));

  // What Kueue's pod webhook makes of a pod in a LocalQueue: the admission gate and its labels.
  json gated = test::gpu_pod("gated", {{"cpu", "1"}, {"nvidia.com/gpu", "2"}});
  gated["metadata"]["labels"] = {{"kueue.x-k8s.io/managed", "true"},
                                 {"kueue.x-k8s.io/queue-name", "user-queue"}};
  gated["spec"]["schedulingGates"] = json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  // An ungated pod created after it is bound first: gpuorch is running and deciding.
  const double binds_before = binding_requests(api);
  api.create(kDefaultPods, gated);
  api.create(kDefaultPods, test::gpu_pod("free", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  wait_pod(api, "free", bound);
  json p = wait_pod(api, "gated",
                    [](const json& o) { return test::unscheduled_reason(o) == "SchedulingGated"; });
  // The API server itself writes SchedulingGated on a pod created with gates; gpuorch writes it
  // only where it is missing (k8s/scheduler/scheduler_service.cpp, report_gated), and never
  // Unschedulable.
  std::this_thread::sleep_for(3s);
  p = pod_at(api, "gated");
  EXPECT_FALSE(bound(p));
  EXPECT_EQ(test::unscheduled_reason(p), "SchedulingGated");
  EXPECT_EQ(failed_scheduling_events(api, "gated"), 0U) << "a gated pod is no failure";
  EXPECT_EQ(binding_requests(api) - binds_before, 1.0)
      << "one bind (the ungated pod), none for the gated one";

  // Kueue admits: adds its flavor's node selector and removes the gate in one update.
  const auto ungated_at = Clock::now();
  api.patch(
      fmt::format("{}/gated", kDefaultPods),
      {{"spec", {{"nodeSelector", {{"gpuorch.io/pool", "b"}}}, {"schedulingGates", nullptr}}}});
  json last;
  while (Clock::now() - ungated_at < 30s) {
    last = pod_at(api, "gated");
    if (bound(last)) break;
    std::this_thread::sleep_for(20ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - ungated_at).count();
  ASSERT_TRUE(bound(last)) << scheduler.log();
  EXPECT_EQ(test::node_of(last), "gpu-b") << "inside what Kueue assigned";
  RecordProperty("ungate_to_bound_seconds", fmt::format("{:.3f}", seconds));
  std::printf("gated pod bound %.3f s after its gate was removed\n", seconds);
  EXPECT_EQ(binding_requests(api) - binds_before, 2.0);
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
  const std::string log = scheduler.log();
  EXPECT_EQ(log.find("bind default/gated"), std::string::npos) << "never a failed bind: " << log;
}

// A bind refused by admission (a ValidatingAdmissionPolicy on pods/binding) is tried again
// with backoff: at most 10 attempts in the first 60 s (kube-scheduler: 1 s doubling to 10 s),
// the pod says why it is pending, and it binds once the refusal is lifted.
TEST(SchedulerAdmission, RefusedBindIsRetriedWithBackoffNotInALoop) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  test::add_gpu_node(api, "gpu-a", 8);
  test::deny_unless(api, "refuse-bind", "", "pods/binding", "CREATE",
                    "object.metadata.name != 'refused'", "bindings of 'refused' are refused");
  // The policy takes a moment to load: probe with a Binding of a pod that does not exist (the
  // policy answers before storage does).
  const json probe = {{"apiVersion", "v1"},
                      {"kind", "Binding"},
                      {"metadata", {{"name", "refused"}}},
                      {"target", {{"kind", "Node"}, {"name", "gpu-a"}}}};
  const auto loaded_by = Clock::now() + 30s;
  bool loaded = false;
  while (!loaded && Clock::now() < loaded_by) {
    try {
      api.create(kDefaultPods + "/refused/binding", probe);
    } catch (const k8s::ApiError& e) {
      loaded = e.message().find("are refused") != std::string::npos;
    }
    if (!loaded) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(loaded) << "the ValidatingAdmissionPolicy never took effect";

  test::TempDir dir;
  auto scheduler = start_scheduler(cp.kubeconfig(), dir.file("scheduler.log"));
  const double before = binding_requests(api);
  api.create(kDefaultPods, test::gpu_pod("refused", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  const auto created = Clock::now();
  json p = wait_pod(api, "refused",
                    [](const json& o) { return test::unscheduled_reason(o) == "SchedulerError"; });
  EXPECT_NE(test::unschedulable_message(p).find("are refused"), std::string::npos) << p.dump();
  std::this_thread::sleep_until(created + 60s);
  const double attempts = binding_requests(api) - before;
  RecordProperty("bind_attempts_in_60s", fmt::format("{}", attempts));
  std::printf("refused bind attempted %.0f times in 60 s\n", attempts);
  EXPECT_GE(attempts, 3.0) << "it must keep trying";
  EXPECT_LE(attempts, 10.0) << scheduler.log();
  EXPECT_FALSE(bound(pod_at(api, "refused")));

  test::drop_denial(api, "refuse-bind");
  p = wait_pod(api, "refused", bound, 60s);
  EXPECT_EQ(test::node_of(p), "gpu-a");
  EXPECT_EQ(scheduler.stop(), 0) << scheduler.log();
}

TEST(SchedulerAdmission, UnevaluatedConstraintsAndBadSharesAreRefusedByName) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  test::add_gpu_node(api, "gpu-a", 8);
  test::TempDir dir;
  auto scheduler = start_scheduler(cp.kubeconfig(), dir.file("scheduler.log"));
  const json term = {{"labelSelector", {{"matchLabels", {{"app", "x"}}}}},
                     {"topologyKey", "kubernetes.io/hostname"}};
  struct Case {
    std::string name;
    std::function<void(json&)> edit;
    std::string named;  // in the message
  };
  auto resource = [](const std::string& name) {
    return [name](json& p) {
      auto& c = p["spec"]["containers"][0]["resources"];
      c["requests"][name] = "1Gi";
      c["limits"][name] = "1Gi";
    };
  };
  const std::vector<Case> cases = {
      {"anti-affinity",
       [&](json& p) {
         p["spec"]["affinity"]["podAntiAffinity"]
          ["requiredDuringSchedulingIgnoredDuringExecution"] = json::array({term});
       },
       "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"},
      {"affinity",
       [&](json& p) {
         p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
             json::array({term});
       },
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"},
      {"spread",
       [](json& p) {
         p["spec"]["topologySpreadConstraints"] =
             json::array({{{"maxSkew", 1},
                           {"topologyKey", "kubernetes.io/hostname"},
                           {"whenUnsatisfiable", "DoNotSchedule"},
                           {"labelSelector", {{"matchLabels", {{"app", "x"}}}}}}});
       },
       "spec.topologySpreadConstraints[0]"},
      {"host-port",
       [](json& p) {
         p["spec"]["containers"][0]["ports"] =
             json::array({{{"containerPort", 80}, {"hostPort", 8080}}});
       },
       "hostPort 8080"},
      {"claim",
       [](json& p) {
         p["spec"]["volumes"] =
             json::array({{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "d"}}}}});
       },
       "spec.volumes[0].persistentVolumeClaim"},
      {"ephemeral-volume",
       [](json& p) {
         p["spec"]["volumes"] =
             json::array({{{"name", "scratch"},
                           {"ephemeral",
                            {{"volumeClaimTemplate",
                              {{"spec",
                                {{"accessModes", {"ReadWriteOnce"}},
                                 {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}}}}}});
       },
       "spec.volumes[0].ephemeral"},
      {"dra-claim",
       [](json& p) {
         p["spec"]["resourceClaims"] =
             json::array({{{"name", "gpu"}, {"resourceClaimName", "some-claim"}}});
       },
       "spec.resourceClaims"},
      {"ephemeral-storage", resource("ephemeral-storage"), "requests[ephemeral-storage]"},
      {"empty-fraction", [](json& p) { p["metadata"]["annotations"]["gpu-fraction"] = ""; },
       "gpu-fraction ''"},
      {"two-shares",
       [](json& p) {
         p["metadata"]["annotations"]["gpu-fraction"] = "0.5";
         p["metadata"]["annotations"]["gpuorch.io/gpu-milli"] = "300";
       },
       "asks for a GPU share in 2 ways"},
  };
  for (const auto& c : cases) {
    json p = test::gpu_pod(c.name, {{"cpu", "1"}});
    c.edit(p);
    api.create(kDefaultPods, p);
  }
  // Soft constraints: placed without them, logged once.
  json soft = test::gpu_pod("soft", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  soft["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
      json::array({{{"weight", 10}, {"podAffinityTerm", term}}});
  api.create(kDefaultPods, soft);
  for (const auto& c : cases) {
    const json p = wait_pod(
        api, c.name, [](const json& o) { return test::unscheduled_reason(o) == "Unschedulable"; });
    const std::string message = test::unschedulable_message(p);
    EXPECT_NE(message.find(c.named), std::string::npos) << c.name << ": " << message;
    EXPECT_FALSE(bound(p)) << c.name;
  }
  EXPECT_TRUE(bound(wait_pod(api, "soft", bound)));
  EXPECT_EQ(scheduler.stop(), 0);
  const std::string log = scheduler.log();
  const auto first = log.find("default/soft: soft constraints not evaluated");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("default/soft: soft constraints not evaluated", first + 1), std::string::npos);
}

}  // namespace
}  // namespace gpuorch
