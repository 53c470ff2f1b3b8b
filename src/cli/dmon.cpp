// gpuorch dmon: samples every GPU at an interval, rows like `nvidia-smi dmon`.
#include "gpuorch/telemetry/dmon.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "cli/verbs.hpp"
#include "discovery_flags.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/discover.hpp"

namespace gpuorch::cli {
namespace {

struct DmonFlags {
  DiscoveryFlags discover;
  double interval = 1.0;
  int count = 0;
  bool json = false;
};

int run(DmonFlags f) {
  if (!(f.interval >= 0.01 && f.interval <= 3600)) {
    base::fail_input("--interval must be between 0.01 and 3600 seconds");
  }
  auto d = discover_with_warnings(f.discover);
  if (d.host.gpus.empty()) {
    // The same one line `topo` prints: why there is nothing to sample.
    for (const auto& n : d.host.notes) {
      if (n.rfind("no GPU", 0) == 0) fmt::print(stderr, "gpuorch: {}\n", n);
    }
    return 1;
  }
  telemetry::Sampler sampler(d.host, std::move(d.nvml), f.discover.options.root);
  const auto period = std::chrono::duration<double>(f.interval);
  std::vector<telemetry::GpuSample> previous;
  auto next = std::chrono::steady_clock::now();
  for (int round = 0; f.count == 0 || round < f.count; ++round) {
    const telemetry::Round r = sampler.sample();
    if (!f.json && round % 20 == 0) fmt::print("{}", telemetry::dmon_header());
    for (const auto& s : r.gpus) {
      const telemetry::GpuSample* before = nullptr;
      for (const auto& p : previous) {
        if (p.gpu == s.gpu) before = &p;
      }
      const auto rates = telemetry::rates(s, before, f.interval);
      if (f.json) {
        fmt::print("{}\n",
                   telemetry::dmon_json(r, s, rates)
                       .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
      } else {
        fmt::print("{}", telemetry::dmon_row(s, rates));
      }
    }
    std::fflush(stdout);
    previous = r.gpus;
    if (f.count != 0 && round + 1 == f.count) break;
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    std::this_thread::sleep_until(next);
  }
  return 0;
}

}  // namespace

void add_dmon(CLI::App& app, Action& action) {
  auto flags = std::make_shared<DmonFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dmon",
      "Sample every GPU at an interval (utilisation, memory, temperature, power, clocks, PCIe "
      "and NVLink throughput), rows like `nvidia-smi dmon`. See docs/telemetry.md.");
  cmd->add_option("--interval", flags->interval, "Seconds between samples")->capture_default_str();
  cmd->add_option("--count", flags->count, "Number of samples (0 = until interrupted)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "One JSON object per GPU per sample, one per line");
  add_discovery_flags(cmd, flags->discover, "Read a recorded tree instead of this host");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
