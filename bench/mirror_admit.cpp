// mirror_admit: one decision of `gpuorch scheduler --queues` (k8s::ClusterMirror::admit) for a
// pending one-GPU pod, on 5,000 nodes of 8 GPUs with N pods bound in 15 queues, preemption on and
// room free (the common case: no victims needed, ClusterMirror::admit_on_free_room). With queue
// limits, each decision sums what the bound pods hold per queue, so its cost grows with N: this
// measures by how much. The trial placement is released after each iteration, inside the timing.
//
//   build/release/bench/mirror_admit [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/sched/jobs/queue_tree.hpp"

namespace {

using namespace gpuorch;

constexpr int kNodes = 5'000;
constexpr int kGpus = 8;
constexpr int kQueues = 15;

workload::PodSpec one_gpu(const std::string& name) {
  workload::PodSpec p;
  p.name = name;
  p.gpu_count = 1;
  p.gpu_milli = 1000;
  p.cpu_milli = 4000;
  p.memory_mib = 32'000;
  return p;
}

k8s::PodObject pod(int i, const std::string& node, int gpu) {
  k8s::PodObject p;
  p.uid = fmt::format("uid-{}", i);
  p.ns = "default";
  p.name = fmt::format("pod-{}", i);
  p.scheduler_name = "gpuorch";
  p.node_name = node;
  p.queue = fmt::format("team-{}", i % kQueues);
  p.started_s = 1'000'000 + i;
  p.spec = one_gpu(p.key());
  if (gpu >= 0) p.gpus = {gpu};
  return p;
}

// range(0): bound pods; range(1): 1 when every queue has a GPU limit (its holdings are then
// checked at each decision), 0 when none has; range(2): 1 when the holdings are kept across
// decisions (AdmitOptions::queues_generation, as gpuorch scheduler runs), 0 when they are summed
// over every bound pod at each.
void BM_Admit(benchmark::State& state) {
  const int bound = static_cast<int>(state.range(0));
  const bool limited = state.range(1) != 0;
  const bool kept = state.range(2) != 0;
  std::vector<workload::QueueSpec> specs;
  for (int q = 0; q < kQueues; ++q) {
    workload::QueueSpec s;
    s.name = fmt::format("team-{}", q);
    s.gpu.quota = std::int64_t{kNodes} * kGpus * 1000 / kQueues;
    if (limited) s.gpu.limit = std::int64_t{kNodes} * kGpus * 1000;
    specs.push_back(s);
  }
  const sched::jobs::QueueTree tree(specs);
  k8s::ClusterMirror mirror(k8s::MirrorOptions{"efd", 42, {one_gpu("h")}, {}});
  std::map<std::string, cluster::NodeSpec> nodes;
  for (int n = 0; n < kNodes; ++n) {
    cluster::NodeSpec s;
    s.name = fmt::format("node-{}", n);
    s.gpu_count = kGpus;
    s.gpu_model = "H100";
    s.cpu_milli = 192'000;
    s.memory_mib = 2'000'000;
    nodes.emplace(s.name, s);
  }
  mirror.set_nodes(nodes);
  mirror.ensure_built({});
  // Bound pods fill nodes from the first, 8 to a node, so room stays on the last ones.
  for (int i = 0; i < bound; ++i) {
    mirror.account(pod(i, fmt::format("node-{}", i / kGpus), i % kGpus));
  }
  k8s::ClusterMirror::AdmitOptions options;
  options.queue_of = [&tree](const k8s::PodObject& p) { return tree.find(p.queue); };
  options.queues_generation = kept ? 1 : 0;  // the tree never changes here
  options.preempt = true;
  options.now_s = 2'000'000;
  options.preemptible = [](const k8s::PodObject&) { return true; };
  const k8s::PodObject pending = pod(bound, "", -1);
  const std::size_t leaf = *tree.find(pending.queue);
  for (auto _ : state) {
    const auto a = mirror.admit(tree, leaf, {pending}, options);
    if (!a.placement.placed || !a.victims.empty()) {
      state.SkipWithError("the pending pod was not placed on free room");
      break;
    }
    mirror.release(pending.uid);
  }
  state.counters["bound_pods"] = bound;
}

BENCHMARK(BM_Admit)
    ->ArgsProduct({{1'000, 10'000, 30'000}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
