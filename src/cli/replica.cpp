#include "cli/replica.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <thread>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/leader_election.hpp"
#include "gpuorch/telemetry/exporter.hpp"
#include "gpuorch/telemetry/http_server.hpp"

namespace gpuorch::cli {
namespace {

// Unique per process, as client-go's host name plus a random suffix: two replicas on one node
// (or a restarted one) never take each other for the holder.
std::string replica_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::random_device rd;
  return fmt::format("{}_{:08x}", host, rd());
}

// The leader's part: hold the Lease while the loop is alive. A leader that cannot decide (its
// loop stuck, or it could not start) stops renewing, so a standby takes over; leaving (a stop,
// a failure) gives the Lease up at once.
int lead(Controller& controller, k8s::LeaderElector& elector, std::atomic<bool>& stop,
         std::atomic<bool>& standby) {
  if (!elector.acquire(stop)) return 0;
  standby = false;
  std::atomic<bool> lost{false};
  std::atomic<bool> done{false};
  std::jthread renew([&] {
    if (!elector.hold(done, controller.alive)) {
      lost = true;
      stop = true;
    }
  });
  std::exception_ptr failure;
  try {
    controller.run(stop);
  } catch (...) {
    failure = std::current_exception();
  }
  done = true;
  renew.join();
  elector.release();  // a no-op when another replica holds it now
  if (failure) std::rethrow_exception(failure);
  return lost ? 1 : 0;
}

}  // namespace

void add_replica_flags(CLI::App& cmd, ReplicaFlags& f) {
  cmd.add_flag("--leader-elect", f.leader_elect,
               "Run as one of several replicas: only the holder of a coordination.k8s.io Lease "
               "acts");
  cmd.add_option("--leader-elect-namespace", f.lease_namespace,
                 "Namespace of the Lease (default: the kubeconfig context's or the service "
                 "account's namespace)");
  cmd.add_option("--leader-elect-lease-name", f.lease_name, "Name of the Lease")
      ->capture_default_str();
  cmd.add_option("--listen", f.listen, "ADDRESS:PORT for /metrics, /healthz and /readyz")
      ->capture_default_str();
}

int run_replica(const k8s::ClusterConfig& cluster, const ReplicaFlags& f, Controller controller,
                std::atomic<bool>& stop,
                const std::function<void(const std::string& address, int port)>& started) {
  const telemetry::ExporterOptions listen = telemetry::parse_listen(f.listen, {});
  std::atomic<bool> standby{f.leader_elect};
  httplib::Server http;
  // Alive: the loop (or the wait for the Lease) comes round; a stuck loop fails the liveness
  // probe and the kubelet restarts the container.
  http.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    const bool alive = standby.load() || controller.alive();
    res.status = alive ? 200 : 500;
    res.set_content(alive ? "ok\n" : "the loop is stuck\n", "text/plain");
  });
  http.Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
    const bool ready = standby.load() || (controller.synced() && controller.alive());
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : "informers not synced\n", "text/plain");
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(controller.metrics(), "text/plain; version=0.0.4");
  });
  // Bounded threads, read timeouts and a deep backlog: slow clients cannot starve the probes.
  const int port = telemetry::harden_and_bind(http, listen.address, listen.port);
  if (port < 0) base::fail_input(fmt::format("--listen {}: cannot bind", f.listen));
  std::jthread http_thread([&http] { http.listen_after_bind(); });
  // However this function ends (a throw included), the server stops before its thread is
  // joined: a join on a server never stopped would hang the process for good.
  struct StopServer {
    httplib::Server& http;
    ~StopServer() { http.stop(); }
  } stop_server{http};
  if (started) started(listen.address, port);
  if (!f.leader_elect) {
    controller.run(stop);
    return 0;
  }
  k8s::LeaseOptions lease;
  k8s::ApiClientOptions lease_client;
  lease_client.request_timeout = std::chrono::seconds(2);
  // A client of its own: the controller's ends every call at `stop`, and the Lease must still
  // be given up after that.
  k8s::ApiClient lease_api(cluster, lease_client);
  lease.ns = f.lease_namespace.empty() ? lease_api.config().default_namespace : f.lease_namespace;
  lease.name = f.lease_name;
  lease.identity = replica_identity();
  k8s::LeaderElector elector(lease_api, lease, base::log);
  return lead(controller, elector, stop, standby);
}

}  // namespace gpuorch::cli
