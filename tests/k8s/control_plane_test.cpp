// The test control plane itself (support/control_plane.hpp, scripts/k8s-testenv): the real
// kube-apiserver answers over TLS verified with the run's CA, authenticates client certificates
// and static tokens, authorizes with RBAC, keeps its data and port across a restart, and the
// upstream kube-scheduler binds a pod. Spoken to through libcurl's C API, not gpuorch's client.
#include "support/control_plane.hpp"

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

namespace gpuorch::test {
namespace {

struct Http {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string error;
};

struct Request {
  std::string method = "GET";
  std::string body;  // JSON
  std::string ca_file;
  std::string token;
  std::string cert;  // client certificate and key (PEM files)
  std::string key;
};

size_t append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

Http http(const std::string& url, const Request& req) {
  Http r;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    r.code = CURLE_FAILED_INIT;
    return r;
  }
  char error[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!req.token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + req.token).c_str());
  }
  if (!req.body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  if (!req.body.empty()) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!req.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, req.ca_file.c_str());
  if (!req.cert.empty()) curl_easy_setopt(curl, CURLOPT_SSLCERT, req.cert.c_str());
  if (!req.key.empty()) curl_easy_setopt(curl, CURLOPT_SSLKEY, req.key.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  r.code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  r.error = error[0] != '\0' ? error : curl_easy_strerror(r.code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return r;
}

Request admin(const ControlPlane& cp) {
  Request req;
  req.ca_file = cp.ca_file();
  req.token = cp.admin_token();
  return req;
}

Request with_token(const ControlPlane& cp, std::string token) {
  Request req;
  req.ca_file = cp.ca_file();
  req.token = std::move(token);
  return req;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Whether the JSON `body` holds `member` ("key":value), whatever the spacing after the colons.
bool has(std::string body, const std::string& member) {
  for (std::string::size_type at; (at = body.find("\": ")) != std::string::npos;) {
    body.erase(at + 2, 1);
  }
  return body.find(member) != std::string::npos;
}

// A name no other test process uses against its own control plane either (one per process).
std::string unique_name(const std::string& prefix) {
  return prefix + "-" + std::to_string(::getpid());
}

TEST(ControlPlane, ServesTlsAuthenticatesAndAuthorizes) {
  ControlPlane& cp = ControlPlane::shared();
  ASSERT_EQ(cp.server().rfind("https://127.0.0.1:", 0), 0u) << cp.server();

  // /readyz over TLS, the serving certificate verified against the run's CA (and host 127.0.0.1).
  Request anonymous;
  anonymous.ca_file = cp.ca_file();
  const Http ready = http(cp.server() + "/readyz", anonymous);
  ASSERT_EQ(ready.code, CURLE_OK) << ready.error;
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok");

  // Without the CA the certificate is not trusted: the client refuses before any HTTP.
  const Http untrusted = http(cp.server() + "/readyz", Request{});
  EXPECT_EQ(untrusted.code, CURLE_PEER_FAILED_VERIFICATION) << untrusted.error;

  // The real version, stamped at build time.
  const Http version = http(cp.server() + "/version", admin(cp));
  ASSERT_EQ(version.code, CURLE_OK) << version.error;
  EXPECT_TRUE(has(version.body, R"("gitVersion":"v1.37.2")")) << version.body;

  const std::string pods = cp.server() + "/api/v1/namespaces/default/pods";
  const Http by_token = http(pods, admin(cp));
  ASSERT_EQ(by_token.code, CURLE_OK) << by_token.error;
  EXPECT_EQ(by_token.status, 200) << by_token.body;
  EXPECT_TRUE(has(by_token.body, R"("kind":"PodList")")) << by_token.body;

  // Client-certificate authentication (CN=gpuorch-admin, O=system:masters).
  Request by_cert;
  by_cert.ca_file = cp.ca_file();
  by_cert.cert = cp.dir() + "/pki/admin.crt";
  by_cert.key = cp.dir() + "/pki/admin.key";
  const Http cert = http(pods, by_cert);
  ASSERT_EQ(cert.code, CURLE_OK) << cert.error;
  EXPECT_EQ(cert.status, 200) << cert.body;

  // Authenticated, but RBAC grants it nothing: 403 with the user named.
  const Http nobody = http(pods, with_token(cp, first_line(cp.dir() + "/nobody-token")));
  ASSERT_EQ(nobody.code, CURLE_OK) << nobody.error;
  EXPECT_EQ(nobody.status, 403) << nobody.body;
  EXPECT_NE(nobody.body.find("gpuorch-test-nobody"), std::string::npos) << nobody.body;

  // A token the server does not know: 401 (not anonymous access).
  const Http unknown = http(pods, with_token(cp, "not-a-token-of-this-cluster"));
  ASSERT_EQ(unknown.code, CURLE_OK) << unknown.error;
  EXPECT_EQ(unknown.status, 401) << unknown.body;

  // The kubeconfigs name the server and carry their credentials inline.
  const std::string cert_config = read_file(cp.kubeconfig());
  EXPECT_NE(cert_config.find("server: " + cp.server()), std::string::npos);
  EXPECT_NE(cert_config.find("client-certificate-data: "), std::string::npos);
  EXPECT_NE(cert_config.find("certificate-authority-data: "), std::string::npos);
  EXPECT_NE(read_file(cp.token_kubeconfig()).find("token: " + cp.admin_token()), std::string::npos);
  const std::string nobody_config = read_file(cp.nobody_kubeconfig());
  EXPECT_NE(nobody_config.find("token: "), std::string::npos);
  EXPECT_EQ(nobody_config.find(cp.admin_token()), std::string::npos);

  // Pods are admitted without a ServiceAccount (no controller-manager creates `default` here).
  const Http pod = http(pods, [&] {
    Request req = admin(cp);
    req.method = "POST";
    req.body = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + unique_name("admitted") +
               R"("},"spec":{"containers":[{"name":"c","image":"registry.invalid/x"}]}})";
    return req;
  }());
  ASSERT_EQ(pod.code, CURLE_OK) << pod.error;
  EXPECT_EQ(pod.status, 201) << pod.body;
}

TEST(ControlPlane, RestartKeepsPortAndData) {
  ControlPlane& cp = ControlPlane::shared();
  const std::string server = cp.server();
  const std::string name = unique_name("kept");
  const std::string configmaps = cp.server() + "/api/v1/namespaces/default/configmaps";

  Request create = admin(cp);
  create.method = "POST";
  create.body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                R"("},"data":{"answer":"42"}})";
  const Http created = http(configmaps, create);
  ASSERT_EQ(created.code, CURLE_OK) << created.error;
  ASSERT_EQ(created.status, 201) << created.body;

  cp.restart_apiserver();
  EXPECT_EQ(cp.server(), server);

  // The same URL, the same CA: the restarted server has the ConfigMap from etcd.
  const Http got = http(configmaps + "/" + name, admin(cp));
  ASSERT_EQ(got.code, CURLE_OK) << got.error;
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(has(got.body, R"("answer":"42")")) << got.body;
}

TEST(ControlPlane, KubeSchedulerBindsAPod) {
  ControlPlane& cp = ControlPlane::shared();
  cp.start_kube_scheduler();
  cp.start_kube_scheduler();  // once per process; a second call is a no-op

  const std::string node = unique_name("node");
  Request create_node = admin(cp);
  create_node.method = "POST";
  create_node.body = R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + node +
                     R"(","labels":{"kubernetes.io/hostname":")" + node +
                     R"("}},"status":{"allocatable":{"cpu":"4","memory":"8Gi","pods":"10"},)"
                     R"("capacity":{"cpu":"4","memory":"8Gi","pods":"10"}}})";
  const Http n = http(cp.server() + "/api/v1/nodes", create_node);
  ASSERT_EQ(n.code, CURLE_OK) << n.error;
  ASSERT_EQ(n.status, 201) << n.body;
  // No not-ready taint: TaintNodesByCondition is off, since no controller would lift it.
  EXPECT_EQ(n.body.find("node.kubernetes.io/not-ready"), std::string::npos) << n.body;

  const std::string pod = unique_name("scheduled");
  Request create_pod = admin(cp);
  create_pod.method = "POST";
  // Pinned to this node by label: other tests of the same process may add nodes too.
  create_pod.body = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + pod +
                    R"("},"spec":{"nodeSelector":{"kubernetes.io/hostname":")" + node +
                    R"("},"containers":[{"name":"c","image":"registry.invalid/x",)"
                    R"("resources":{"requests":{"cpu":"1"}}}]}})";
  const std::string pods = cp.server() + "/api/v1/namespaces/default/pods";
  const Http p = http(pods, create_pod);
  ASSERT_EQ(p.code, CURLE_OK) << p.error;
  ASSERT_EQ(p.status, 201) << p.body;

  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    body = http(pods + "/" + pod, admin(cp)).body;
    if (has(body, "\"nodeName\":\"" + node + "\"")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(has(body, "\"nodeName\":\"" + node + "\""))
      << "kube-scheduler did not bind the pod within 30 s:\n"
      << body << "\nscheduler log: " << cp.dir() << "/logs/kube-scheduler.log";
}

}  // namespace
}  // namespace gpuorch::test
