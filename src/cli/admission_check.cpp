// gpuorch admission-check: Kueue's AdmissionCheck controller gpuorch.io/placeable (docs/kueue.md).
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <thread>

#include "cli/k8s_flags.hpp"
#include "cli/replica.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/kueue/admission_check_service.hpp"

namespace gpuorch::cli {
namespace {

struct AdmissionCheckFlags {
  std::string kubeconfig;
  std::string policy = "efd";
  std::uint64_t seed = 42;
  std::string workload;
  int retry_after_s = 15;
  int sync_timeout_s = 120;
  ReplicaFlags replica{.listen = "127.0.0.1:10263",
                       .leader_elect = false,
                       .lease_namespace = {},
                       .lease_name = "gpuorch-admission-check"};
};

int run(const AdmissionCheckFlags& f) {
  if (f.retry_after_s < 1 || f.retry_after_s > 3600) {
    base::fail_input(fmt::format("--retry-after {}: 1..3600 seconds", f.retry_after_s));
  }
  if (f.sync_timeout_s < 1) base::fail_input("--sync-timeout must be at least 1 second");
  k8s::kueue::AdmissionCheckOptions options;
  options.mirror.policy = policy_spec(f.policy);
  options.mirror.seed = f.seed;
  if (!f.workload.empty()) options.mirror.history = io::load_openb_pods(f.workload).pods;
  options.placeable.retry_after = std::chrono::seconds(f.retry_after_s);
  options.sync_timeout = std::chrono::seconds(f.sync_timeout_s);
  options.log = base::log;

  const std::optional<std::string> kubeconfig =
      f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
  const k8s::ClusterConfig cluster = k8s::load_cluster_config(kubeconfig);
  std::atomic<bool> stop{false};
  k8s::ApiClientOptions api_options;
  api_options.cancel = &stop;
  k8s::ApiClient api(cluster, api_options);
  std::jthread signal_thread = stop_on_signals(stop);
  k8s::kueue::AdmissionCheckService service(api, options);
  // A start-up failure of the loop is one line and exit 1 (main).
  const int rc = run_replica(
      cluster, f.replica, controller_of(service), stop, [&](const std::string& address, int port) {
        base::log_info(fmt::format(
            "admission check {} (policy {}, seed {}) for the cluster at {}; Retry after {} s; "
            "metrics on http://{}:{}/metrics{}",
            k8s::kueue::kPlaceableController, options.mirror.policy, f.seed, api.config().server,
            f.retry_after_s, address, port,
            f.replica.leader_elect ? "; waits for the Lease " + f.replica.lease_name : ""));
      });
  stop = true;
  if (rc != 0) {
    base::log(base::Severity::kError, "stopped: lost the leader lease");
  } else {
    base::log_info(fmt::format("stopped ({} verdicts written)", service.verdicts_written()));
  }
  return rc;
}

}  // namespace

void add_admission_check(CLI::App& app, Action& action) {
  auto flags = std::make_shared<AdmissionCheckFlags>();
  CLI::App* cmd = app.add_subcommand(
      "admission-check",
      "Kueue AdmissionCheck controller gpuorch.io/placeable: tells Kueue whether a Workload whose "
      "quota it reserved can be placed now (Ready), later (Retry: the quota goes back) or never "
      "(Rejected), with the scheduler core on the cluster as it is (docs/kueue.md).");
  add_core_flags(*cmd, flags->kubeconfig, flags->policy, flags->seed, flags->workload);
  cmd->add_option("--retry-after", flags->retry_after_s,
                  "Seconds Kueue waits before it reserves quota again for a Workload told Retry "
                  "(requeueAfterSeconds; doubled per retry Kueue counted, at most 8 times)")
      ->capture_default_str();
  cmd->add_option("--sync-timeout", flags->sync_timeout_s,
                  "Seconds the informers have to list Nodes, Pods and Kueue's objects at start")
      ->capture_default_str();
  add_replica_flags(*cmd, flags->replica);
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
