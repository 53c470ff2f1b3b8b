// One `sim fill` experiment (the FGD study's default openb trace, one policy, seed 42, tune 1.3)
// per policy, on one thread, timed as wall time. The target: <= 1 s per experiment.
//
//   build/<preset>/bench/bench_fill --benchmark_repetitions=5
//
// Reads ../shared/openb (GPUORCH_SHARED_DIR); every benchmark reports an error and is skipped
// when the folder is absent.
#include <benchmark/benchmark.h>

#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "gpuorch/io/openb.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sim/fill.hpp"

namespace {

namespace fs = std::filesystem;
using gpuorch::sim::FillInput;

constexpr std::uint64_t kSeed = 42;

struct Loaded {
  std::unique_ptr<FillInput> input;
  std::string error;
};

// The trace is loaded once, outside any timed region.
const Loaded& default_trace() {
  static const Loaded loaded = [] {
    Loaded l;
    const fs::path dir = fs::path(GPUORCH_SHARED_DIR) / "openb";
    const fs::path nodes = dir / "openb_node_list_gpu_node.csv";
    const fs::path pods = dir / "openb_pod_list_default.csv";
    if (!fs::exists(nodes) || !fs::exists(pods)) {
      l.error = "../shared/openb is absent (" + dir.string() +
                "): the FGD study's data is not in this checkout";
      return l;
    }
    try {
      l.input = std::make_unique<FillInput>(gpuorch::sim::make_fill_input(
          "openb_pod_list_default", gpuorch::io::load_openb_nodes(nodes.string()),
          gpuorch::io::load_openb_pods(pods.string()).pods));
    } catch (const std::exception& e) {
      l.error = e.what();
    }
    return l;
  }();
  return loaded;
}

void BM_Fill(benchmark::State& state, const std::string& policy) {
  const Loaded& trace = default_trace();
  if (!trace.input) {
    state.SkipWithError(trace.error.c_str());
    return;
  }
  const gpuorch::sim::FillOptions options;  // tune 1.3, as in the study
  std::size_t pods = 0;
  std::size_t failed = 0;
  double alloc130 = 0;
  for (auto _ : state) {
    const gpuorch::sim::FillRun run = gpuorch::sim::run_fill(*trace.input, policy, kSeed, options);
    benchmark::DoNotOptimize(run.used_gpu_milli);
    pods = run.arrived_pods;
    failed = run.failed_pods;
    alloc130 = run.curves.alloc[130].value_or(0);
  }
  state.counters["pods"] = static_cast<double>(pods);
  state.counters["failed"] = static_cast<double>(failed);
  state.counters["alloc130"] = alloc130;
  state.counters["pods_per_s"] =
      benchmark::Counter(static_cast<double>(pods) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// One benchmark per policy of the study, in its order (01-Random ... 06-FGD).
const bool registered = [] {
  for (const std::string& policy : gpuorch::sched::policy_names()) {
    if (gpuorch::sched::study_label(policy).empty()) continue;  // not one of the study's six
    benchmark::RegisterBenchmark(("BM_Fill/" + policy).c_str(), BM_Fill, policy)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
