#include "gpuorch/sim/scale.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/sim/openb_like.hpp"
#include "gpuorch/sim/synthetic_cluster.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sim {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// User + system CPU seconds of this process so far.
double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The q-quantile (nearest rank) of the decision times, in microseconds.
double quantile_us(std::vector<std::int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1) + 0.5);
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
  return static_cast<double>(ns[k]) / 1000.0;
}

void validate(const ScaleOptions& o) {
  if (o.nodes == 0 || o.nodes > kMaxScaleNodes) {
    base::fail_input(fmt::format("--nodes must be between 1 and {}", kMaxScaleNodes));
  }
  if (o.pods == 0 || o.pods > kMaxScalePods) {
    base::fail_input(fmt::format("--pods must be between 1 and {}", kMaxScalePods));
  }
}

}  // namespace

ScaleResult run_scale(const ScaleOptions& options) {
  validate(options);
  const auto start = Clock::now();
  ScaleResult r;
  r.nodes = options.nodes;
  r.pods = options.pods;
  r.policy = options.policy;
  r.seed = options.seed;
  r.full_scan = options.full_scan;

  cluster::Cluster cluster(synthetic_cluster(options.nodes, options.seed));
  r.gpus = cluster.gpu_total();
  const std::vector<workload::PodSpec> pods = openb_like_pods(options.seed, options.pods);
  // FGD's target workload (the typical pods) and the history other policies estimate from
  // (every shape with its count), derived from the workload as `sim fill` does.
  const workload::TargetWorkload target = workload::typical_pods(pods);
  const workload::TargetWorkload history = workload::typical_pods(pods, 1.0);

  // As in `sim fill`: one random stream per seed and a random node ranking for ties.
  base::Rng rng(options.seed);
  std::vector<std::uint32_t> rank(cluster.node_count());
  std::iota(rank.begin(), rank.end(), 0U);
  rng.shuffle(std::span<std::uint32_t>(rank));
  const sched::FragmentationMeasure measure(target, cluster);
  const sched::PolicyContext context{&cluster, &measure, &rng, &history};
  // make_policy knows every name and alias ("default") and rejects the others with one line.
  const auto policy = sched::make_policy(options.policy, context);
  sched::SchedulerOptions scheduler_options;
  scheduler_options.incremental = !options.full_scan;
  sched::Scheduler scheduler(cluster, *policy, scheduler_options);
  scheduler.set_tie_break_rank(std::move(rank));
  sched::RequestResolver resolver(cluster);
  std::vector<sched::PodRequest> requests;
  requests.reserve(pods.size());
  for (const auto& p : pods) requests.push_back(resolver.resolve(p));
  r.setup_s = seconds_since(start);

  std::vector<std::int64_t> decision_ns(requests.size());
  std::uint64_t digest = 0xcbf29ce484222325ULL;  // FNV-1a over (node, GPUs) of every decision
  auto hash = [&digest](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      digest ^= (v >> (8 * b)) & 0xffU;
      digest *= 0x100000001b3ULL;
    }
  };
  const auto placing = Clock::now();
  const double cpu_before = cpu_seconds();
  const std::size_t progress_every = std::max<std::size_t>(1, requests.size() / 200);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (options.on_progress && i % progress_every == 0) options.on_progress(i, requests.size());
    const auto t0 = Clock::now();
    const sched::Decision d = scheduler.schedule(requests[i]);
    const auto t1 = Clock::now();
    decision_ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (d.outcome == sched::Outcome::kPlaced) {
      ++r.placed;
      hash(d.placement.node);
      for (const int g : d.placement.gpus) hash(static_cast<std::uint64_t>(g));
    } else {
      ++r.failed;
      hash(~std::uint64_t{0});
    }
  }
  r.placing_s = seconds_since(placing);
  if (options.on_progress) options.on_progress(requests.size(), requests.size());
  r.placing_cpu_s = cpu_seconds() - cpu_before;

  r.gpu_alloc_pct = 100.0 * static_cast<double>(cluster.gpu_milli_used()) /
                    static_cast<double>(std::max<std::int64_t>(1, cluster.gpu_milli_capacity()));
  r.placements_per_s = r.placing_s > 0 ? static_cast<double>(r.placed) / r.placing_s : 0;
  r.placements_per_cpu_s =
      r.placing_cpu_s > 0 ? static_cast<double>(r.placed) / r.placing_cpu_s : 0;
  const std::int64_t total_ns =
      std::accumulate(decision_ns.begin(), decision_ns.end(), std::int64_t{0});
  r.mean_decision_us =
      static_cast<double>(total_ns) / 1000.0 / static_cast<double>(decision_ns.size());
  r.max_decision_us =
      static_cast<double>(*std::max_element(decision_ns.begin(), decision_ns.end())) / 1000.0;
  r.p50_decision_us = quantile_us(decision_ns, 0.50);
  r.p99_decision_us = quantile_us(decision_ns, 0.99);
  r.placement_digest = fmt::format("{:016x}", digest);
  r.elapsed_s = seconds_since(start);
  return r;
}

}  // namespace gpuorch::sim
