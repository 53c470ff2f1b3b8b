// gpuorch exporter: Prometheus /metrics under dcgm-exporter's names, labels, flags and port, and
// /health, /healthz for this host (docs/telemetry.md has the field-by-field comparison).
#include "gpuorch/telemetry/exporter.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/verbs.hpp"
#include "discovery_flags.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/k8s/kubelet/pod_resources.hpp"
#include "gpuorch/telemetry/collectors.hpp"
#include "gpuorch/telemetry/http_server.hpp"
#include "gpuorch/telemetry/xid_log.hpp"

namespace gpuorch::cli {
namespace {

struct ExporterFlags {
  DiscoveryFlags discover;
  std::string address = ":9400";
  std::string collectors;  // empty: dcgm-exporter's default counters, built in
  double interval = 1.0;
  int collect_interval_ms = 0;  // dcgm-exporter's -c; 0: --interval
  double duration = 0;
  bool kubernetes = false;
  std::string gpu_id_type = "uid";
  std::string pod_resources_socket = k8s::kPodResourcesSocket;
};

// Fields of the counters file NVML cannot give: named once at start-up, not silently dropped.
void note_unavailable(const std::vector<telemetry::Collector>& collectors) {
  std::string names;
  for (const auto& c : collectors) {
    if (c.field->value == nullptr && c.type != "label") {
      names += (names.empty() ? "" : ", ") + std::string(c.field->name);
    }
  }
  if (!names.empty()) {
    fmt::print(stderr, "gpuorch: not exported (no NVML source, see docs/telemetry.md): {}\n",
               names);
  }
}

int run(ExporterFlags f) {
  if (f.collect_interval_ms != 0) f.interval = f.collect_interval_ms / 1000.0;
  if (!(f.interval >= 0.05 && f.interval <= 3600)) {
    base::fail_input("--interval must be between 0.05 and 3600 seconds (-c: 50-3600000 ms)");
  }
  if (f.duration < 0) base::fail_input("--duration must not be negative");
  if (f.gpu_id_type != "uid" && f.gpu_id_type != "device-name") {
    base::fail_input(
        fmt::format("--kubernetes-gpu-id-type '{}': expected uid or device-name", f.gpu_id_type));
  }
  telemetry::ExporterOptions options;
  options.interval = std::chrono::milliseconds(static_cast<long>(f.interval * 1000));
  options = telemetry::parse_listen(f.address, options);
  if (!f.collectors.empty()) options.render.collectors = telemetry::read_collectors(f.collectors);
  note_unavailable(options.render.collectors);
  options.render.pods_by_device_name = f.gpu_id_type == "device-name";

  auto d = discover_with_warnings(f.discover);
  for (const auto& n : d.host.notes) {
    if (n.rfind("no GPU", 0) == 0 || n.rfind("NVML", 0) == 0)
      fmt::print(stderr, "gpuorch: {}\n", n);
  }
  const bool live_nvml = d.nvml != nullptr && f.discover.options.root == "/";
  auto sampler =
      std::make_unique<telemetry::Sampler>(d.host, std::move(d.nvml), f.discover.options.root);
  // XIDs arrive as NVML events between readings; only a live host has them.
  std::shared_ptr<telemetry::XidLog> xids;
  if (live_nvml) {
    std::vector<std::string> uuids;
    for (const auto& g : d.host.gpus) uuids.push_back(g.uuid);
    std::string why;
    xids = telemetry::XidLog::start(f.discover.options.nvml_library, uuids, why);
    if (!xids) fmt::print(stderr, "gpuorch: XID events not watched: {}\n", why);
    sampler->set_xid_source(xids);
  }
  if (f.kubernetes) {
    auto client = std::make_shared<k8s::PodResourcesClient>(f.pod_resources_socket);
    // Asked on the sampler thread once a reading; a kubelet that does not answer costs that
    // reading its pod labels (said once per change of reason), never a scrape.
    auto last_why = std::make_shared<std::string>();
    options.pods = [client, last_why] {
      telemetry::PodAssignments pods;
      std::string why;
      if (!client->list(pods, why) && why != *last_why) {
        fmt::print(stderr, "gpuorch: no pod labels: {}\n", why);
      }
      *last_why = why;
      return pods;
    };
  }

  // SIGINT/SIGTERM are blocked in every thread and taken here with sigtimedwait: a clean stop
  // without a signal handler or global state.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  telemetry::Exporter exporter(d.host, std::move(sampler), options);
  const int port = exporter.start();
  fmt::print("gpuorch exporter: listening on http://{}/metrics, {} ({} GPU(s), every {} s)\n",
             telemetry::host_port(options.address, port), telemetry::listen_scope(options.address),
             d.host.gpus.size(), f.interval);
  std::fflush(stdout);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(f.duration);
  for (;;) {
    timespec wait{0, 200'000'000};
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) break;
    if (f.duration > 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  exporter.stop();
  return 0;
}

}  // namespace

void add_exporter(CLI::App& app, Action& action) {
  auto flags = std::make_shared<ExporterFlags>();
  CLI::App* cmd = app.add_subcommand(
      "exporter",
      "Serve Prometheus /metrics as NVIDIA's dcgm-exporter does (its field names, types, help, "
      "labels, counters file, port and flags), plus gpuorch_* topology and health, and /health, "
      "/healthz. Sampling runs apart from scraping. See docs/telemetry.md.");
  cmd->add_option("-a,--address,--listen", flags->address,
                  "ADDRESS:PORT to serve on (dcgm-exporter's default :9400 = every IPv4 "
                  "interface; 127.0.0.1:9400 for loopback only, port 0 for any)")
      ->envname("DCGM_EXPORTER_LISTEN")
      ->capture_default_str();
  cmd->add_option("-f,--collectors", flags->collectors,
                  "dcgm-exporter counters file (FIELD, TYPE, HELP a line): export exactly these "
                  "(default: dcgm-exporter's default-counters.csv, built in)")
      ->envname("DCGM_EXPORTER_COLLECTORS");
  cmd->add_option("--interval", flags->interval, "Seconds between GPU readings")
      ->capture_default_str();
  cmd->add_option("-c,--collect-interval", flags->collect_interval_ms,
                  "Milliseconds between GPU readings (dcgm-exporter's flag; overrides --interval)")
      ->envname("DCGM_EXPORTER_INTERVAL");
  cmd->add_flag("-k,--kubernetes", flags->kubernetes,
                "Label each GPU's series with the pod, namespace and container holding it "
                "(kubelet pod-resources API)")
      ->envname("DCGM_EXPORTER_KUBERNETES");
  cmd->add_option("--kubernetes-gpu-id-type", flags->gpu_id_type,
                  "How the device plugin named GPUs: uid (GPU/MIG UUIDs) or device-name (nvidiaN)")
      ->envname("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE")
      ->capture_default_str();
  cmd->add_option("--pod-resources-kubelet-socket", flags->pod_resources_socket,
                  "The kubelet's pod-resources socket")
      ->envname("DCGM_POD_RESOURCES_KUBELET_SOCKET")
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "Stop after this many seconds (0 = until signalled)")
      ->capture_default_str();
  add_discovery_flags(cmd, flags->discover, "Serve a recorded tree instead of this host");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
