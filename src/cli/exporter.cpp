// gpuorch exporter: Prometheus /metrics (DCGM exporter names) and /healthz for this host.
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
#include "gpuorch/telemetry/http_server.hpp"

namespace gpuorch::cli {
namespace {

struct ExporterFlags {
  DiscoveryFlags discover;
  std::string listen = "127.0.0.1:9401";
  double interval = 1.0;
  double duration = 0;
};

int run(ExporterFlags f) {
  if (!(f.interval >= 0.05 && f.interval <= 3600)) {
    base::fail_input("--interval must be between 0.05 and 3600 seconds");
  }
  if (f.duration < 0) base::fail_input("--duration must not be negative");
  telemetry::ExporterOptions options;
  options.interval = std::chrono::milliseconds(static_cast<long>(f.interval * 1000));
  options = telemetry::parse_listen(f.listen, options);
  auto d = discover_with_warnings(f.discover);
  for (const auto& n : d.host.notes) {
    if (n.rfind("no GPU", 0) == 0 || n.rfind("NVML", 0) == 0)
      fmt::print(stderr, "gpuorch: {}\n", n);
  }
  auto sampler =
      std::make_unique<telemetry::Sampler>(d.host, std::move(d.nvml), f.discover.options.root);

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
      "Serve Prometheus /metrics (DCGM exporter metric names and labels, plus gpuorch_* topology "
      "and health) and /healthz. Sampling runs apart from scraping. See docs/telemetry.md.");
  cmd->add_option(
         "--listen", flags->listen,
         "ADDRESS:PORT to serve on (loopback by default; 0.0.0.0:PORT for all, port 0 for any)")
      ->capture_default_str();
  cmd->add_option("--interval", flags->interval, "Seconds between GPU readings")
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "Stop after this many seconds (0 = until signalled)")
      ->capture_default_str();
  add_discovery_flags(cmd, flags->discover, "Serve a recorded tree instead of this host");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
