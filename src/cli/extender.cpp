// gpuorch extender: the scheduler core as kube-scheduler's HTTP extender (docs/extender.md).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <thread>

#include "cli/k8s_flags.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/extender/extender_http.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/telemetry/exporter.hpp"
#include "gpuorch/telemetry/http_server.hpp"

namespace gpuorch::cli {
namespace {

struct ExtenderFlags {
  std::string kubeconfig;
  std::string policy = "efd";
  std::uint64_t seed = 42;
  std::string workload;
  std::string listen = "127.0.0.1:10262";
  std::string tls_cert, tls_key, client_ca, token_file;
  bool print_config = false;
  bool all_pods = false;
  int weight = 1;
};

// The KubeSchedulerConfiguration `extenders[]` entry that points kube-scheduler at us.
std::string config_stanza(const ExtenderFlags& f, const std::string& address, int port) {
  const bool tls = !f.tls_cert.empty();
  return fmt::format(
      "extenders:\n"
      "- urlPrefix: {}://{}\n"
      "  filterVerb: filter\n"
      "  prioritizeVerb: prioritize\n"
      "  bindVerb: bind\n"
      "  weight: {}\n"
      "  enableHTTPS: {}\n"
      "  nodeCacheCapable: true\n"
      "  httpTimeout: 5s\n"
      "{}",
      tls ? "https" : "http", telemetry::host_port(address, port), f.weight, tls ? "true" : "false",
      // No managedResources: kube-scheduler sends every pod (shares then go by annotation only,
      // since a resource no node advertises would fail kube-scheduler's own fit check).
      f.all_pods ? std::string()
                 : fmt::format("  managedResources:\n"
                               "  - name: nvidia.com/gpu\n"
                               "    ignoredByScheduler: false\n"
                               "  - name: {}\n"
                               "    ignoredByScheduler: true\n",
                               k8s::kGpuMilliResource));
}

int run(const ExtenderFlags& f) {
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    base::fail_input("--tls-cert-file and --tls-key-file go together");
  }
  if (!f.client_ca.empty() && f.tls_cert.empty()) {
    base::fail_input("--client-ca-file needs --tls-cert-file and --tls-key-file (mTLS is TLS)");
  }
  if (f.weight < 1) base::fail_input("--weight must be at least 1");
  const std::string spec = policy_spec(f.policy);
  const telemetry::ExporterOptions listen = telemetry::parse_listen(f.listen, {});
  if (f.print_config) {
    fmt::print("{}", config_stanza(f, listen.address, listen.port));
    return 0;
  }
  k8s::ExtenderAuthOptions auth_options;
  auth_options.client_certs = !f.client_ca.empty();
  if (!f.token_file.empty()) auth_options.token = k8s::read_auth_token(f.token_file);
  auth_options.log = base::log;
  k8s::ExtenderAuth auth(auth_options);

  k8s::ExtenderOptions options;
  options.mirror.policy = spec;
  options.mirror.seed = f.seed;
  options.log = base::log;
  if (!f.workload.empty()) options.mirror.history = io::load_openb_pods(f.workload).pods;

  const std::optional<std::string> kubeconfig =
      f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
  // SIGTERM ends every API call in flight (a slow list, a bind) at once, not after its timeout.
  std::atomic<bool> stop{false};
  k8s::ApiClientOptions api_options;
  api_options.cancel = &stop;
  k8s::ApiClient api(k8s::load_cluster_config(kubeconfig), api_options);
  try {
    api.get("/api/v1/nodes?limit=1");
    api.get("/api/v1/pods?limit=1");
  } catch (const k8s::ApiError& e) {
    if (e.status() == 401 || e.status() == 403) {
      base::fail_input(fmt::format("{}: the API server refused the credentials: {}",
                                   api.config().source, e.what()));
    }
    throw;
  }

  std::jthread signal_thread = stop_on_signals(stop);
  k8s::ExtenderService service(api, options);
  std::unique_ptr<httplib::Server> http;
  if (f.tls_cert.empty()) {
    http = std::make_unique<httplib::Server>();
  } else {
    auto tls = std::make_unique<httplib::SSLServer>(f.tls_cert.c_str(), f.tls_key.c_str());
    if (!tls->is_valid()) {
      base::fail_input(
          fmt::format("--tls-cert-file {} / --tls-key-file {}: not a usable certificate and key",
                      f.tls_cert, f.tls_key));
    }
    if (!f.client_ca.empty()) k8s::accept_client_certificates(*tls, f.client_ca);
    http = std::move(tls);
  }
  const int port = k8s::bind_extender_http(*http, service, listen.address, listen.port, &auth);
  if (port < 0) {
    base::fail_input(
        fmt::format("--listen {}: cannot bind (in use, or not an address here)", f.listen));
  }
  std::jthread http_thread([&http] { http->listen_after_bind(); });
  base::log_info(fmt::format(
      "extender (policy {}, seed {}) for the cluster at {}; serving on {}://{} ({}); verbs {}",
      spec, f.seed, api.config().server, f.tls_cert.empty() ? "http" : "https",
      telemetry::host_port(listen.address, port), telemetry::listen_scope(listen.address),
      auth.configured() ? fmt::format("need {}", !f.client_ca.empty() && !f.token_file.empty()
                                                     ? "a client certificate or the token"
                                                 : !f.client_ca.empty() ? "a client certificate"
                                                                        : "the bearer token")
                        : "open to anyone who reaches the address (no --client-ca-file or "
                          "--auth-token-file)"));

  service.run(stop);
  stop = true;
  http->stop();
  base::log_info("stopped");
  return 0;
}

}  // namespace

void add_extender(CLI::App& app, Action& action) {
  auto flags = std::make_shared<ExtenderFlags>();
  CLI::App* cmd = app.add_subcommand(
      "extender",
      "kube-scheduler HTTP extender (filter, prioritize, bind) with the same scheduler core and "
      "policies as `gpuorch scheduler` and `gpuorch sim` (docs/extender.md).");
  add_core_flags(*cmd, flags->kubeconfig, flags->policy, flags->seed, flags->workload);
  cmd->add_option("--listen", flags->listen,
                  "ADDRESS:PORT for the extender verbs, /metrics, /healthz and /readyz (port 0: "
                  "any free port, logged)")
      ->capture_default_str();
  cmd->add_option("--tls-cert-file,--tls-cert", flags->tls_cert,
                  "PEM serving certificate: serve HTTPS");
  cmd->add_option("--tls-key-file,--tls-key", flags->tls_key, "PEM private key of --tls-cert-file");
  cmd->add_option("--client-ca-file", flags->client_ca,
                  "PEM CA: the verbs need a client certificate it signed (kube-scheduler's "
                  "tlsConfig certFile/keyFile); needs --tls-cert-file");
  cmd->add_option("--auth-token-file", flags->token_file,
                  "File whose first line is a token: the verbs accept `Authorization: Bearer "
                  "<token>`");
  cmd->add_option("--weight", flags->weight, "weight written by --print-config")
      ->capture_default_str();
  cmd->add_flag("--print-config", flags->print_config,
                "Print the KubeSchedulerConfiguration extenders[] entry for these flags and exit");
  cmd->add_flag("--all-pods", flags->all_pods,
                "With --print-config: no managedResources, so every pod (CPU-only ones too) goes "
                "through the extender; shares are then asked by annotation (gpu-fraction)");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
