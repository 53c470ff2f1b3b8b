#pragma once
// What every controller gpuorch deploys as a Deployment of several replicas shares (`gpuorch
// scheduler`, `gpuorch admission-check`): the leader-election flags, the Lease held while the
// controller's loop is alive, and /healthz, /readyz and /metrics for the kubelet's probes and
// Prometheus.
#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <string>

#include "gpuorch/k8s/api/kubeconfig.hpp"

namespace gpuorch::cli {

struct ReplicaFlags {
  std::string listen;  // ADDRESS:PORT of the probes and metrics
  bool leader_elect = false;
  std::string lease_namespace;  // empty: the kubeconfig context's or service account's
  std::string lease_name;
};

// --listen, --leader-elect, --leader-elect-namespace and --leader-elect-lease-name; `f` holds the
// defaults shown in --help.
void add_replica_flags(CLI::App& cmd, ReplicaFlags& f);

// The controller a replica runs: its loop (blocks until `stop`), whether it came round lately,
// whether its informers have listed, and its Prometheus text.
struct Controller {
  std::function<void(std::atomic<bool>& stop)> run;
  std::function<bool()> alive;
  std::function<bool()> synced;
  std::function<std::string()> metrics;
};

// A service with run(stop), alive(), synced() and metrics(), as both controllers have.
template <class Service>
Controller controller_of(Service& service) {
  return {
      .run = [&service](std::atomic<bool>& stop) { service.run(stop); },
      .alive = [&service] { return service.alive(); },
      .synced = [&service] { return service.synced(); },
      .metrics = [&service] { return service.metrics(); },
  };
}

// Serves the probes on f.listen (base::InputError when it cannot bind) and runs the controller:
// at once, or with f.leader_elect only while this replica holds the Lease. A standby is alive and
// ready (a rollout would stall otherwise); a leader that stops coming round stops renewing, so a
// standby takes over. Returns 0 after `stop`, 1 when the Lease was lost (the Deployment restarts
// the replica, as kube-scheduler's are). `started` is called once the probes listen, with the
// address and the port they got (--listen ADDRESS:0 picks a free one).
int run_replica(const k8s::ClusterConfig& cluster, const ReplicaFlags& f, Controller controller,
                std::atomic<bool>& stop,
                const std::function<void(const std::string& address, int port)>& started);

}  // namespace gpuorch::cli
