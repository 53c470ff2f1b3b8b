#pragma once
// A TLS proxy in front of the real kube-apiserver for fault tests: every request is passed on
// (watches streamed) with the admin's token, except those a test's fault rule claims, which get
// an error status, garbage, a dropped connection or no answer at all. What a real server does
// on its own only in bad moments (a 503 while it restarts, a proxy's HTML page, a reset), on
// demand, for `gpuorch scheduler` and the other clients.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "k8s/fake_api_server.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

enum class FaultKind { kStatus, kGarbage, kDrop, kStall };

struct Fault {
  FaultKind kind = FaultKind::kStatus;
  int status = 503;
};

class ApiProxy {
 public:
  using Rule = std::function<std::optional<Fault>(const httplib::Request& req)>;

  // upstream: "https://127.0.0.1:PORT" of the real API server, its CA file and a token.
  ApiProxy(std::string upstream, std::string ca_file, std::string token)
      : ca_file_(std::move(ca_file)), token_(std::move(token)) {
    const auto colon = upstream.rfind(':');
    host_ = upstream.substr(std::string("https://").size(), colon - 8);
    port_ = std::stoi(upstream.substr(colon + 1));
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      forward(req, res);
    };
    auto& http = server_.http();
    http.Get(".*", handler);
    http.Post(".*", handler);
    http.Put(".*", handler);
    http.Patch(".*", handler);
    http.Delete(".*", handler);
    server_.start();
  }
  ~ApiProxy() { stopping_ = true; }
  ApiProxy(const ApiProxy&) = delete;
  ApiProxy& operator=(const ApiProxy&) = delete;

  void set_rule(Rule rule) {
    const std::lock_guard lock(mutex_);
    rule_ = std::move(rule);
  }
  // Every request seen, "METHOD target", in order.
  std::vector<std::string> seen() const {
    const std::lock_guard lock(mutex_);
    return seen_;
  }
  std::size_t count(const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& s : seen()) n += s.rfind(prefix, 0) == 0;
    return n;
  }

  // A kubeconfig that reaches the API server through this proxy (its own CA, any token).
  std::string kubeconfig(const TempDir& dir) const {
    const std::string path = dir.file("proxy-kubeconfig");
    write_text(path,
               "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n"
               "    server: " +
                   server_.server() + "\n    certificate-authority: " + tls_files().path("ca.crt") +
                   "\nusers:\n- name: u\n  user:\n    token: via-proxy\ncontexts:\n"
                   "- name: c\n  context:\n    cluster: proxy\n    user: u\n"
                   "    namespace: default\ncurrent-context: c\n");
    return path;
  }

 private:
  std::unique_ptr<httplib::SSLClient> upstream() const {
    auto c = std::make_unique<httplib::SSLClient>(host_, port_);
    c->set_ca_cert_path(ca_file_.c_str());
    c->enable_server_certificate_verification(true);
    c->set_url_encode(false);  // targets are passed on exactly as they came
    c->set_connection_timeout(std::chrono::seconds(5));
    c->set_read_timeout(std::chrono::seconds(5));
    return c;
  }

  httplib::Headers headers(const httplib::Request& req) const {
    httplib::Headers h{{"Authorization", "Bearer " + token_}};
    if (req.has_header("Content-Type"))
      h.emplace("Content-Type", req.get_header_value("Content-Type"));
    return h;
  }

  void forward(const httplib::Request& req, httplib::Response& res) {
    std::optional<Fault> fault;
    {
      const std::lock_guard lock(mutex_);
      seen_.push_back(req.method + " " + req.target);
      if (rule_) fault = rule_(req);
    }
    if (fault) {
      inject(*fault, res);
      return;
    }
    const bool watch = req.target.find("watch=1") != std::string::npos ||
                       req.target.find("watch=true") != std::string::npos;
    if (watch) {
      res.set_chunked_content_provider(
          "application/json",
          [this, target = req.target, h = headers(req)](std::size_t, httplib::DataSink& sink) {
            auto c = upstream();
            c->Get(target, h, [&](const char* data, std::size_t n) {
              return !stopping_.load() && sink.write(data, n);
            });
            sink.done();
            return true;
          });
      return;
    }
    httplib::Request up;
    up.method = req.method;
    up.path = req.target;
    up.headers = headers(req);
    up.body = req.body;
    auto c = upstream();
    const auto r = c->send(up);
    if (!r) {
      res.status = 502;
      return;
    }
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type").c_str());
  }

  void inject(const Fault& f, httplib::Response& res) {
    switch (f.kind) {
      case FaultKind::kStatus:
        res.status = f.status;
        res.set_content(
            R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected fault","reason":"ServiceUnavailable","code":)" +
                std::to_string(f.status) + "}",
            "application/json");
        break;
      case FaultKind::kGarbage:
        res.status = 200;
        res.set_content("<html>not the API server</html>{", "application/json");
        break;
      case FaultKind::kDrop:
        // Headers, then the connection ends without the body's end: a reset mid-answer.
        res.set_chunked_content_provider("application/json",
                                         [](std::size_t, httplib::DataSink&) { return false; });
        break;
      case FaultKind::kStall:
        // No answer until the test ends (or a minute passes).
        for (int i = 0; i < 6000 && !stopping_.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        res.status = 504;
        break;
    }
  }

  std::string host_;
  int port_ = 0;
  std::string ca_file_, token_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  Rule rule_;
  std::vector<std::string> seen_;
  FakeApiServer server_;  // last: stopped (and its handlers ended) before the rest goes
};

}  // namespace gpuorch::test
