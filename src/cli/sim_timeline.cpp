// gpuorch sim timeline: time-based simulation of training jobs under each policy
// (docs/sim-timeline.md).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command_line.hpp"
#include "cli/node_inputs.hpp"
#include "cli/progress.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/csv.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/whole_number.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/report/gnuplot.hpp"
#include "gpuorch/report/timeline_html.hpp"
#include "gpuorch/sim/timeline_engine.hpp"
#include "gpuorch/sim/timeline_metrics.hpp"
#include "gpuorch/sim/timeline_queued.hpp"
#include "gpuorch/sim/timeline_workload.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::cli {
namespace {

struct TimelineFlags {
  std::string workload;
  std::string apps;
  std::string policy = "default";
  std::string speedup_model = "fitted";
  std::string nodes = "16";
  std::string gpus_per_node = "4";
  std::string seed = "1";
  std::string interval = "60";
  std::string limit = "0";
  std::string csv;
  std::string gpus;
  std::string report;
  std::string queues;
  std::string events;
  bool json = false;
  bool per_queue = false;
};

// The most GPUs of a what-if cluster (--gpus A:B:step): --nodes' 100000 x 64.
constexpr long long kMaxGpus = 100000LL * 64;

long long whole_number(const std::string& flag, const std::string& text, long long min,
                       long long max = std::numeric_limits<long long>::max()) {
  const auto v = base::whole_number<long long>(text, min, max);
  if (!v) {
    base::fail_input(
        max == std::numeric_limits<long long>::max()
            ? fmt::format("{}: '{}' is not a whole number >= {}", flag, base::printable(text), min)
            : fmt::format("{}: '{}' is not a whole number in {}..{}", flag, base::printable(text),
                          min, max));
  }
  return *v;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// --nodes N with --gpus-per-node G, or a node list (cli/node_inputs.hpp).
std::vector<cluster::NodeSpec> cluster_nodes(const TimelineFlags& f) {
  if (all_digits(f.nodes)) {
    const auto n = whole_number("--nodes", f.nodes, 1);
    const auto g = whole_number("--gpus-per-node", f.gpus_per_node, 1);
    if (n > 100000 || g > 64) base::fail_input("--nodes/--gpus-per-node: at most 100000 x 64");
    return sim::uniform_nodes(static_cast<int>(n), static_cast<int>(g));
  }
  std::vector<cluster::NodeSpec> nodes = load_node_list(f.nodes);
  std::erase_if(nodes, [](const cluster::NodeSpec& n) { return n.gpu_count == 0; });
  if (nodes.empty()) base::fail_input(fmt::format("{}: no node with GPUs", f.nodes));
  return nodes;
}

// The profiles next to the workload: apps/ in its folder, or in the folder above
// (workloads-0.5/ sits beside apps/ in the artifact's layout).
std::string default_apps(const std::string& workload) {
  const auto dir = std::filesystem::path(workload).parent_path();
  const auto here = dir / "apps";
  std::error_code ec;  // a loop or a denied folder: not here; the profile loader says why
  if (std::filesystem::is_directory(here, ec)) return here.string();
  return ((dir.empty() ? std::filesystem::path("..") : dir.parent_path()) / "apps").string();
}

std::vector<std::string> policy_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, ',');) {
    if (p == "all") {
      for (const auto& n : sim::timeline_policy_names()) out.push_back(n);
    } else if (!p.empty()) {
      out.push_back(p);
    }
  }
  if (out.empty()) base::fail_input("--policy: no policy given");
  return out;
}

double round_to(double v, double unit) { return std::round(v / unit) * unit; }

nlohmann::ordered_json to_json(const sim::TimelineResult& r, const sim::TimelineSummary& s,
                               std::size_t nodes, double elapsed) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["jobs"] = s.jobs;
  j["finished"] = s.finished;
  j["nodes"] = nodes;
  j["gpus"] = r.total_gpus;
  j["avg_jct_s"] = round_to(s.avg_jct_s, 0.001);
  j["median_jct_s"] = round_to(s.median_jct_s, 0.001);
  j["p99_jct_s"] = round_to(s.p99_jct_s, 0.001);
  j["avg_queue_s"] = round_to(s.avg_queue_s, 0.001);
  j["makespan_s"] = s.makespan_s;
  j["gpu_hours"] = round_to(s.gpu_hours, 0.001);
  j["utilisation"] = round_to(s.utilisation, 0.0001);
  j["goodput_utilisation"] = round_to(s.goodput_utilisation, 0.0001);
  j["utilisation_arrivals"] = round_to(s.utilisation_arrivals, 0.0001);
  j["utilisation_waiting"] = round_to(s.utilisation_waiting, 0.0001);
  j["ticks"] = r.ticks;
  j["elapsed_s"] = round_to(elapsed, 0.0001);
  auto& queues = j["queues"] = nlohmann::ordered_json::object();
  for (const auto& q : sim::summarize_queues(r)) {
    auto& x = queues[q.queue];
    x["jobs"] = q.jobs;
    x["finished"] = q.finished;
    x["avg_jct_s"] = round_to(q.avg_jct_s, 0.001);
    x["avg_wait_s"] = round_to(q.avg_wait_s, 0.001);
    x["gpu_hours"] = round_to(q.gpu_hours, 0.001);
    x["gpu_share"] = round_to(q.gpu_share, 0.0001);
    // On a cluster of several GPU models: what it held of each (against gpuModels quotas).
    const auto at = std::lower_bound(r.queues.begin(), r.queues.end(), q.queue);
    const auto qi = static_cast<std::size_t>(at - r.queues.begin());
    if (at == r.queues.end() || *at != q.queue || qi >= r.model_use.size()) continue;
    auto& by_model = x["gpu_models"] = nlohmann::ordered_json::object();
    for (std::size_t m = 0; m < r.gpu_models.size(); ++m) {
      by_model[r.gpu_models[m]] = {
          {"gpu_hours", round_to(r.model_use[qi][m].gpu_seconds / 3600.0, 0.001)},
          {"peak_gpus", r.model_use[qi][m].peak_gpus}};
    }
  }
  auto& per = j["per_job"] = nlohmann::ordered_json::array();
  for (const auto& o : r.jobs) {
    nlohmann::ordered_json x;
    x["name"] = o.name;
    x["jct_s"] = o.completion >= 0 ? nlohmann::ordered_json(o.completion - o.submit) : nullptr;
    x["submit_s"] = o.submit;
    x["start_s"] = o.start;
    x["restarts"] = o.restarts;
    x["gpu_hours"] = round_to(o.gpu_seconds / 3600.0, 0.0001);
    per.push_back(std::move(x));
  }
  return j;
}

// Per policy (and cluster size), one row per queue: what each tenant got.
void print_queue_table(const std::vector<sim::TimelineResult>& results) {
  fmt::print("\nper queue\n{:>6} {:<10} {:<16} {:>7} {:>8} {:>10} {:>10} {:>10} {:>7}\n", "GPUs",
             "policy", "queue", "jobs", "finished", "avg JCT h", "wait h", "GPU-h", "share");
  for (const auto& r : results) {
    for (const auto& q : sim::summarize_queues(r)) {
      fmt::print("{:>6} {:<10} {:<16} {:>7} {:>8} {:>10.3f} {:>10.3f} {:>10.1f} {:>6.1f}%\n",
                 r.total_gpus, r.policy, base::printable(q.queue), q.jobs, q.finished,
                 q.avg_jct_s / 3600, q.avg_wait_s / 3600, q.gpu_hours, 100 * q.gpu_share);
    }
  }
}

int run(const TimelineFlags& f) {
  if (f.workload.empty()) base::fail_input("give --workload FILE");
  whole_number("--seed", f.seed, 0);
  // At most a day: the engine adds it to the clock at every tick (a huge one overflowed it).
  const auto interval = whole_number("--interval", f.interval, 1, 86400);
  const auto limit = whole_number("--limit", f.limit, 0);
  if (!f.csv.empty()) base::check_output("--csv", f.csv);
  if (!f.report.empty()) {
    base::check_output("--report", f.report, base::OutputKind::kFolder);
    report::find_gnuplot();
  }
  const auto policies = policy_list(f.policy);
  const auto speedup = sim::parse_speedup_source(f.speedup_model);
  if (!speedup) {
    base::fail_input(fmt::format("--speedup-model: '{}' is not oracle or fitted",
                                 base::printable(f.speedup_model)));
  }
  std::vector<std::vector<cluster::NodeSpec>> clusters;
  if (!f.gpus.empty()) {
    // What-if: the same workload on clusters of A, A + step, ..., B GPUs.
    const auto g = whole_number("--gpus-per-node", f.gpus_per_node, 1);
    long long a = 0, b = 0, step = 0;
    if (std::sscanf(f.gpus.c_str(), "%lld:%lld:%lld", &a, &b, &step) != 3 || a < 1 || b < a ||
        b > kMaxGpus || step < 1 || a % g != 0 || step % g != 0 || (b - a) / step > 1000) {
      base::fail_input(
          fmt::format("--gpus: '{}' is not A:B:step with A <= B <= {}, A and step "
                      "multiples of --gpus-per-node {}",
                      base::printable(f.gpus), kMaxGpus, g));
    }
    for (long long n = a; n <= b; n += step) {
      clusters.push_back(sim::uniform_nodes(static_cast<int>(n / g), static_cast<int>(g)));
    }
  } else {
    clusters.push_back(cluster_nodes(f));
  }
  sim::AppTable apps;
  const bool philly = sim::is_philly_trace(f.workload);
  std::vector<sim::JobSpec> jobs;
  if (philly) {
    jobs = sim::read_philly_trace(f.workload, static_cast<std::size_t>(limit));
  } else {
    jobs = sim::read_pollux_workload(f.workload, f.apps.empty() ? default_apps(f.workload) : f.apps,
                                     apps);
    if (limit > 0 && jobs.size() > static_cast<std::size_t>(limit)) {
      jobs.resize(static_cast<std::size_t>(limit));
    }
  }
  // With a queue file the jobs go to the queues their trace names (Philly's cluster column);
  // without one, every job is in the one default queue.
  std::vector<workload::QueueSpec> queues;
  if (!f.queues.empty()) {
    queues = io::load_queues(f.queues);
    sim::check_job_queues(jobs, sched::jobs::QueueTree(queues));
  }
  struct Run {
    std::vector<std::unique_ptr<sim::TimelinePolicy>> made;
    int total = 0;
    int per_node = 0;
  };
  std::vector<Run> runs;
  for (const auto& nodes : clusters) {
    Run run;
    for (const auto& n : nodes) {
      run.total += n.gpu_count;
      run.per_node = std::max(run.per_node, n.gpu_count);
    }
    const int total = run.total;
    sim::PolicyOptions po;
    po.seed = static_cast<std::uint64_t>(whole_number("--seed", f.seed, 0));
    po.gpus_per_node = run.per_node;
    po.total_gpus = total;
    po.speedup = *speedup;
    po.queues = queues;
    for (const auto& name : policies) {
      auto p = sim::make_timeline_policy(name, po);
      if (!p) {
        base::fail_input(
            fmt::format("--policy: unknown policy '{}' (fifo, sjf, tiresias, optimus, "
                        "pollux, lasgo, default, all)",
                        name));
      }
      if (p->needs_profiles() && philly) {
        base::fail_input(
            fmt::format("{}: policy {} needs application profiles (a Pollux-format "
                        "workload); Philly rows are rigid jobs",
                        f.workload, name));
      }
      if (p->rigid()) {
        for (const auto& j : jobs) {
          if (j.replicas > total) {
            base::fail_input(j.file, j.line,
                             fmt::format("job {} asks for {} GPUs, the cluster has {}: infeasible",
                                         j.name, j.replicas, total));
          }
        }
      }
      run.made.push_back(std::move(p));
    }
    runs.push_back(std::move(run));
  }

  Progress progress("sim timeline");
  std::vector<sim::TimelineResult> results;
  std::vector<double> elapsed;
  std::vector<std::size_t> node_counts;
  const std::size_t all = runs.size() * policies.size();
  for (std::size_t c = 0; c < runs.size(); ++c) {
    for (std::size_t i = 0; i < policies.size(); ++i) {
      const std::size_t k = c * policies.size() + i;
      sim::TimelineOptions o;
      o.interval = interval;
      o.record_events = !f.events.empty();
      o.on_progress = [&](std::size_t done, std::size_t n) {
        progress.update(k * n + done, all * n);
      };
      const auto t0 = std::chrono::steady_clock::now();
      results.push_back(
          sim::run_timeline(jobs, apps, clusters[c], *runs[c].made[i], policies[i], o));
      elapsed.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      node_counts.push_back(clusters[c].size());
    }
  }
  progress.finish();

  // Everything rendered first, then the report (gnuplot: the likeliest to fail), then the files.
  std::string csv;
  if (!f.csv.empty()) {
    csv = "policy,name,submit_s,start_s,completion_s,jct_s,restarts,gpu_hours\n";
    for (const auto& r : results) {
      for (const auto& o : r.jobs) {
        csv += fmt::format("{},{},{},{},{},{},{},{:.4f}\n", base::csv_field(r.policy),
                           base::csv_field(o.name), o.submit, o.start, o.completion,
                           o.completion >= 0 ? o.completion - o.submit : -1, o.restarts,
                           o.gpu_seconds / 3600.0);
      }
    }
  }
  std::string events;  // one JSON object per line: policy, t, event, job, queue, replicas, gpus
  if (!f.events.empty()) {
    for (const auto& r : results) {
      for (const auto& e : r.events) {
        const sim::JobOutcome& o = r.jobs[e.job];
        nlohmann::ordered_json x;
        x["policy"] = r.policy;
        x["t"] = e.time;
        x["event"] = sim::event_key(e.kind);
        x["job"] = o.name;
        x["queue"] = o.queue;
        x["replicas"] = e.replicas;
        x["gpus"] = e.gpus;
        // The annotation its pod would carry, as gpuorch launch writes it.
        if (e.kind == sim::TimelineEvent::Kind::kReport) {
          x["annotation"] = workload::to_annotation(e.report);
        }
        events += x.dump() + "\n";
      }
    }
  }
  if (!f.report.empty()) {
    // Each leaf queue's GPU quota, drawn under its GPUs held over time.
    report::QueueQuotas quotas;
    for (const auto& q : queues) {
      const bool leaf =
          std::none_of(queues.begin(), queues.end(),
                       [&](const workload::QueueSpec& c) { return c.parent == q.name; });
      if (leaf && q.gpu.quota > 0) quotas[q.name] = double(q.gpu.quota) / 1000.0;
    }
    const report::TimelineMeta meta{f.workload, jobs.size(), interval, std::move(quotas)};
    report::write_timeline_html(
        f.report, meta, report_header(f.seed + " (no timeline policy draws random numbers today)"),
        results);
  }
  if (!f.csv.empty()) base::write_file_atomically(f.csv, csv);
  if (!f.events.empty()) base::write_file_atomically(f.events, events);
  if (f.json) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      fmt::print(
          "{}\n",
          to_json(results[i], sim::summarize(results[i]), node_counts[i], elapsed[i]).dump());
    }
    return 0;
  }
  fmt::print("sim timeline: {} ({} jobs), interval {} s\n", f.workload, jobs.size(), interval);
  fmt::print("{:>6} {:<10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10} {:>7} {:>8} {:>8}\n", "GPUs",
             "policy", "avg JCT h", "median h", "p99 h", "queue h", "makespan h", "GPU-h", "util",
             "goodput", "time s");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto s = sim::summarize(results[i]);
    fmt::print(
        "{:>6} {:<10} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.2f} {:>10.1f} {:>6.1f}% "
        "{:>7.1f}% {:>8.3f}\n",
        results[i].total_gpus, results[i].policy, s.avg_jct_s / 3600, s.median_jct_s / 3600,
        s.p99_jct_s / 3600, s.avg_queue_s / 3600, s.makespan_s / 3600, s.gpu_hours,
        100 * s.utilisation, 100 * s.goodput_utilisation, elapsed[i]);
  }
  const bool tenants =
      std::any_of(results.begin(), results.end(),
                  [](const sim::TimelineResult& r) { return r.queues.size() > 1; });
  if (f.per_queue || tenants) print_queue_table(results);
  if (!f.report.empty()) fmt::print("\nreport: {}/index.html\n", f.report);
  return 0;
}

}  // namespace

void add_sim_timeline(CLI::App& sim, Action& action) {
  auto f = std::make_shared<TimelineFlags>();
  CLI::App* c = sim.add_subcommand(
      "timeline",
      "Time-based simulation of training jobs: arrivals, queueing, elastic gangs, completion");
  c->footer(
      "Policies: fifo, sjf (oracle), tiresias, optimus (Optimus+Oracle), pollux, lasgo\n"
      "(gpuorch's own; `default`), "
      "lasgo:las=off|packing=off|batch=off|restart=off|move=off|scale=H\n"
      "(ablations), lasgo:order=none+start=aged (a job not bounded by earlier jobs of its\n"
      "application; a waiting job's start discounted by its age; parts join with '+',\n"
      "docs/sim-timeline.md lists them all), all.\n"
      "Workloads: the Pollux artifact's CSV (name,time,application,num_replicas,batch_size and\n"
      "optional queue,priority) with apps/<app>/ profiles, or the Philly trace (rigid jobs:\n"
      "fifo, sjf, tiresias).");
  c->add_option("--workload", f->workload, "Workload CSV (Pollux format or philly.csv)")
      ->required();
  c->add_option("--apps", f->apps,
                "Application profiles folder (default: apps/ next to the workload, or above it)");
  c->add_option("--policy", f->policy, "Policies, comma-separated, or all")->capture_default_str();
  c->add_option("--speedup-model", f->speedup_model,
                "What pollux and lasgo know of each job's speedup: fitted (a model fitted to the "
                "configurations the job has run, as the Pollux artifact does) or oracle (the "
                "measured profiles); optimus always reads the profiles (Optimus+Oracle)")
      ->capture_default_str();
  c->add_option("--nodes", f->nodes, "Node count, or a node list (openb CSV, YAML inventory)")
      ->capture_default_str();
  c->add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node with --nodes N")
      ->capture_default_str();
  c->add_option("--seed", f->seed, "Seed of every random choice")->capture_default_str();
  c->add_option("--interval", f->interval, "Scheduling interval in seconds")->capture_default_str();
  c->add_option("--limit", f->limit, "Only the first N jobs (0: all)")->capture_default_str();
  c->add_option("--csv", f->csv, "Write per-job results (all policies) to this CSV file");
  c->add_option("--gpus", f->gpus,
                "What-if: clusters of A..B GPUs in steps (A:B:step, --gpus-per-node each)");
  c->add_option("--events", f->events,
                "Write every job's arrivals, starts, resizes, preemptions and finishes (all "
                "policies) to this JSON-lines file: policy, t (the tick), event, job, queue, "
                "replicas and gpus after it");
  c->add_option("--report", f->report, "Also write an HTML report with plots to this folder");
  c->add_option("--queues", f->queues,
                "KAI Queue YAML (quota, limit, overQuotaWeight, priority per queue): jobs go to "
                "the queue their trace names (Philly's cluster column) and share the cluster "
                "by quota, weight and reclaim (every policy)");
  c->add_flag("--json", f->json,
              "One JSON object per policy and line, with per_job and per-queue results (queues)");
  c->add_flag("--per-queue", f->per_queue,
              "Print the per-queue table even for one queue (always printed for several)");
  c->callback([f, &action] { action = [f] { return run(*f); }; });
}

}  // namespace gpuorch::cli
