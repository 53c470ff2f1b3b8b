// gpuorch scheduler: the scheduler core serving a real Kubernetes cluster (docs/scheduler.md).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/k8s_flags.hpp"
#include "cli/replica.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/scheduler/scheduler_service.hpp"
#include "gpuorch/sched/policy.hpp"

namespace gpuorch::cli {
namespace {

struct SchedulerFlags {
  std::string kubeconfig;
  std::string scheduler_name = "gpuorch";
  std::string policy = "efd";
  std::uint64_t seed = 42;
  std::string workload;
  int binders = 4;
  int retry_seconds = 60;
  double pod_max_backoff = 10;  // kube-scheduler's podMaxBackoffSeconds
  int startup_timeout = 20;
  int sync_timeout = 120;
  std::string topology_levels;
  bool queues = false;
  bool no_preemption = false;
  int resize_interval = 300;
  double resize_cost = -1;  // not given: a tenth of --resize-interval
  double settle_after_finish = 0;
  ReplicaFlags replica{.listen = "127.0.0.1:10261",
                       .leader_elect = false,
                       .lease_namespace = {},
                       .lease_name = "gpuorch-scheduler"};
};

// Fails at start, with one line and exit 2, when the credentials are refused: a scheduler that
// cannot list nodes would only log errors forever. Anything else (a 503 while the API server
// starts, a dropped connection) is tried again with backoff for `patience`, then one line and
// exit 1 (the Deployment restarts it).
void check_access(k8s::ApiClient& api, std::chrono::seconds patience,
                  const std::atomic<bool>& stop) {
  for (const char* path : {"/api/v1/nodes?limit=1", "/api/v1/pods?limit=1"}) {
    try {
      if (!k8s::patient_get(api, path, patience, stop, base::log)) return;
    } catch (const k8s::ApiError& e) {
      if (e.status() == 401 || e.status() == 403) {
        base::fail_input(fmt::format("{}: the API server refused the credentials: {}",
                                     api.config().source, e.what()));
      }
      throw;
    }
  }
}

int run(const SchedulerFlags& f) {
  if (f.binders < 1 || f.binders > 64) base::fail_input("--binders must be in [1, 64]");
  if (f.retry_seconds < 1) base::fail_input("--retry-unschedulable must be at least 1 second");
  if (f.startup_timeout < 1 || f.startup_timeout > 3600) {
    base::fail_input("--startup-timeout must be in [1, 3600] seconds");
  }
  if (f.sync_timeout < 1 || f.sync_timeout > 86400) {
    base::fail_input("--sync-timeout must be in [1, 86400] seconds");
  }
  const std::string spec = policy_spec(f.policy);
  k8s::SchedulerServiceOptions options;
  options.scheduler_name = f.scheduler_name;
  options.mirror.policy = spec;
  options.mirror.seed = f.seed;
  options.binders = f.binders;
  options.retry_unschedulable = std::chrono::seconds(f.retry_seconds);
  if (!(f.pod_max_backoff >= 0.01 && f.pod_max_backoff <= 3600)) {
    base::fail_input("--pod-max-backoff must be in [0.01, 3600] seconds");
  }
  options.backoff_max = std::chrono::milliseconds(std::llround(f.pod_max_backoff * 1000));
  options.backoff_initial = std::min(options.backoff_initial, options.backoff_max);
  options.startup_timeout = std::chrono::seconds(f.startup_timeout);
  options.sync_timeout = std::chrono::seconds(f.sync_timeout);
  options.log = base::log;
  options.queues = f.queues;
  if (f.no_preemption && !f.queues) base::fail_input("--no-preemption needs --queues");
  options.preemption = !f.no_preemption;
  if (f.resize_interval < 0 || f.resize_interval > 86400) {
    base::fail_input("--resize-interval must be in [0, 86400] seconds");
  }
  options.resize_interval = std::chrono::seconds(f.resize_interval);
  if (!(f.settle_after_finish >= 0 && f.settle_after_finish <= 60)) {
    base::fail_input("--settle-after-finish must be in [0, 60] seconds");
  }
  options.settle_after_finish =
      std::chrono::milliseconds(std::llround(f.settle_after_finish * 1000));
  if (f.resize_cost != -1) {
    if (!(f.resize_cost >= 0 && f.resize_cost <= 86400)) {
      base::fail_input("--resize-cost must be in [0, 86400] seconds");
    }
    options.resize_cost = std::chrono::milliseconds(std::llround(f.resize_cost * 1000));
  }
  for (std::size_t start = 0; start < f.topology_levels.size();) {
    std::size_t end = f.topology_levels.find(',', start);
    if (end == std::string::npos) end = f.topology_levels.size();
    const std::string key = f.topology_levels.substr(start, end - start);
    if (key.empty()) base::fail_input("--topology-levels: an empty label key");
    options.mirror.topology_levels.push_back(key);
    start = end + 1;
  }
  if (!f.workload.empty()) options.mirror.history = io::load_openb_pods(f.workload).pods;

  const std::optional<std::string> kubeconfig =
      f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
  const k8s::ClusterConfig cluster = k8s::load_cluster_config(kubeconfig);
  // SIGTERM ends every call in flight (a slow list, a bind) within about a second; the Lease
  // has a client of its own, so that it can still be given up after that.
  std::atomic<bool> stop{false};
  k8s::ApiClientOptions api_options;
  api_options.cancel = &stop;
  k8s::ApiClient api(cluster, api_options);
  std::jthread signal_thread = stop_on_signals(stop);
  check_access(api, std::chrono::seconds(f.startup_timeout), stop);

  k8s::SchedulerService service(api, options);
  const int rc = run_replica(
      cluster, f.replica, controller_of(service), stop, [&](const std::string& address, int port) {
        base::log_info(
            fmt::format("serving pods with schedulerName {} (policy {}, seed {}) from "
                        "{}; metrics on http://{}:{}/metrics",
                        f.scheduler_name, spec, f.seed, api.config().server, address, port));
      });
  stop = true;
  if (rc == 0) {
    base::log_info("stopped");
  } else {
    base::log(base::Severity::kError, "stopped: lost the leader lease");
  }
  return rc;
}

}  // namespace

void add_scheduler(CLI::App& app, Action& action) {
  auto flags = std::make_shared<SchedulerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "scheduler",
      "Schedule the pods of a Kubernetes cluster whose spec.schedulerName is ours, with the same "
      "scheduler core and policies as `gpuorch sim` (docs/scheduler.md).");
  add_core_flags(*cmd, flags->kubeconfig, flags->policy, flags->seed, flags->workload);
  cmd->add_option("--scheduler-name", flags->scheduler_name,
                  "Serve pods with this spec.schedulerName")
      ->capture_default_str();
  cmd->add_option("--topology-levels", flags->topology_levels,
                  "Node label keys, outermost first, that gangs are kept under, e.g. "
                  "topology.kubernetes.io/zone,example.com/rack,kubernetes.io/hostname");
  cmd->add_flag(
      "--queues", flags->queues,
      "Decide through the job layer over the cluster's Queues (KAI-Scheduler's "
      "scheduling.run.ai/v2, the CRD of gpuorch manifests; pods name theirs with the "
      "label kai.scheduler/queue, default: the queue 'default'): a queue never passes "
      "its limit, a queue below its fair share takes GPUs back from queues above theirs and a "
      "higher priority from lower ones (victims evicted through the Eviction API, "
      "PodDisruptionBudgets honoured), and a pod that waits says which queue and why");
  cmd->add_flag("--no-preemption", flags->no_preemption,
                "With --queues: never evict; a job that finds no room waits with its reason");
  cmd->add_option("--resize-interval", flags->resize_interval,
                  "With --queues: seconds an elastic gang (more pods than its PodGroup's "
                  "minMember) waits after it started or grew before it grows again")
      ->capture_default_str();
  cmd->add_option("--resize-cost", flags->resize_cost,
                  "With --queues: seconds a resize idles an elastic job; it grows only when the "
                  "speedup fitted to its measured throughput (gpuorch.io/throughput) pays for that "
                  "over a resize interval (default: a tenth of --resize-interval)");
  cmd->add_option("--settle-after-finish", flags->settle_after_finish,
                  "Seconds to wait after a bound pod finishes or goes before deciding again "
                  "(each further one extends the wait, to at most four times this): a job's "
                  "pods finish one by one, and what it held should come free as one change")
      ->capture_default_str();
  add_replica_flags(*cmd, flags->replica);
  cmd->add_option("--binders", flags->binders, "Concurrent bind calls to the API server")
      ->capture_default_str();
  cmd->add_option("--retry-unschedulable", flags->retry_seconds,
                  "Seconds after which unschedulable pods are tried again even if nothing changed")
      ->capture_default_str();
  cmd->add_option("--pod-max-backoff", flags->pod_max_backoff,
                  "Seconds a pod waits at most after failures in a row (1 s doubled per failure, "
                  "capped here; kube-scheduler's podMaxBackoffSeconds); a replay that compresses "
                  "time lowers it")
      ->capture_default_str();
  cmd->add_option("--startup-timeout", flags->startup_timeout,
                  "Seconds the first API calls (access check, PodGroup discovery) are retried "
                  "with backoff before the scheduler exits non-zero")
      ->capture_default_str();
  cmd->add_option("--sync-timeout", flags->sync_timeout,
                  "Seconds the informers may take to list nodes, pods and PodGroups before the "
                  "scheduler exits non-zero")
      ->capture_default_str();
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
