// The API client against a local HTTPS stand-in (fake_api_server.hpp): requests and their
// headers, Status errors, TLS that is always verified (wrong CA, wrong host name, client
// certificates), token re-reading on 401, watch streams split at odd places, and servers that
// answer garbage, endless lines or huge bodies. The real kube-apiserver is in api_client_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "k8s/api_error_of.hpp"
#include "k8s/fake_api_server.hpp"
#include "support/net.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using test::FakeApiServer;

// The message of the std::runtime_error `f` throws (an ApiError is a failure here).
template <typename F>
std::string runtime_error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    ADD_FAILURE() << "expected a transport error, got ApiError: " << e.what();
    return {};
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing was thrown";
  return {};
}

const char* const kNotFound =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"x\" not found","reason":"NotFound","code":404})";

TEST(ApiClient, CallsHeadersAndStatusErrors) {
  FakeApiServer fake;
  std::mutex m;
  std::vector<httplib::Request> seen;
  const auto record = [&](const httplib::Request& req) {
    const std::lock_guard lock(m);
    seen.push_back(req);
  };
  fake.http().Get("/ok", [&](const httplib::Request& req, httplib::Response& res) {
    record(req);
    res.set_content(R"({"kind":"ConfigMap","data":{"a":"1"}})", "application/json");
  });
  fake.http().Get("/missing", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(kNotFound, "application/json");
  });
  fake.http().Get("/proxy", [](const httplib::Request&, httplib::Response& res) {
    res.status = 502;
    res.set_content("<html>\nbad gateway\n</html>", "text/html");
  });
  fake.http().Post("/items", [&](const httplib::Request& req, httplib::Response& res) {
    record(req);
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  fake.http().Patch("/items/a", [&](const httplib::Request& req, httplib::Response& res) {
    record(req);
    res.set_content(R"({"patched":true})", "application/json");
  });
  fake.http().Put("/items/a", [&](const httplib::Request& req, httplib::Response& res) {
    record(req);
    res.set_content(req.body, "application/json");
  });
  fake.http().Delete("/items/a", [&](const httplib::Request& req, httplib::Response& res) {
    record(req);
    res.set_content(R"({"kind":"Status","status":"Success"})", "application/json");
  });
  fake.start();

  auto config = fake.config();
  config.bearer_token = "secret-token";
  ApiClient api(config);
  EXPECT_EQ(api.get("/ok")["data"]["a"], "1");
  EXPECT_EQ(api.get("/ok")["kind"], "ConfigMap");
  EXPECT_EQ(api.create("/items", json{{"x", 1}}, /*dry_run=*/true)["x"], 1);
  EXPECT_EQ(api.patch("/items/a", json{{"y", 2}})["patched"], true);
  EXPECT_EQ(api.replace("/items/a", json{{"z", 3}})["z"], 3);
  api.remove("/items/a");

  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0].get_header_value("Authorization"), "Bearer secret-token");
  EXPECT_EQ(seen[0].get_header_value("Accept"), "application/json");
  EXPECT_EQ(seen[0].get_header_value("User-Agent").rfind("gpuorch/", 0), 0u);
  // Keep-alive: the second call came over the first call's connection.
  EXPECT_EQ(seen[0].remote_port, seen[1].remote_port);
  EXPECT_EQ(seen[2].get_param_value("dryRun"), "All");
  EXPECT_EQ(seen[2].get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(seen[2].body), (json{{"x", 1}}));
  EXPECT_EQ(seen[3].get_header_value("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(seen[4].method, "PUT");
  EXPECT_EQ(seen[5].method, "DELETE");

  const auto e = api_error_of([&] { api.get("/missing"); });
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.reason(), "NotFound");
  EXPECT_EQ(e.message(), "configmaps \"x\" not found");
  EXPECT_STREQ(e.what(), "GET /missing: 404 NotFound: configmaps \"x\" not found");
  // Not a Status: the body, on one line.
  const auto proxy = api_error_of([&] { api.get("/proxy"); });
  EXPECT_EQ(proxy.status(), 502);
  EXPECT_EQ(proxy.message(), "<html> bad gateway </html>");
  // The raw form returns any status.
  const auto raw = api.request("GET", "/missing", nullptr, {});
  EXPECT_EQ(raw.status, 404);
  EXPECT_EQ(json::parse(raw.body)["reason"], "NotFound");
}

TEST(ApiClient, ConcurrentCallersEachGetTheirAnswer) {
  FakeApiServer fake;
  fake.http().Get(R"(/n/(\d+))", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(json{{"n", std::stoi(req.matches[1].str())}}.dump(), "application/json");
  });
  fake.start();
  ApiClient api(fake.config());
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const int n = t * 100 + i;
        if (api.get("/n/" + std::to_string(n))["n"] == n) ++right;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), 100);
}

TEST(ApiClient, TlsIsAlwaysVerified) {
  // A CA that did not sign the server's certificate: refused, never silently accepted.
  {
    FakeApiServer fake;
    fake.http().Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    fake.start();
    auto config = fake.config();
    config.ca_pem = test::tls_files().pem("other-ca.crt");
    ApiClient api(config);
    const auto e = runtime_error_of([&] { api.get("/ok"); });
    EXPECT_EQ(e.rfind("TLS with " + fake.server() + " failed: ", 0), 0u) << e;
    // No CA at all: the system's CAs do not know the test CA either.
    config.ca_pem.clear();
    ApiClient system_cas(config);
    EXPECT_NE(runtime_error_of([&] { system_cas.get("/ok"); }).find("TLS"), std::string::npos);
  }
  // The right CA, but a certificate for another name: host name verification refuses it.
  {
    FakeApiServer fake("wronghost");
    fake.http().Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    fake.start();
    ApiClient api(fake.config());
    const auto e = runtime_error_of([&] { api.get("/ok"); });
    EXPECT_NE(e.find("TLS with"), std::string::npos) << e;
    EXPECT_NE(e.find("127.0.0.1"), std::string::npos) << e;
  }
  // A server that wants a client certificate: without one the handshake fails, with one it works.
  {
    FakeApiServer fake("server", /*require_client_cert=*/true);
    fake.http().Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"ok":true})", "application/json");
    });
    fake.start();
    ApiClient anonymous(fake.config());
    EXPECT_FALSE(runtime_error_of([&] { anonymous.get("/ok"); }).empty());
    auto config = fake.config();
    config.client_cert_pem = test::tls_files().pem("client.crt");
    config.client_key_pem = test::tls_files().pem("client.key");
    ApiClient alice(config);
    EXPECT_EQ(alice.get("/ok")["ok"], true);
  }
  // Nobody listening.
  {
    const int port = test::free_loopback_port();
    k8s::ClusterConfig config;
    config.server = "https://127.0.0.1:" + std::to_string(port);
    ApiClient api(config);
    EXPECT_EQ(runtime_error_of([&] { api.get("/ok"); }),
              "cannot reach https://127.0.0.1:" + std::to_string(port) + ": Connection refused");
  }
  EXPECT_THROW(ApiClient(k8s::ClusterConfig{.server = "http://127.0.0.1:80"}),
               std::invalid_argument);
}

TEST(ApiClient, TokenFileIsReReadOn401) {
  FakeApiServer fake;
  fake.http().Get("/ok", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer rotated") {
      res.status = 401;
      res.set_content(
          R"({"kind":"Status","code":401,"reason":"Unauthorized","message":"Unauthorized"})",
          "application/json");
      return;
    }
    res.set_content(R"({"ok":true})", "application/json");
  });
  fake.start();
  const test::TempDir dir;
  auto config = fake.config();
  config.bearer_token = "expired";
  config.token_file = dir.file("token");
  test::write_text(config.token_file, "expired\n");
  ApiClient api(config);
  const auto e = api_error_of([&] { api.get("/ok"); });  // the file holds nothing new
  EXPECT_EQ(e.status(), 401);
  EXPECT_EQ(e.reason(), "Unauthorized");
  test::write_text(config.token_file, "rotated\n");  // the kubelet rotated the token
  EXPECT_EQ(api.get("/ok")["ok"], true);
  EXPECT_EQ(api.get("/ok")["ok"], true);  // and it is kept
}

TEST(ApiClient, WatchSplitsLinesAndStops) {
  FakeApiServer fake;
  // Two events cut at odd places, a blank line, then a third and silence.
  const std::vector<std::string> pieces = {R"({"type":"ADDED","object":{"n":1}})"
                                           "\n"
                                           R"({"type":"MOD)",
                                           R"(IFIED","object":{"n":2}})", "\r\n\n",
                                           R"({"type":"DELETED","object":{"n":3}})"
                                           "\n"};
  fake.http().Get("/w", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [&, i = std::size_t{0}](std::size_t, httplib::DataSink& sink) mutable {
          if (i < pieces.size()) {
            const auto& p = pieces[i++];
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return sink.write(p.data(), p.size());
          }
          if (fake.stopping()) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return true;
        });
  });
  fake.http().Get("/ends", [](const httplib::Request&, httplib::Response& res) {
    // The last event has no newline: it is still an event.
    res.set_content(R"({"n":1})"
                    "\n"
                    R"({"n":2})",
                    "application/json");
  });
  fake.http().Get("/forbidden", [](const httplib::Request&, httplib::Response& res) {
    res.status = 403;
    res.set_content(
        R"({"kind":"Status","code":403,"reason":"Forbidden","message":"configmaps is forbidden"})",
        "application/json");
  });
  fake.start();
  ApiClient api(fake.config());

  std::vector<int> got;
  std::atomic<bool> stop{false};
  std::thread stopper;
  const auto started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point stop_at;
  api.watch(
      "/w",
      [&](const json& event) {
        got.push_back(event["object"]["n"].get<int>());
        if (got.size() == 3) {
          // Stop from another thread while the stream is silent.
          stopper = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            stop_at = std::chrono::steady_clock::now();
            stop = true;
          });
        }
        return true;
      },
      stop);
  const auto returned = std::chrono::steady_clock::now();
  stopper.join();
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
  EXPECT_LT(returned - stop_at, std::chrono::milliseconds(500));
  EXPECT_LT(returned - started, std::chrono::seconds(5));

  // on_event returning false ends the watch; the server ending the stream ends it too.
  std::atomic<bool> never{false};
  got.clear();
  api.watch(
      "/w",
      [&](const json& e) {
        got.push_back(e["object"]["n"].get<int>());
        return false;
      },
      never);
  EXPECT_EQ(got, (std::vector<int>{1}));
  got.clear();
  api.watch(
      "/ends",
      [&](const json& e) {
        got.push_back(e["n"].get<int>());
        return true;
      },
      never);
  EXPECT_EQ(got, (std::vector<int>{1, 2}));

  const auto e = api_error_of([&] {
    api.watch(
        "/forbidden", [](const json&) { return true; }, never);
  });
  EXPECT_EQ(e.status(), 403);
  EXPECT_EQ(e.message(), "configmaps is forbidden");
}

TEST(ApiClient, HostileAnswersGiveCleanErrors) {
  FakeApiServer fake;
  fake.http().Get("/garbage", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"items\": [1, 2,", "application/json");
  });
  fake.http().Get("/deep", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(100000, '[') + std::string(100000, ']'), "application/json");
  });
  // Endless: megabyte after megabyte, never a newline, never an end.
  const auto endless = [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](std::size_t, httplib::DataSink& sink) {
      static const std::string chunk(1 << 20, 'x');
      return !fake.stopping() && sink.write(chunk.data(), chunk.size());
    });
  };
  fake.http().Get("/huge", endless);
  fake.http().Get("/watch-endless-line", endless);
  fake.http().Get("/watch-garbage", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"type\":\"ADDED\"}\nnot json at all\n", "application/json");
  });
  fake.start();
  ApiClient api(fake.config());

  auto e = runtime_error_of([&] { api.get("/garbage"); });
  EXPECT_NE(e.find("/garbage: the server sent invalid JSON"), std::string::npos) << e;
  e = runtime_error_of([&] { api.get("/deep"); });
  EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e;
  e = runtime_error_of([&] { api.get("/huge"); });
  EXPECT_NE(e.find("the answer is larger than 67108864 bytes"), std::string::npos) << e;
  // The handle that aborted is still good for the next call.
  e = runtime_error_of([&] { api.get("/garbage"); });
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;

  std::atomic<bool> never{false};
  int events = 0;
  const auto count = [&](const json&) {
    ++events;
    return true;
  };
  e = runtime_error_of([&] { api.watch("/watch-endless-line", count, never); });
  EXPECT_NE(e.find("an event is larger than 16777216 bytes"), std::string::npos) << e;
  EXPECT_EQ(events, 0);
  e = runtime_error_of([&] { api.watch("/watch-garbage", count, never); });
  EXPECT_NE(e.find("watch " + fake.server() + "/watch-garbage: the server sent invalid JSON"),
            std::string::npos)
      << e;
  EXPECT_EQ(events, 1);

  // Smaller bounds, as a caller may set them.
  ApiClientOptions small;
  small.max_body_bytes = 1000;
  ApiClient tight(fake.config(), small);
  e = runtime_error_of([&] { tight.get("/deep"); });
  EXPECT_NE(e.find("larger than 1000 bytes"), std::string::npos) << e;
}

}  // namespace
}  // namespace gpuorch::k8s
