// gpuorch sim scale: decision speed of the scheduler core on a large synthetic cluster.
#include <fmt/format.h>
#include <sys/resource.h>

#include <charconv>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/progress.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sim/scale.hpp"

namespace gpuorch::cli {
namespace {

struct ScaleFlags {
  std::string nodes;
  std::string pods;
  std::string policy = "fgd";
  std::string seed = "42";
  bool json = false;
  bool full_scan = false;
};

// Flags are read as text so a bad value gets one line of our own ("--nodes: 'x' is not ...").
std::uint64_t whole_number(const std::string& flag, const std::string& text) {
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    base::fail_input(fmt::format("{}: '{}' is not a whole number", flag, text));
  }
  return v;
}

double peak_rss_mb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

int run(const ScaleFlags& f) {
  if (f.nodes.empty() || f.pods.empty()) base::fail_input("give --nodes N and --pods M");
  sim::ScaleOptions o;
  o.nodes = whole_number("--nodes", f.nodes);
  o.pods = whole_number("--pods", f.pods);
  o.seed = whole_number("--seed", f.seed);
  o.policy = f.policy;
  o.full_scan = f.full_scan;
  Progress progress("sim scale");
  if (progress.enabled())
    o.on_progress = [&](std::size_t done, std::size_t total) { progress.update(done, total); };
  const sim::ScaleResult r = sim::run_scale(o);
  progress.finish();
  const double rss = peak_rss_mb();
  if (f.json) {
    nlohmann::ordered_json j;
    j["nodes"] = r.nodes;
    j["gpus"] = r.gpus;
    j["pods"] = r.pods;
    j["policy"] = r.policy;
    j["seed"] = r.seed;
    j["placed"] = r.placed;
    j["failed"] = r.failed;
    j["placements_per_s"] = std::round(r.placements_per_s);
    j["p50_decision_us"] = std::round(r.p50_decision_us * 10) / 10;
    j["p99_decision_us"] = std::round(r.p99_decision_us * 10) / 10;
    j["max_decision_us"] = std::round(r.max_decision_us * 10) / 10;
    j["peak_rss_mb"] = std::round(rss * 10) / 10;
    j["elapsed_s"] = std::round(r.elapsed_s * 1000) / 1000;
    j["mean_decision_us"] = std::round(r.mean_decision_us * 10) / 10;
    j["setup_s"] = std::round(r.setup_s * 1000) / 1000;
    j["placing_s"] = std::round(r.placing_s * 1000) / 1000;
    j["placing_cpu_s"] = std::round(r.placing_cpu_s * 1000) / 1000;
    j["placements_per_cpu_s"] = std::round(r.placements_per_cpu_s);
    j["gpu_alloc_pct"] = std::round(r.gpu_alloc_pct * 100) / 100;
    j["scan"] = r.full_scan ? "full" : "incremental";
    j["placement_digest"] = r.placement_digest;
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("sim scale: {} nodes, {} GPUs, policy {}, seed {}{}\n", r.nodes, r.gpus, r.policy,
             r.seed, r.full_scan ? " (full scan)" : "");
  fmt::print("  pods        {} ({} placed, {} failed), GPU allocation {:.2f} %\n", r.pods, r.placed,
             r.failed, r.gpu_alloc_pct);
  fmt::print("  throughput  {:.0f} placements/s ({:.3f} s placing; {:.0f} per CPU second)\n",
             r.placements_per_s, r.placing_s, r.placements_per_cpu_s);
  fmt::print("  decision    p50 {:.1f} us, p99 {:.1f} us, max {:.1f} us, mean {:.1f} us\n",
             r.p50_decision_us, r.p99_decision_us, r.max_decision_us, r.mean_decision_us);
  fmt::print("  memory      peak RSS {:.1f} MB\n", rss);
  fmt::print("  elapsed     {:.3f} s (setup {:.3f} s)\n", r.elapsed_s, r.setup_s);
  fmt::print("  digest      {}\n", r.placement_digest);
  return 0;
}

}  // namespace

void add_sim_scale(CLI::App& sim, Action& action) {
  auto flags = std::make_shared<ScaleFlags>();
  CLI::App* cmd = sim.add_subcommand(
      "scale",
      "Time the scheduler core on a large SYNTHETIC cluster: N nodes (mostly 8-GPU servers of "
      "several models) receive M pods of the openb-like mix one by one; reports placements/s, "
      "decision latency percentiles and peak memory.");
  cmd->add_option("--nodes", flags->nodes, fmt::format("Nodes (1 to {})", sim::kMaxScaleNodes));
  cmd->add_option("--pods", flags->pods, fmt::format("Pods (1 to {})", sim::kMaxScalePods));
  cmd->add_option("--policy", flags->policy,
                  fmt::format("Policy ({})", fmt::join(sched::policy_names(), ", ")))
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the cluster, the pods and the tie ranking")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of the summary");
  cmd->add_flag("--full-scan", flags->full_scan,
                "Use the scheduler's full-scan reference path (every node per pod) instead of "
                "the incremental score index, for comparison");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
