// `gpuorch extender` behind the upstream kube-scheduler (scripts/k8s-testenv), configured through a
// KubeSchedulerConfiguration with extenders[] from `gpuorch extender --print-config`: pods of the
// default scheduler are bound where the core (best-fit, which packs; kube-scheduler alone spreads
// by CPU and memory) places them, with their GPUs written on them; a share asked as the managed
// resource gpuorch.io/gpu-milli (ignoredByScheduler) is placed by the extender alone; an impossible
// share is explained in kube-scheduler's message; bad requests get a 400 and one line, never a
// crash; TLS serves when a certificate is given.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/paths.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPods = "/api/v1/namespaces/default/pods";

void add_gpu_node(k8s::ApiClient& api, const std::string& name, int gpus) {
  api.create("/api/v1/nodes",
             {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "A100"}}}}}});
  const json res = {{"cpu", "64"},
                    {"memory", "256Gi"},
                    {"pods", "110"},
                    {"nvidia.com/gpu", std::to_string(gpus)}};
  api.patch(fmt::format("/api/v1/nodes/{}/status", name),
            {{"status", {{"capacity", res}, {"allocatable", res}}}});
}

json default_pod(const std::string& name, const json& requests) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "c"},
                           {"image", "registry.k8s.io/pause:3.10"},
                           {"resources", {{"requests", requests}, {"limits", requests}}}}})}}}};
}

bool bound(const json& p) { return !test::node_of(p).empty(); }
bool reported(const json& p) { return !test::unschedulable_message(p).empty(); }

json wait_pod(k8s::ApiClient& api, const std::string& name,
              const std::function<bool(const json&)>& pred) {
  return test::wait_for(api, fmt::format("{}/{}", kPods, name), pred, 60s);
}

std::string gpus_of(const json& p) {
  return p["metadata"].value("annotations", json::object()).value("gpuorch.io/gpus", "");
}

// The port `gpuorch extender` logs ("serving on http://127.0.0.1:PORT"); 0 until it has.
int logged_port(const test::SchedulerProcess& p, const std::string& scheme) {
  const std::string marker = fmt::format("serving on {}://127.0.0.1:", scheme);
  for (int i = 0; i < 200; ++i) {
    const std::string log = p.log();
    if (const auto at = log.find(marker); at != std::string::npos) {
      return std::stoi(log.substr(at + marker.size()));
    }
    std::this_thread::sleep_for(50ms);
  }
  return 0;
}

// The upstream kube-scheduler with our extender: the testenv's configuration plus extenders[]
// as `gpuorch extender --print-config` writes it, and every node scored (the default scores only
// a sample of large clusters, which would hide the core's choice from it).
void start_kube_scheduler_with_extender(const test::ControlPlane& cp, int port,
                                        const test::TempDir& dir) {
  const auto stanza = test::run_cli(
      {"extender", "--print-config", "--listen", fmt::format("127.0.0.1:{}", port)}, dir);
  ASSERT_EQ(stanza.exit_code, 0) << stanza.err;
  const std::string config = dir.file("kube-scheduler-extender.yaml");
  test::write_text(config, fmt::format("apiVersion: kubescheduler.config.k8s.io/v1\n"
                                       "kind: KubeSchedulerConfiguration\n"
                                       "clientConnection:\n"
                                       "  kubeconfig: {}/kube-scheduler.kubeconfig\n"
                                       "leaderElection:\n"
                                       "  leaderElect: false\n"
                                       "percentageOfNodesToScore: 100\n{}",
                                       cp.dir(), stanza.out));
  const std::string command = fmt::format(
      "GPUORCH_K8S_WATCH_PID={} {}/scripts/k8s-testenv scheduler {} --config={} >{} 2>&1",
      ::getpid(), ::gpuorch::test::source_dir(), cp.dir(), config,
      dir.file("kube-scheduler-start.log"));
  ASSERT_EQ(std::system(command.c_str()), 0)
      << test::read_text(dir.file("kube-scheduler-start.log"));
}

TEST(ExtenderControlPlane, KubeSchedulerBindsWhereTheCoreSays) {
  auto& cp = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  add_gpu_node(api, "gpu-a", 4);
  add_gpu_node(api, "gpu-b", 4);
  test::TempDir dir;
  test::SchedulerProcess extender(
      {"--kubeconfig", cp.kubeconfig(), "--policy", "best-fit", "--listen", "127.0.0.1:0"},
      dir.file("extender.log"), "extender");
  const int port = logged_port(extender, "http");
  ASSERT_GT(port, 0) << extender.log();
  httplib::Client http("127.0.0.1", port);
  for (int i = 0; i < 100 && !(http.Get("/readyz") && http.Get("/readyz")->status == 200); ++i) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(http.Get("/readyz")->status, 200) << extender.log();
  start_kube_scheduler_with_extender(cp, port, dir);

  // Packed where best-fit packs: both on one node, GPUs 0 then 1.
  api.create(kPods, default_pod("one", {{"cpu", "8"}, {"memory", "8Gi"}, {"nvidia.com/gpu", "1"}}));
  const json one = wait_pod(api, "one", bound);
  const std::string packed = test::node_of(one);
  EXPECT_EQ(gpus_of(one), "0") << extender.log();
  api.create(kPods, default_pod("two", {{"cpu", "8"}, {"memory", "8Gi"}, {"nvidia.com/gpu", "1"}}));
  const json two = wait_pod(api, "two", bound);
  EXPECT_EQ(test::node_of(two), packed) << extender.log();
  EXPECT_EQ(gpus_of(two), "1");
  // A share, asked as the managed resource kube-scheduler ignores: next to them, on GPU 2.
  api.create(kPods, default_pod("share", {{"cpu", "1"}, {"gpuorch.io/gpu-milli", "500"}}));
  const json share = wait_pod(api, "share", bound);
  EXPECT_EQ(test::node_of(share), packed) << extender.log();
  EXPECT_EQ(gpus_of(share), "2");
  EXPECT_EQ(share["metadata"]["annotations"].value("gpuorch.io/gpu-milli", ""), "500");
  // Four whole GPUs fit only the other node.
  api.create(kPods, default_pod("four", {{"cpu", "1"}, {"nvidia.com/gpu", "4"}}));
  const json four = wait_pod(api, "four", bound);
  EXPECT_NE(test::node_of(four), packed);
  EXPECT_EQ(gpus_of(four), "0,1,2,3");
  // A pod without GPUs is not the extender's: kube-scheduler binds it itself.
  api.create(kPods, default_pod("cpu-only", {{"cpu", "1"}}));
  EXPECT_TRUE(gpus_of(wait_pod(api, "cpu-only", bound)).empty());
  // An impossible share: the core's reason in kube-scheduler's message.
  api.create(kPods, default_pod("too-big", {{"cpu", "1"}, {"gpuorch.io/gpu-milli", "1500"}}));
  const std::string msg = test::unschedulable_message(wait_pod(api, "too-big", reported));
  EXPECT_NE(msg.find("gpuorch.io/gpu-milli '1500' is not in 1..1000"), std::string::npos) << msg;
  // A share on the packed node's last GPU: GPU 2 has 500 milli left and best-fit takes it.
  api.create(kPods, default_pod("share2", {{"cpu", "1"}, {"gpuorch.io/gpu-milli", "400"}}));
  const json share2 = wait_pod(api, "share2", bound);
  EXPECT_EQ(test::node_of(share2), packed);
  EXPECT_EQ(gpus_of(share2), "2");

  // What a peer sends cannot crash it: bad JSON, wrong shapes, an oversized body, unknown verbs.
  const auto bad = http.Post("/filter", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(test::lines_of(bad->body).size(), 1U) << bad->body;
  EXPECT_EQ(http.Post("/filter", R"({"Pod": 3})", "application/json")->status, 400);
  EXPECT_EQ(http.Post("/bind", R"({"PodName": "x"})", "application/json")->status, 400);
  EXPECT_EQ(http.Post("/prioritize", std::string(200000, '['), "application/json")->status, 400);
  const auto huge = http.Post("/filter", std::string(9 << 20, ' '), "application/json");
  EXPECT_TRUE(!huge || huge->status == 413);
  // Lower-case keys are Go's too; a pod the cache never saw is refused in the protocol's Error.
  const auto lower = http.Post(
      "/bind", R"({"podName":"ghost","podNamespace":"default","podUID":"u-1","node":"gpu-a"})",
      "application/json");
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200);
  EXPECT_NE(json::parse(lower->body).value("Error", "").find("not a pending pod"),
            std::string::npos)
      << lower->body;
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  const auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpuorch_extender_bind_total"), std::string::npos);
  EXPECT_EQ(extender.stop(), 0) << extender.log();
}

TEST(ExtenderControlPlane, TlsWhenACertificateIsGivenAndRefusedCredentials) {
  auto& cp = test::ControlPlane::shared();
  test::TempDir dir;
  test::SchedulerProcess extender({"--kubeconfig", cp.kubeconfig(), "--listen", "127.0.0.1:0",
                                   "--tls-cert", cp.dir() + "/pki/kube-scheduler-serving.crt",
                                   "--tls-key", cp.dir() + "/pki/kube-scheduler-serving.key"},
                                  dir.file("extender.log"), "extender");
  const int port = logged_port(extender, "https");
  ASSERT_GT(port, 0) << extender.log();
  httplib::SSLClient https("127.0.0.1", port);
  https.set_ca_cert_path(cp.ca_file().c_str());
  https.enable_server_certificate_verification(true);
  const auto health = https.Get("/healthz");
  ASSERT_TRUE(health) << "no TLS answer: " << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  httplib::Client plain("127.0.0.1", port);
  const auto refused = plain.Get("/healthz");
  EXPECT_TRUE(!refused || refused->status != 200);
  EXPECT_EQ(extender.stop(), 0) << extender.log();

  const auto r = test::run_cli({"extender", "--kubeconfig", cp.nobody_kubeconfig()}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("refused the credentials"), std::string::npos) << r.err;
  const auto half = test::run_cli({"extender", "--tls-cert", "x.pem"}, dir);
  EXPECT_EQ(half.exit_code, 2) << half.err;
  EXPECT_EQ(test::lines_of(half.err).size(), 1U) << half.err;
}

// Issue 30: with SO_REUSEPORT a second extender bound the port in use and took half of
// kube-scheduler's requests; it must exit 2 with one line. And with --auth-token-file the verbs
// need the token (403 without it), names that are not Kubernetes names get 400.
TEST(ExtenderControlPlane, APortInUseExitsTwoAndTheVerbsNeedTheToken) {
  auto& cp = test::ControlPlane::shared();
  test::TempDir dir;
  test::write_text(dir.file("token"), "e2e-token\n");
  test::SchedulerProcess extender({"--kubeconfig", cp.kubeconfig(), "--listen", "127.0.0.1:0",
                                   "--auth-token-file", dir.file("token")},
                                  dir.file("extender.log"), "extender");
  const int port = logged_port(extender, "http");
  ASSERT_GT(port, 0) << extender.log();
  EXPECT_NE(extender.log().find("verbs need the bearer token"), std::string::npos)
      << extender.log();

  const auto second = test::run_cli(
      {"extender", "--kubeconfig", cp.kubeconfig(), "--listen", fmt::format("127.0.0.1:{}", port)},
      dir);
  EXPECT_EQ(second.exit_code, 2) << second.err;
  EXPECT_EQ(test::lines_of(second.err).size(), 1U) << second.err;
  EXPECT_NE(second.err.find("cannot bind"), std::string::npos) << second.err;

  httplib::Client http("127.0.0.1", port);
  const std::string bind =
      R"({"PodName":"../../nodes/x","PodNamespace":"default","PodUID":"u","Node":"gpu-a"})";
  const auto anonymous = http.Post("/bind", bind, "application/json");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 403);
  const httplib::Headers token = {{"Authorization", "Bearer e2e-token"}};
  const auto bad_name = http.Post("/bind", token, bind, "application/json");
  ASSERT_TRUE(bad_name);
  EXPECT_EQ(bad_name->status, 400);
  EXPECT_EQ(test::lines_of(bad_name->body).size(), 1U) << bad_name->body;
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  EXPECT_EQ(extender.stop(), 0) << extender.log();
  // Logged once for the address, not once per request.
  const std::string log = extender.log();
  const auto first = log.find("refused /bind from 127.0.0.1");
  EXPECT_NE(first, std::string::npos) << log;

  const auto no_file = test::run_cli({"extender", "--auth-token-file", dir.file("missing")}, dir);
  EXPECT_EQ(no_file.exit_code, 2) << no_file.err;
  EXPECT_EQ(test::lines_of(no_file.err).size(), 1U) << no_file.err;
}

}  // namespace
}  // namespace gpuorch
