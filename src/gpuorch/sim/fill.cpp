#include "gpuorch/sim/fill.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/framework/post_filter_registry.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/post_filters/consolidation.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/sched/tie_break.hpp"
#include "gpuorch/sim/arrivals.hpp"

namespace gpuorch::sim {

FillInput make_fill_input(std::string label, std::vector<cluster::NodeSpec> nodes,
                          std::vector<workload::PodSpec> pods) {
  std::stable_sort(pods.begin(), pods.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  FillInput input;
  input.label = std::move(label);
  input.nodes = std::move(nodes);
  input.target = workload::typical_pods(pods);
  input.history = workload::typical_pods(pods, 1.0);
  input.pods = std::move(pods);
  return input;
}

namespace {

// A failed single-GPU pod that some GPU had room for (a scan of the nodes: only failures pay it).
void count_gpu_room(const cluster::Cluster& cluster, const sched::PodRequest& pod, FillRun& run) {
  if (cluster.fully_free_gpus_total() > 0) {
    ++run.failed_with_gpu_room;
    ++run.failed_with_free_gpu;
    return;
  }
  for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
    if (cluster.max_gpu_milli_left(n) >= pod.gpu_milli) {
      ++run.failed_with_gpu_room;
      return;
    }
  }
}

}  // namespace

std::vector<std::uint32_t> fill_arrivals(const FillInput& input, double tune, std::uint64_t seed) {
  // As run_fill: the seed's generator draws the arrivals first.
  base::Rng rng(seed);
  return tuned_arrivals(input.pods, tune, cluster::Cluster(input.nodes).gpu_milli_capacity(), rng);
}

FillRun run_fill(const FillInput& input, const std::string& policy_name, std::uint64_t seed,
                 const FillOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  cluster::Cluster cluster(input.nodes);
  base::Rng rng(seed);  // arrivals first, then the node ranking (fill_arrivals relies on it)
  const std::vector<std::uint32_t> arrivals =
      tuned_arrivals(input.pods, options.tune, cluster.gpu_milli_capacity(), rng);

  // Each seed fixes a random ranking of the nodes; every tie between equal scores goes to the
  // best-ranked node (what the study's simulator does, verified against its per-seed results).
  std::vector<std::uint32_t> rank(cluster.node_count());
  std::iota(rank.begin(), rank.end(), 0U);
  rng.shuffle(std::span<std::uint32_t>(rank));
  if (options.tie_break == FillOptions::TieBreak::kNodeNames) {
    rank = sched::name_ranking(seed, cluster.specs());
  }

  const sched::FragmentationMeasure measure(input.target, cluster);
  sched::FragmentationTracker tracker(measure, cluster);
  const sched::PolicyContext context{&cluster, &measure, &rng, &input.history};
  const auto policy = sched::make_policy(policy_name, context);
  sched::Scheduler scheduler(cluster, *policy);
  scheduler.set_tie_break_rank(std::move(rank));
  sched::RequestResolver resolver(cluster);

  // Pods of the trace resolved once; clones share their original's request.
  std::vector<sched::PodRequest> requests;
  requests.reserve(input.pods.size());
  for (const auto& p : input.pods) requests.push_back(resolver.resolve(p));

  FillRun run;
  run.policy = policy_name;
  run.seed = seed;
  run.gpu_milli_capacity = cluster.gpu_milli_capacity();
  std::vector<FillSample> samples;
  samples.reserve(arrivals.size());
  // A pod that fits nowhere goes to the post-filters: consolidation, when asked for.
  std::optional<sched::Consolidator> consolidator;
  sched::PostFilterRegistry post_filters;
  if (options.consolidation.max_moves > 0) {
    consolidator.emplace(cluster, scheduler, options.consolidation);
    post_filters.add(std::make_unique<sched::ConsolidationPostFilter>(*consolidator));
  }
  for (std::uint32_t k = 0; k < arrivals.size(); ++k) {
    const std::uint32_t i = arrivals[k];
    const sched::PodRequest& pod = requests[i];
    run.arrived_gpu_milli += input.pods[i].total_gpu_milli();
    const sched::Decision d = scheduler.schedule(pod);
    sched::PostFilterResult rescue;
    if (d.outcome == sched::Outcome::kPlaced) {
      tracker.refresh(cluster, d.placement.node);
      if (consolidator) consolidator->bound(k, pod, d.placement);
    } else if (!post_filters.empty() &&
               (rescue = post_filters.run({.id = k, .request = pod, .failure = d})).success()) {
      ++run.rescued_pods;
      run.moved_pods += rescue.victims.size();
      tracker.refresh(cluster, rescue.placements.front().node);
      for (const auto& v : rescue.victims) tracker.refresh(cluster, v.moved_to->node);
    } else {
      ++run.failed_pods;
      run.infeasible_pods += d.outcome == sched::Outcome::kInfeasible ? 1 : 0;
      ++run.failed_by_reason[static_cast<std::size_t>(d.main_reason())];
      if (pod.gpu_count == 1) count_gpu_room(cluster, pod, run);
      auto& kind =
          run.failed_by_kind[pod.cpu_only() ? -1
                                            : cluster::gpu_pod_kind(pod.gpu_milli, pod.gpu_count)];
      ++kind.pods;
      kind.gpu_milli += input.pods[i].total_gpu_milli();
    }
    if (options.record_placements) {
      FillPlacement& r = run.placements.emplace_back();
      r.pod = i;
      if (d.outcome == sched::Outcome::kPlaced) {
        r.node = d.placement.node;
        r.gpus = d.placement.gpus;
      } else if (!rescue.placements.empty()) {
        r.node = rescue.placements.front().node;
        r.gpus = rescue.placements.front().gpus;
      }
    }
    FillSample s;
    s.arrived_gpu_milli = run.arrived_gpu_milli;
    s.used_gpu_milli = cluster.gpu_milli_used();
    s.frag_milli = tracker.cluster_amount();
    const auto idle = static_cast<double>(cluster.gpu_milli_capacity() - s.used_gpu_milli);
    s.frag_ratio = idle > 0 ? 100.0 * s.frag_milli / idle : 0.0;
    samples.push_back(s);
  }
  run.arrived_pods = arrivals.size();
  run.used_gpu_milli = cluster.gpu_milli_used();
  for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
    for (const std::int32_t left : cluster.gpu_milli_left(n)) {
      if (left > 0)
        run.idle_gpu_milli_by_free[static_cast<std::size_t>(std::min(left / 100, 10))] += left;
    }
  }
  run.curves = build_curves(samples, cluster.gpu_milli_capacity());
  run.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

std::vector<FillRun> run_fill_grid(const FillInput& input, const std::vector<std::string>& policies,
                                   const std::vector<std::uint64_t>& seeds,
                                   const FillOptions& options, unsigned threads,
                                   const std::function<void(std::size_t, std::size_t)>& on_done) {
  const std::size_t total = policies.size() * seeds.size();
  std::vector<FillRun> runs(total);
  if (threads == 0) threads = std::max(1U, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(total, 1)));
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  std::mutex mutex;
  std::exception_ptr error;
  auto worker = [&] {
    while (true) {
      const std::size_t k = next.fetch_add(1);
      if (k >= total) return;
      try {
        runs[k] = run_fill(input, policies[k / seeds.size()], seeds[k % seeds.size()], options);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        next = total;
        return;
      }
      const std::lock_guard lock(mutex);
      ++done;
      if (on_done) on_done(done, total);
    }
  };
  std::vector<std::jthread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  pool.clear();
  if (error) std::rethrow_exception(error);
  return runs;
}

}  // namespace gpuorch::sim
