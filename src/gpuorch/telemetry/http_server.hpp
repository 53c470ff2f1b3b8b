#pragma once
// One hardening for every cpp-httplib server gpuorch runs (the exporter's /metrics, `gpuorch
// scheduler`'s /metrics, /healthz, /readyz). httplib serves each connection on a worker thread
// until it closes; its fixed pool let 200 slow or silent connections (slowloris) hold every worker,
// so a scrape waited behind them for tens of seconds. Here:
// - a pool that grows a thread per connection up to `max_connections` (then connections queue),
//   so a scrape gets a worker of its own while fewer connections than that are held open;
// - a short read timeout: a connection silent for `read_timeout` within a request is closed (a
//   slowloris that trickles a header line every 2 s is dropped after its first pause);
// - a short keep-alive: an idle connection (or one that never sends a byte) is closed after
//   `keep_alive_timeout`, and after `keep_alive_max_count` requests;
// - request bodies up to `max_payload` bytes (every route here is a GET);
// - a listen backlog of `backlog` (httplib's is 5: under a burst of connections the kernel drops
//   SYNs and each client waits a second for its retry).
#include <chrono>
#include <cstddef>
#include <string>

namespace httplib {
class Server;
}

namespace gpuorch::telemetry {

struct HttpLimits {
  std::size_t max_connections = 512;  // worker threads at most; more connections wait in line
  std::chrono::milliseconds read_timeout{1000};
  std::chrono::milliseconds write_timeout{5000};
  std::chrono::seconds keep_alive_timeout{5};
  std::size_t keep_alive_max_count = 100;
  std::size_t max_payload = 64 * 1024;
  int backlog = 1024;
};

// Applies the limits and binds address:port (port 0: any free port); returns the bound port, or
// -1 when it cannot be bound. Call before `listen_after_bind`; routes may be added before or after.
// Also sets TCP_NODELAY (small answers on kept-alive connections: without it Nagle and delayed
// ACKs add ~40 ms to every scrape).
int harden_and_bind(httplib::Server& server, const std::string& address, int port,
                    const HttpLimits& limits = {});

// A bound address for a log line: "127.0.0.1:9401", "[::1]:9401".
std::string host_port(const std::string& address, int port);
// Who can reach it: "every IPv4 interface" (0.0.0.0), "every interface" (::), "loopback only"
// (127.0.0.0/8, ::1, localhost), else "this address only".
std::string listen_scope(const std::string& address);

}  // namespace gpuorch::telemetry
