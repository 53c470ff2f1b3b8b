// `gpuorch extender`'s verbs against a stand-in API server (k8s/fake_api_server.hpp), for what
// issue 30 and issue 29 item 8 found: names from a bind request reach an API path only when they
// are what Kubernetes allows (else 400, one line, no request made); a bind the API server refuses
// is reported to kube-scheduler once, never retried in here; offered node names the cache does
// not know (or repeats) are dropped before any work; the verbs need credentials when configured.
#include "gpuorch/k8s/extender/extender_service.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/extender/extender_auth.hpp"
#include "gpuorch/k8s/extender/extender_http.hpp"
#include "gpuorch/telemetry/http_server.hpp"
#include "k8s/fake_api_server.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json node(const std::string& name) {
  const json res = {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name}, {"uid", "uid-" + name}, {"labels", {{"nvidia.com/gpu.product", "A100"}}}}},
      {"status", {{"capacity", res}, {"allocatable", res}}}};
}

json pending_pod(const std::string& name) {
  const json res = {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "c"}, {"resources", {{"requests", res}, {"limits", res}}}}})}}},
          {"status", {{"phase", "Pending"}}}};
}

// An extender whose API server is `fake`, with nodes gpu-a, gpu-b and the pending pod p1.
struct Extender {
  explicit Extender(test::FakeApiServer& fake) : api(fake.config()), service(api, options()) {
    service.on_node(node("gpu-a"), false);
    service.on_node(node("gpu-b"), false);
    service.on_pod(pending_pod("p1"), false);
    service.mark_synced();
  }
  static ExtenderOptions options() {
    ExtenderOptions o;
    o.mirror.policy = "best-fit";
    return o;
  }
  ApiClient api;
  ExtenderService service;
};

struct CountingApi {
  CountingApi() {
    fake.http().Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      last_path = req.path;
      res.status = 500;
      res.set_content(
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500})",
          "application/json");
    });
    fake.http().Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      ++requests;
      res.status = 404;
    });
    fake.start();
  }
  test::FakeApiServer fake;
  std::atomic<int> requests{0};
  std::string last_path;
};

std::string bind_body(const std::string& name, const std::string& ns, const std::string& node) {
  return json{{"PodName", name}, {"PodNamespace", ns}, {"PodUID", "uid-p1"}, {"Node", node}}.dump();
}

TEST(ExtenderBind, NamesThatAreNotKubernetesNamesAre400AndNeverReachTheApiServer) {
  CountingApi api;
  Extender e(api.fake);
  const struct {
    const char* name;
    const char* ns;
    const char* node;
  } cases[] = {
      {"../../nodes/node-0", "default", "gpu-a"},  // issue 30: POSTed to /api/v1/nodes/node-0/...
      {"p1?dryRun=All", "default", "gpu-a"},
      {"p1/binding", "default", "gpu-a"},
      {"p1\r\nI0101 forged log line", "default", "gpu-a"},
      {"p1", "..", "gpu-a"},
      {"p1", "default/pods", "gpu-a"},
      {"p1", "Default", "gpu-a"},
      {"p1", "default", "gpu-a/../x"},
      {"P1", "default", "gpu-a"},
  };
  for (const auto& c : cases) {
    const auto reply = e.service.call("bind", bind_body(c.name, c.ns, c.node));
    EXPECT_EQ(reply.status, 400) << c.name << " " << c.ns << " " << c.node << ": " << reply.body;
    EXPECT_EQ(reply.body.find('\n'), reply.body.size() - 1) << reply.body;  // one line
    EXPECT_EQ(reply.body.find('\r'), std::string::npos) << reply.body;
    EXPECT_NE(reply.body.find("is not a valid DNS-1123"), std::string::npos) << reply.body;
  }
  EXPECT_EQ(api.requests, 0) << api.last_path;
}

// Issue 29 item 8: the API server refuses the Binding; the answer's Error says so (kube-scheduler
// then retries the pod with its own backoff) and gpuorch asked once.
TEST(ExtenderBind, ABindTheApiServerRefusesIsReportedOnceNeverRetried) {
  CountingApi api;
  Extender e(api.fake);
  const auto reply = e.service.call("bind", bind_body("p1", "default", "gpu-a"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::string error = json::parse(reply.body).value("Error", "");
  EXPECT_NE(error.find("etcd is down"), std::string::npos) << error;
  std::this_thread::sleep_for(300ms);  // anything retried in the background would show by now
  EXPECT_EQ(api.requests, 1);
  EXPECT_EQ(api.last_path, "/api/v1/namespaces/default/pods/p1/binding");
  EXPECT_EQ(e.service.counters().bind_errors, 1U);
}

json filter_args(const json& names) {
  json pod = pending_pod("p1");
  return {{"Pod", pod}, {"NodeNames", names}};
}

// Issue 30: 690k names unknown to the cluster held the lock for seconds and made a 105 MB
// answer. Unknown and repeated names are dropped first: the answer names the cache's nodes only.
TEST(ExtenderFilter, UnknownAndRepeatedNodeNamesAreDroppedBeforeAnyWork) {
  CountingApi api;
  Extender e(api.fake);
  json names = json::array();
  for (int i = 0; i < 200000; ++i) names.push_back(fmt::format("ghost-{}", i));
  for (int i = 0; i < 1000; ++i) names.push_back("gpu-a");
  names.push_back("gpu-b");
  // A pod that fits nowhere is answered with every offered node's explanation.
  json args = filter_args(names);
  args["Pod"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8";
  args["Pod"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8";
  const auto reply = e.service.call("filter", args.dump());
  ASSERT_EQ(reply.status, 200) << reply.body.substr(0, 300);
  EXPECT_LT(reply.body.size(), 4096U) << reply.body.substr(0, 300);
  const json answer = json::parse(reply.body);
  const json& failed =
      answer["FailedNodes"].empty() ? answer["FailedAndUnresolvableNodes"] : answer["FailedNodes"];
  EXPECT_EQ(failed.size(), 2U) << reply.body;
  EXPECT_EQ(e.service.counters().unknown_nodes, 200000U + 999U);
  // A placeable pod among the same offer: placed on a node of the cache.
  const auto placed = e.service.call("filter", filter_args(names).dump());
  ASSERT_EQ(placed.status, 200);
  const json kept = json::parse(placed.body)["NodeNames"];
  ASSERT_EQ(kept.size(), 1U) << placed.body;
  EXPECT_TRUE(kept[0] == "gpu-a" || kept[0] == "gpu-b");
  // Prioritize likewise scores only the known nodes, once each.
  const auto scores = e.service.call("prioritize", filter_args(names).dump());
  EXPECT_EQ(json::parse(scores.body).size(), 2U) << scores.body.substr(0, 300);
}

// The verbs behind an HTTP server as `gpuorch extender` serves them, with credentials required.
struct Served {
  Served(httplib::Server& server, ExtenderService& service, ExtenderAuth& auth) : http(server) {
    port = bind_extender_http(http, service, "127.0.0.1", 0, &auth);
    thread = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~Served() {
    http.stop();
    thread.join();
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  httplib::Server& http;
  int port = 0;
  std::thread thread;
};

TEST(ExtenderAuth, TheVerbsNeedTheBearerTokenTheProbesDoNot) {
  CountingApi api;
  Extender e(api.fake);
  ExtenderAuth auth({.token = "s3cret-token", .client_certs = false, .log = {}});
  httplib::Server http;
  Served s(http, e.service, auth);
  httplib::Client c("127.0.0.1", s.port);
  const std::string body = bind_body("p1", "default", "gpu-a");
  for (const char* verb : {"/bind", "/filter", "/prioritize"}) {
    const auto none = c.Post(verb, body, "application/json");
    ASSERT_TRUE(none) << verb;
    EXPECT_EQ(none->status, 403) << verb;
    const auto wrong =
        c.Post(verb, {{"Authorization", "Bearer s3cret-tokem"}}, body, "application/json");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 403);
  }
  EXPECT_EQ(api.requests, 0);
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_EQ(c.Get("/readyz")->status, 200);
  const auto right =
      c.Post("/bind", {{"Authorization", "Bearer s3cret-token"}}, body, "application/json");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(api.requests, 1);  // through to the API server (which refuses it)
}

// mTLS as kube-scheduler does it (tlsConfig certFile/keyFile): a client certificate that the
// --client-ca-file CA signed opens the verbs; no certificate gets 403, the probes stay open.
TEST(ExtenderAuth, TheVerbsNeedAClientCertificateFromTheClientCa) {
  CountingApi api;
  Extender e(api.fake);
  const auto& files = test::tls_files();
  httplib::SSLServer https(files.path("server.crt").c_str(), files.path("server.key").c_str());
  ASSERT_TRUE(https.is_valid());
  accept_client_certificates(https, files.path("ca.crt"));
  ExtenderAuth auth({.token = "", .client_certs = true, .log = {}});
  Served s(https, e.service, auth);
  const std::string body = bind_body("p1", "default", "gpu-a");

  httplib::SSLClient anonymous("127.0.0.1", s.port);
  anonymous.set_ca_cert_path(files.path("ca.crt").c_str());
  anonymous.enable_server_certificate_verification(true);
  const auto health = anonymous.Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  const auto refused = anonymous.Post("/bind", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(api.requests, 0);

  httplib::SSLClient scheduler("127.0.0.1", s.port, files.path("client.crt"),
                               files.path("client.key"));
  scheduler.set_ca_cert_path(files.path("ca.crt").c_str());
  scheduler.enable_server_certificate_verification(true);
  const auto bound = scheduler.Post("/bind", body, "application/json");
  ASSERT_TRUE(bound) << httplib::to_string(bound.error());
  EXPECT_EQ(bound->status, 200) << bound->body;
  EXPECT_EQ(api.requests, 1);
}

TEST(ExtenderAuth, TokenFile) {
  test::TempDir dir;
  test::write_text(dir.file("token"), "  abc-123 \nsecond line\n");
  EXPECT_EQ(read_auth_token(dir.file("token")), "abc-123");
  test::write_text(dir.file("empty"), "\n");
  EXPECT_THROW((void)read_auth_token(dir.file("empty")), base::InputError);
  EXPECT_THROW((void)read_auth_token(dir.file("missing")), base::InputError);
  EXPECT_THROW((void)read_auth_token("/dev/zero"), base::InputError);
}

}  // namespace
}  // namespace gpuorch::k8s
