#include "gpuorch/k8s/extender/extender_http.hpp"

#include <fmt/format.h>

#include <chrono>

#include "gpuorch/telemetry/http_server.hpp"

namespace gpuorch::k8s {

int bind_extender_http(httplib::Server& http, ExtenderService& service, const std::string& address,
                       int port, ExtenderAuth* auth) {
  for (const char* verb : {"filter", "prioritize", "bind"}) {
    http.Post(fmt::format("/{}", verb),
              [&service, verb](const httplib::Request& req, httplib::Response& res) {
                const ExtenderService::Reply r = service.call(verb, req.body);
                res.status = r.status;
                res.set_content(r.body, r.content_type.c_str());
              });
  }
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/readyz", [&service](const httplib::Request&, httplib::Response& res) {
    res.status = service.synced() ? 200 : 503;
    res.set_content(service.synced() ? "ok\n" : "informers not synced\n", "text/plain");
  });
  http.Get("/metrics", [&service](const httplib::Request&, httplib::Response& res) {
    res.set_content(service.metrics(), "text/plain; version=0.0.4");
  });
  // An ExtenderArgs carries a Pod and the candidate node names: about 25 bytes a node, so 8 MiB
  // holds a cluster of well over 100 000 nodes; larger bodies are refused (413). Bodies in
  // flight hold at most 64 MiB together, 32 MiB from one address (200 slow 8 MiB bodies pinned
  // 1.8 GB before, issue 30); kube-scheduler's own are ~130 KB at 5,000 nodes. The deadlines are
  // well inside kube-scheduler's 5 s httpTimeout for its own requests.
  telemetry::HttpLimits limits;
  limits.max_payload = std::size_t{8} << 20;
  limits.max_body_bytes_in_flight = std::size_t{64} << 20;
  limits.max_body_bytes_per_peer = std::size_t{32} << 20;
  limits.read_timeout = std::chrono::milliseconds(5000);
  limits.header_timeout = std::chrono::milliseconds(5000);
  limits.body_timeout = std::chrono::milliseconds(10000);
  limits.request_timeout = std::chrono::milliseconds(15000);
  if (auth != nullptr && auth->configured()) {
    limits.admit = [auth](const httplib::Request& req, httplib::Response& res) {
      return auth->admit(req, res);
    };
  }
  return telemetry::harden_and_bind(http, address, port, limits);
}

}  // namespace gpuorch::k8s
