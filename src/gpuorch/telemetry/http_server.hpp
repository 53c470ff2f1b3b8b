#pragma once
// One hardening for every cpp-httplib server gpuorch runs (the exporter's /metrics, `gpuorch
// scheduler`'s /metrics, /healthz, /readyz, `gpuorch extender`'s verbs). httplib parses and
// routes; the connections are gpuorch's own, because httplib bounds only the silence between two
// reads: 600 peers sending a header line every 0.8 s held all 512 threads of a server, 200 slow
// 8 MiB bodies pinned 1.8 GB, and a chunked or length-less body, or a header line without an end,
// had no size limit at all (issue 30). Here:
// - our own accept loop (in place of httplib's, see http_server.cpp) with a thread per connection
//   up to `max_connections` (beyond, new connections wait in the listen backlog), at most
//   `max_connections_per_peer` from one address (more are answered 503 and closed at once); not
//   on loopback, where every local process shares one address and the cap would shut the
//   legitimate local client (kube-scheduler beside the extender) out together with an attacker:
//   there the global cap and the deadlines bound a local peer, and credentials (`admit`) tell
//   kube-scheduler from the rest;
// - deadlines per request, checked in every read and write (telemetry/http_stream.hpp): the
//   request line and headers (a TLS handshake included) within `header_timeout` of its first
//   byte, the body within `body_timeout` of the headers, the answer written within
//   `request_timeout` of the first byte; silence within a request over `read_timeout`; an idle
//   keep-alive connection closed after `keep_alive_timeout` or `keep_alive_max_count` requests;
// - sizes: request line and headers at most `max_header_bytes`; a body needs a Content-Length
//   (chunked or length-less bodies get 411) of at most `max_payload` (else 413 before a byte of
//   it is read), and bodies in flight hold at most `max_body_bytes_in_flight` together and
//   `max_body_bytes_per_peer` per address (else 503, Retry-After); a refused request's
//   connection is closed, its body never read;
// - memory back to the system (malloc_trim) after a large body;
// - `admit`: the caller's check of a request's headers (credentials) before its body is read;
// - no SO_REUSEPORT: a second server on a bound port fails to bind instead of sharing it;
// - a listen backlog of `backlog` (httplib's is 5); TCP_NODELAY.
// The caller must not set httplib's pre-routing or Expect: 100-continue handlers, nor
// new_task_queue: they are the hooks this uses.
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace gpuorch::telemetry {

struct HttpLimits {
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 64;
  bool cap_loopback_peers = false;  // tests: apply the per-peer cap to 127.0.0.0/8 and ::1 too
  std::chrono::milliseconds read_timeout{1000};
  std::chrono::milliseconds write_timeout{5000};
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds request_timeout{15000};
  std::chrono::seconds keep_alive_timeout{5};
  std::size_t keep_alive_max_count = 100;
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_payload = 64 * 1024;
  std::size_t max_body_bytes_in_flight = std::size_t{64} << 20;
  std::size_t max_body_bytes_per_peer = std::size_t{16} << 20;
  int backlog = 1024;
  // Called with the request's headers before its body is read: false refuses it (the status and
  // body are the callee's to set in the response; the connection is then closed).
  std::function<bool(const httplib::Request&, httplib::Response&)> admit;
};

// Applies the limits and binds address:port (port 0: any free port); returns the bound port, or
// -1 when it cannot be bound (a port in use included). Call before `listen_after_bind`, which then
// serves until `stop`; routes may be added before or after. An httplib::SSLServer serves TLS
// with its SSL_CTX (handlers find the connection's SSL in Request::ssl).
int harden_and_bind(httplib::Server& server, const std::string& address, int port,
                    const HttpLimits& limits = {});

// A bound address for a log line: "127.0.0.1:9401", "[::1]:9401".
std::string host_port(const std::string& address, int port);
// Who can reach it: "every IPv4 interface" (0.0.0.0), "every interface" (::), "loopback only"
// (127.0.0.0/8, ::1, localhost), else "this address only".
std::string listen_scope(const std::string& address);

}  // namespace gpuorch::telemetry
