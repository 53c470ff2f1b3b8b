// gpuorch sim fill: the FGD study's fill experiment over policies x seeds.
#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command_line.hpp"
#include "cli/node_inputs.hpp"
#include "cli/progress.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/csv.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/units.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/report/fill_html.hpp"
#include "gpuorch/report/fill_output.hpp"
#include "gpuorch/report/gnuplot.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sim/fill.hpp"
#include "gpuorch/sim/openb_like.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::cli {
namespace {

struct FillFlags {
  std::string nodes;
  std::string pods;
  std::string policies = "all";
  std::string seeds = "42-51";
  double tune = 1.3;
  bool json = false;
  std::string csv;
  std::string placements;
  std::string tie_break = "study";
  std::string output;  // sim arrivals -o
  std::string report;
  unsigned threads = 0;
  int consolidate = 0;
};

std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  auto number = [&](std::string_view s) {
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
      base::fail_input(fmt::format("--seeds: '{}' is not a seed or a range A-B", text));
    }
    return v;
  };
  std::vector<std::uint64_t> seeds;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      seeds.push_back(number(part));
      continue;
    }
    const std::uint64_t a = number(part.substr(0, dash));
    const std::uint64_t b = number(part.substr(dash + 1));
    if (b < a || b - a > 100000) base::fail_input(fmt::format("--seeds: bad range '{}'", part));
    for (std::uint64_t s = a; s <= b; ++s) seeds.push_back(s);
  }
  if (seeds.empty()) base::fail_input("--seeds: no seed given");
  return seeds;
}

std::vector<std::string> parse_policies(const std::string& text) {
  if (text == "all") return sched::policy_names();
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string spec = text.substr(start, end - start);
    const std::size_t colon = spec.find(':');
    spec = std::string(sched::canonical_policy_name(spec.substr(0, colon))) +
           (colon == std::string::npos ? "" : spec.substr(colon));
    try {
      sched::check_policy_spec(spec);
    } catch (const base::InputError& e) {
      base::fail_input(fmt::format("--policy: {} (or default, or all)", e.what()));
    }
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(spec);
    start = end + 1;
  }
  return out;
}

// --tune and --seeds checked, and an output file that can be written; the seeds.
std::vector<std::uint64_t> checked_seeds(const FillFlags& f, const std::string& out_flag,
                                         const std::string& out_path) {
  if (!(f.tune > 0 && f.tune <= 10)) base::fail_input("--tune must be in (0, 10]");
  auto seeds = parse_seeds(f.seeds);
  if (!out_path.empty()) base::check_output(out_flag, out_path);
  return seeds;
}

// The cluster and trace of --nodes/--pods (or the embedded synthetic pair), described in `meta`.
sim::FillInput load_input(const FillFlags& f, report::FillMeta& meta) {
  if (f.nodes.empty() != f.pods.empty()) {
    base::fail_input("give both --nodes and --pods, or neither (the embedded synthetic default)");
  }
  sim::FillInput input;
  std::vector<std::string> warnings;
  if (f.nodes.empty()) {
    meta.synthetic = true;
    meta.nodes = meta.pods = "embedded synthetic openb-like default";
    input = sim::make_fill_input(sim::kOpenbLikeLabel, sim::openb_like_nodes(),
                                 sim::openb_like_pods(/*seed=*/1));
  } else {
    auto nodes = load_node_list(f.nodes);
    io::PodTrace trace = io::load_openb_pods(f.pods);
    warnings = io::unknown_model_warnings(trace, cluster::Cluster(nodes));
    meta.nodes = f.nodes;
    meta.pods = f.pods;
    input = sim::make_fill_input(std::filesystem::path(f.pods).stem().string(), std::move(nodes),
                                 std::move(trace.pods));
  }
  for (const auto& w : warnings) fmt::print(stderr, "gpuorch: {}\n", w);
  meta.workload = input.label;
  meta.node_count = input.nodes.size();
  for (const auto& n : input.nodes) meta.gpu_count += n.gpu_count;
  meta.trace_pods = input.pods.size();
  if (meta.gpu_count == 0) base::fail_input(fmt::format("{}: the cluster has no GPU", meta.nodes));
  return input;
}

int run(const FillFlags& f) {
  if (f.consolidate < 0 || f.consolidate > 64) base::fail_input("--consolidate must be in [0, 64]");
  const auto policies = parse_policies(f.policies);
  // Every destination checked before the work: a run that fails writes nothing.
  const auto seeds = checked_seeds(f, "--csv", f.csv);
  if (!f.placements.empty()) base::check_output("--placements", f.placements);
  if (!f.report.empty()) {
    base::check_output("--report", f.report, base::OutputKind::kFolder);
    report::find_gnuplot();
  }

  report::FillMeta meta;
  meta.tune = f.tune;
  meta.consolidate = f.consolidate;
  const sim::FillInput input = load_input(f, meta);

  Progress progress("sim fill");
  sim::FillOptions options;
  options.tune = f.tune;
  options.consolidation.max_moves = f.consolidate;
  options.record_placements = !f.placements.empty();
  options.tie_break = f.tie_break == "names" ? sim::FillOptions::TieBreak::kNodeNames
                                             : sim::FillOptions::TieBreak::kStudy;
  const auto runs = sim::run_fill_grid(
      input, policies, seeds, options, f.threads,
      [&](std::size_t done, std::size_t total) { progress.update(done, total); });
  progress.finish();

  // Everything rendered first, then the report (gnuplot: the likeliest to fail), then the files.
  const std::string csv = f.csv.empty() ? "" : report::fill_csv(runs);
  const std::string placements =
      f.placements.empty() ? "" : report::fill_placements_csv(input, runs);
  if (!f.report.empty()) {
    report::write_fill_html(
        f.report, meta, report_header(fmt::format("{} ({} seeds)", f.seeds, seeds.size())), runs);
  }
  if (!f.csv.empty()) base::write_file_atomically(f.csv, csv);
  if (!f.placements.empty()) base::write_file_atomically(f.placements, placements);
  if (f.json) {
    fmt::print("{}\n", report::fill_json(meta, runs).dump());
  } else {
    fmt::print("{}", report::fill_table(meta, runs));
    if (!f.report.empty()) fmt::print("\nreport: {}/index.html\n", f.report);
  }
  return 0;
}

// One CSV row per arriving pod and seed, in arrival order; arrived_pct is the GPU demand arrived
// so far (this pod included) as % of the capacity, the x of the fill curves.
int run_arrivals(const FillFlags& f) {
  const auto seeds = checked_seeds(f, "--output", f.output);
  report::FillMeta meta;
  const sim::FillInput input = load_input(f, meta);
  const auto capacity = static_cast<double>(meta.gpu_count) * base::kMilliPerGpu;
  std::string out =
      "seed,position,pod,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,arrived_pct\n";
  for (const std::uint64_t seed : seeds) {
    std::int64_t arrived = 0;
    const auto order = sim::fill_arrivals(input, f.tune, seed);
    for (std::size_t k = 0; k < order.size(); ++k) {
      const workload::PodSpec& p = input.pods[order[k]];
      arrived += p.total_gpu_milli();
      out += fmt::format("{},{},{},{},{},{},{},{},{:.4f}\n", seed, k, base::csv_field(p.name),
                         p.cpu_milli, p.memory_mib, p.gpu_count, p.gpu_milli,
                         base::csv_field(workload::join_models(p.allowed_models)),
                         100.0 * static_cast<double>(arrived) / capacity);
    }
  }
  if (f.output.empty()) {
    fmt::print("{}", out);
  } else {
    base::write_file_atomically(f.output, out);
  }
  return 0;
}

// The flags that say which experiment: cluster, trace, seeds and tuning (sim fill, sim arrivals).
void add_experiment_options(CLI::App& cmd, FillFlags& flags) {
  cmd.add_option("--nodes", flags.nodes,
                 "Cluster: openb node CSV (sn,cpu_milli,memory_mib,gpu,model) or a YAML "
                 "inventory (.yaml/.yml, see docs/inputs.md)");
  cmd.add_option("--pods", flags.pods, "Pods: openb pod CSV (5 or 11 columns)");
  cmd.add_option("--seeds", flags.seeds, "Seeds: A-B, or a comma-separated list")
      ->capture_default_str();
  cmd.add_option("--tune", flags.tune, "Arrived GPU demand as a multiple of cluster GPU capacity")
      ->capture_default_str();
}

}  // namespace

void add_sim_arrivals(CLI::App& sim, Action& action) {
  auto flags = std::make_shared<FillFlags>();
  CLI::App* cmd = sim.add_subcommand(
      "arrivals",
      "Print the arrival sequence `sim fill` uses for each seed (CSV, one row per pod): the "
      "seeded shuffle of the trace tuned to --tune x the GPU capacity. The same for every "
      "policy; use it to replay the experiment elsewhere or to bound what any policy can reach "
      "(scripts/fill-ceiling).");
  add_experiment_options(*cmd, *flags);
  cmd->add_option("-o,--output", flags->output, "Write the CSV to this file instead of stdout");
  cmd->callback([flags, &action] { action = [flags] { return run_arrivals(*flags); }; });
}

void add_sim_fill(CLI::App& sim, Action& action) {
  auto flags = std::make_shared<FillFlags>();
  CLI::App* cmd = sim.add_subcommand(
      "fill",
      "Fill a cluster with arriving pods (the FGD study's protocol) and record allocation and "
      "fragmentation, for many policies x seeds in parallel. Without --nodes/--pods it runs on "
      "an embedded SYNTHETIC openb-like cluster and workload.");
  add_experiment_options(*cmd, *flags);
  cmd->add_option("--policy", flags->policies,
                  fmt::format("Policies, comma-separated, default (= {}), or all ({})",
                              sched::kDefaultPolicy, fmt::join(sched::policy_names(), ", ")))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  cmd->add_option("--csv", flags->csv, "Also write every curve point to this CSV file");
  cmd->add_option("--tie-break", flags->tie_break,
                  "Ties between equal scores: study (the study's per-seed node shuffle) or names "
                  "(a seeded ranking by node name, as gpuorch scheduler --seed uses)")
      ->check(CLI::IsMember({"study", "names"}))
      ->capture_default_str();
  cmd->add_option("--placements", flags->placements,
                  "Also write every decision as CSV seed,policy,pod,node,gpus (arrival order)");
  cmd->add_option("--report", flags->report, "Also write an HTML report with plots to this folder");
  cmd->add_option("--threads", flags->threads, "Worker threads (0 = all cores)")
      ->capture_default_str();
  cmd->add_option("--consolidate", flags->consolidate,
                  "A pod that fits no node may move up to N bound pods to other nodes to make "
                  "room (KAI-style consolidation; 0 = the study's protocol: it fails)")
      ->capture_default_str();
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli
