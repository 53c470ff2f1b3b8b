#pragma once
// `sim fill`: the FGD study's experiment. Pods arrive one at a time in a seeded, tuned order; each
// is placed by the scheduler core or fails (never retried); nothing departs. After every pod the
// allocation and the fragmentation are sampled.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/sched/consolidation.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sim/curves.hpp"
#include "gpuorch/workload/pod_spec.hpp"
#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sim {

struct FillInput {
  std::string label;  // what to call the workload in reports ("openb_pod_list_default")
  std::vector<cluster::NodeSpec> nodes;
  std::vector<workload::PodSpec> pods;  // sorted by name (the study's canonical order)
  workload::TargetWorkload target;      // typical pods of `pods` (FGD's target workload)
  workload::TargetWorkload history;     // every shape of `pods` with its count
};

// Sorts the pods by name and derives the target workload from them.
FillInput make_fill_input(std::string label, std::vector<cluster::NodeSpec> nodes,
                          std::vector<workload::PodSpec> pods);

struct FillOptions {
  double tune = 1.3;
  // Off (max_moves 0) is the study's protocol: a pod that fits no node fails. On, such a pod may
  // move up to max_moves bound pods to other nodes to make room (sched/consolidation.hpp).
  sched::ConsolidationOptions consolidation;
  // Ties between equal scores: the study's per-seed random node ranking (drawn after the
  // arrivals), or a seeded ranking by node name (sched/tie_break.hpp), which the Kubernetes
  // scheduler uses with the same --seed.
  enum class TieBreak : std::uint8_t { kStudy, kNodeNames };
  TieBreak tie_break = TieBreak::kStudy;
  // Keep every arrival's decision in FillRun::placements (sim fill --placements).
  bool record_placements = false;
};

// One arrival's decision: where the scheduler core put the pod, for a pod-by-pod comparison with
// another driver of the same core (the Kubernetes scheduler's replay).
struct FillPlacement {
  std::uint32_t pod = 0;   // index into FillInput::pods
  std::int64_t node = -1;  // -1: the pod failed
  std::vector<int> gpus;
};

struct FillRun {
  std::string policy;
  std::uint64_t seed = 0;
  FillCurves curves;
  std::size_t arrived_pods = 0;
  std::size_t failed_pods = 0;
  std::size_t infeasible_pods = 0;  // failed pods that fit no node even when it is empty
  // Failed pods and their GPU demand by kind: -1 CPU-only, 0 a share of one GPU, k >= 1 k whole
  // GPUs (cluster::GpuPodKind). Says whose demand the lost allocation was.
  struct KindTally {
    std::size_t pods = 0;
    std::int64_t gpu_milli = 0;
  };
  std::map<int, KindTally> failed_by_kind;
  // Single-GPU pods (shares and whole) that failed although some GPU had room for them: CPU,
  // memory or the GPU model stopped them, not GPU space. Of those, the ones that failed while a GPU
  // was entirely free (what scripts/fill-ceiling's no-refusal model assumes never happens).
  std::size_t failed_with_gpu_room = 0;
  std::size_t failed_with_free_gpu = 0;
  // With consolidation: pods placed only because others moved, and the moves (restarts) it took.
  std::size_t rescued_pods = 0;
  std::size_t moved_pods = 0;
  // Failed pods by the reason that rejected the most nodes.
  sched::FilterCounts failed_by_reason{};
  std::int64_t arrived_gpu_milli = 0;
  std::int64_t used_gpu_milli = 0;
  std::int64_t gpu_milli_capacity = 0;
  // Where the idle GPU is at the end, by how much each GPU has free: [0] 1-99 milli, [1] 100-199,
  // ..., [9] 900-999, [10] whole free GPUs. Low allocation explained: small gaps no pod fits.
  std::array<std::int64_t, 11> idle_gpu_milli_by_free{};
  double elapsed_s = 0;
  std::vector<FillPlacement> placements;  // in arrival order, when FillOptions asks for them
};

FillRun run_fill(const FillInput& input, const std::string& policy, std::uint64_t seed,
                 const FillOptions& options);

// The arrival order run_fill uses for `seed`: indices into input.pods (a clone repeats the index
// of the pod it copies). Every policy sees the same sequence for the same seed and tune.
std::vector<std::uint32_t> fill_arrivals(const FillInput& input, double tune, std::uint64_t seed);

// Every policy x seed, in parallel on `threads` workers (0 = all cores). Results come back in
// policy-major, seed-minor order. `on_done(done, total)` is called after each run, serialised.
std::vector<FillRun> run_fill_grid(const FillInput& input, const std::vector<std::string>& policies,
                                   const std::vector<std::uint64_t>& seeds,
                                   const FillOptions& options, unsigned threads,
                                   const std::function<void(std::size_t, std::size_t)>& on_done);

}  // namespace gpuorch::sim
