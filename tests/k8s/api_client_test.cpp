// The API client and the informer against the real kube-apiserver (support/control_plane.hpp):
// a ConfigMap's whole life, optimistic concurrency, server-side dry run, client-certificate and
// token kubeconfigs, RBAC's 403 and a bad token's 401 with the server's own words, a CA that
// does not vouch for the server, and an informer that survives an API server restart. Each TEST
// pays for a control plane start, so each checks several things.
#include "gpuorch/k8s/api/api_client.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/informer.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/api_error_of.hpp"
#include "k8s/fake_api_server.hpp"
#include "support/control_plane.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using test::ControlPlane;
using test::eventually;

const std::string kConfigMaps = "/api/v1/namespaces/default/configmaps";

json configmap(const std::string& name, const json& data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", {{"app", "gpuorch-test"}}}}},
          {"data", data}};
}

TEST(ApiClientControlPlane, ConfigMapLifeConflictsAndDryRun) {
  auto& plane = ControlPlane::shared();
  ApiClient api(load_kubeconfig(plane.kubeconfig()));
  EXPECT_EQ(api.config().server, plane.server());

  // Create, get, replace, patch (merge and JSON patch), delete.
  const auto created = api.create(kConfigMaps, configmap("life", {{"a", "1"}}));
  EXPECT_EQ(created["data"]["a"], "1");
  const auto v1 = created["metadata"]["resourceVersion"].get<std::string>();
  auto obj = api.get(kConfigMaps + "/life");
  EXPECT_EQ(obj["metadata"]["resourceVersion"], v1);
  obj["data"]["b"] = "2";
  const auto replaced = api.replace(kConfigMaps + "/life", obj);
  EXPECT_EQ(replaced["data"]["b"], "2");
  EXPECT_NE(replaced["metadata"]["resourceVersion"], v1);
  EXPECT_EQ(api.patch(kConfigMaps + "/life", {{"data", {{"c", "3"}}}})["data"],
            (json{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  const auto patched =
      api.patch(kConfigMaps + "/life", json::array({{{"op", "remove"}, {"path", "/data/a"}}}),
                "application/json-patch+json");
  EXPECT_FALSE(patched["data"].contains("a"));
  EXPECT_EQ(api.get(kConfigMaps)["items"].size(), 1u);

  // A stale resourceVersion: 409 Conflict with the server's message.
  auto stale = obj;  // read at v1
  stale["data"]["d"] = "4";
  const auto conflict = api_error_of([&] { api.replace(kConfigMaps + "/life", stale); });
  EXPECT_EQ(conflict.status(), 409);
  EXPECT_EQ(conflict.reason(), "Conflict");
  EXPECT_NE(conflict.message().find("the object has been modified"), std::string::npos)
      << conflict.message();
  const auto exists = api_error_of([&] { api.create(kConfigMaps, configmap("life", {})); });
  EXPECT_EQ(exists.status(), 409);
  EXPECT_EQ(exists.reason(), "AlreadyExists");

  // update_with_retry against a concurrent writer: the first PUT loses, the retry wins, and
  // neither write is lost.
  ApiClient other(load_kubeconfig(plane.token_kubeconfig()));
  int calls = 0;
  const auto updated = update_with_retry(api, kConfigMaps + "/life", [&](json& o) {
    if (++calls == 1) other.patch(kConfigMaps + "/life", {{"data", {{"other", "x"}}}});
    o["data"]["mine"] = std::to_string(calls);
  });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(updated["data"]["mine"], "2");
  EXPECT_EQ(updated["data"]["other"], "x");
  // A writer that always gets in first exhausts the attempts: the last 409 comes out.
  calls = 0;
  const auto lost = api_error_of([&] {
    update_with_retry(
        api, kConfigMaps + "/life",
        [&](json& o) {
          ++calls;
          other.patch(kConfigMaps + "/life", {{"data", {{"other", std::to_string(calls)}}}});
          o["data"]["mine"] = "never";
        },
        3);
  });
  EXPECT_EQ(lost.status(), 409);
  EXPECT_EQ(calls, 3);

  // Server-side dry run: validated and answered, nothing stored.
  const auto dry = api.create(kConfigMaps, configmap("dry", {{"x", "y"}}), /*dry_run=*/true);
  EXPECT_EQ(dry["metadata"]["name"], "dry");
  EXPECT_EQ(api_error_of([&] { api.get(kConfigMaps + "/dry"); }).status(), 404);
  // And it still validates: a bad name is refused.
  const auto invalid =
      api_error_of([&] { api.create(kConfigMaps, configmap("Bad_Name", {}), true); });
  EXPECT_EQ(invalid.status(), 422);
  EXPECT_EQ(invalid.reason(), "Invalid");

  api.remove(kConfigMaps + "/life");
  const auto gone = api_error_of([&] { api.get(kConfigMaps + "/life"); });
  EXPECT_EQ(gone.status(), 404);
  EXPECT_EQ(gone.reason(), "NotFound");
  EXPECT_EQ(gone.message(), "configmaps \"life\" not found");
  EXPECT_EQ(api_error_of([&] { api.remove(kConfigMaps + "/life"); }).status(), 404);
}

TEST(ApiClientControlPlane, AuthenticationAuthorizationAndTls) {
  auto& plane = ControlPlane::shared();
  // Client certificate and token kubeconfigs both get in.
  const auto cert = load_kubeconfig(plane.kubeconfig());
  EXPECT_FALSE(cert.client_cert_pem.empty());
  EXPECT_EQ(ApiClient(cert).get("/api/v1/namespaces/default")["metadata"]["name"], "default");
  const auto token = load_kubeconfig(plane.token_kubeconfig());
  EXPECT_FALSE(token.bearer_token.empty());
  EXPECT_EQ(ApiClient(token).get("/api/v1/namespaces/default")["metadata"]["name"], "default");

  // Authenticated but without rights: 403 and the RBAC message, for calls and watches alike.
  ApiClient nobody(load_kubeconfig(plane.nobody_kubeconfig()));
  const auto forbidden = api_error_of([&] { nobody.get(kConfigMaps); });
  EXPECT_EQ(forbidden.status(), 403);
  EXPECT_EQ(forbidden.reason(), "Forbidden");
  EXPECT_NE(forbidden.message().find("cannot list resource \"configmaps\""), std::string::npos)
      << forbidden.message();
  std::atomic<bool> stop{false};
  const auto watch_forbidden = api_error_of([&] {
    nobody.watch(
        kConfigMaps + "?watch=1", [](const json&) { return true; }, stop);
  });
  EXPECT_EQ(watch_forbidden.status(), 403);

  // A bad token: 401. From a file, the token is re-read after the 401 (a rotated token).
  ClusterConfig bad;
  bad.server = plane.server();
  bad.ca_pem = test::read_text(plane.ca_file());
  bad.bearer_token = "not-a-token";
  const auto unauthorized = api_error_of([&] { ApiClient(bad).get(kConfigMaps); });
  EXPECT_EQ(unauthorized.status(), 401);
  EXPECT_EQ(unauthorized.reason(), "Unauthorized");
  const test::TempDir dir;
  bad.token_file = dir.file("token");
  test::write_text(bad.token_file, "not-a-token\n");
  ApiClient rotating(bad);
  EXPECT_EQ(api_error_of([&] { rotating.get(kConfigMaps); }).status(), 401);
  test::write_text(bad.token_file, plane.admin_token() + "\n");
  EXPECT_TRUE(rotating.get(kConfigMaps).contains("items"));

  // A CA that did not sign the server's certificate, or the system's CAs: refused.
  auto wrong_ca = cert;
  wrong_ca.ca_pem = test::tls_files().pem("other-ca.crt");
  try {
    ApiClient(wrong_ca).get(kConfigMaps);
    ADD_FAILURE() << "a server certificate from an unknown CA was accepted";
  } catch (const ApiError& e) {
    ADD_FAILURE() << "the request got through: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("TLS with " + plane.server() + " failed", 0), 0u)
        << e.what();
  }
  auto system_cas = cert;
  system_cas.ca_pem.clear();
  EXPECT_THROW(ApiClient(system_cas).get(kConfigMaps), std::runtime_error);
}

// What an informer's handlers heard, "add default/x", in order.
struct Heard {
  std::mutex m;
  std::vector<std::string> lines;
  void add(const std::string& what, const json& obj) {
    const std::lock_guard lock(m);
    lines.push_back(what + " " + object_key(obj));
  }
  bool has(const std::string& line) {
    const std::lock_guard lock(m);
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }
  std::size_t count(const std::string& line) {
    const std::lock_guard lock(m);
    return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
  }
};

TEST(InformerControlPlane, SeesChangesAndSurvivesARestart) {
  auto& plane = ControlPlane::shared();
  ApiClient api(load_kubeconfig(plane.kubeconfig()));
  api.create(kConfigMaps, configmap("before", {{"v", "0"}}));

  Heard heard;
  InformerHandlers handlers;
  handlers.on_add = [&](const json& o) { heard.add("add", o); };
  handlers.on_update = [&](const json& o) { heard.add("update", o); };
  handlers.on_delete = [&](const json& o) { heard.add("delete", o); };
  std::atomic<int> syncs{0};
  handlers.on_synced = [&] { ++syncs; };
  InformerOptions options;
  options.backoff_max_seconds = 2;  // come back quickly after the restart
  Informer informer(api, kConfigMaps, handlers, "", "app=gpuorch-test", options);
  std::atomic<bool> stop{false};
  std::thread runner([&] { informer.run(stop); });

  ASSERT_TRUE(eventually([&] { return informer.synced(); }, std::chrono::seconds(30)));
  EXPECT_TRUE(heard.has("add default/before"));
  EXPECT_TRUE(informer.get("default/before"));

  api.create(kConfigMaps, configmap("x", {{"v", "1"}}));
  EXPECT_TRUE(eventually([&] { return heard.has("add default/x"); }));
  api.patch(kConfigMaps + "/x", {{"data", {{"v", "2"}}}});
  EXPECT_TRUE(eventually([&] { return heard.has("update default/x"); }));
  EXPECT_TRUE(eventually([&] {
    const auto x = informer.get("default/x");
    return x && (*x)["data"]["v"] == "2";
  }));
  api.remove(kConfigMaps + "/x");
  EXPECT_TRUE(eventually([&] { return heard.has("delete default/x"); }));
  EXPECT_FALSE(informer.get("default/x"));

  // The API server goes away and comes back with the same data: the informer reconnects (or
  // relists), adds nothing twice, and sees what changed after the restart.
  plane.restart_apiserver();
  api.create(kConfigMaps, configmap("after", {{"v", "1"}}));
  api.patch(kConfigMaps + "/before", {{"data", {{"v", "1"}}}});
  EXPECT_TRUE(eventually([&] { return heard.has("add default/after"); }, std::chrono::seconds(60)));
  EXPECT_TRUE(eventually(
      [&] {
        const auto b = informer.get("default/before");
        return b && (*b)["data"]["v"] == "1";
      },
      std::chrono::seconds(60)));
  EXPECT_EQ(heard.count("add default/before"), 1u);
  EXPECT_EQ(heard.count("add default/after"), 1u);
  EXPECT_EQ(heard.count("delete default/x"), 1u);
  EXPECT_EQ(informer.list().size(), 2u);
  // The restarted server's watch cache begins after its own start-up writes, so the watch from
  // before the restart is answered with a 410 ERROR event ("too old resource version"): the
  // informer relisted, and each (re)list was followed by on_synced.
  EXPECT_GE(informer.relists(), 1u);
  EXPECT_EQ(syncs.load(), 1 + static_cast<int>(informer.relists()));

  stop = true;
  runner.join();
}

}  // namespace
}  // namespace gpuorch::k8s
