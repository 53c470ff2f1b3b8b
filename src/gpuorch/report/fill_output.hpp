#pragma once
// Text, JSON and CSV renderings of fill runs.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/sim/fill.hpp"

namespace gpuorch::report {

struct FillMeta {
  std::string workload;  // label of the pod list
  std::string nodes;     // where the nodes came from
  std::string pods;      // where the pods came from
  bool synthetic = false;
  double tune = 1.3;
  std::size_t node_count = 0;
  int gpu_count = 0;
  std::size_t trace_pods = 0;
  int consolidate = 0;  // max pods moved per pending pod (0: the study's protocol, no moves)
};

// {"workload":..., "runs":[{"policy","seed","alloc"[131],"frag_amount"[131],"frag_ratio"[131],
//   "arrived_pods","failed_pods","elapsed_s", "failures":{reason:count}, "rescued_pods",
//   "moved_pods", ...}]}
nlohmann::json fill_json(const FillMeta& meta, const std::vector<sim::FillRun>& runs);
// Mean allocation at x = 90..130, fragmentation and failures per policy.
std::string fill_table(const FillMeta& meta, const std::vector<sim::FillRun>& runs);
// Long format: policy,seed,x,alloc,frag_amount,frag_ratio (empty where a point has no data).
std::string fill_csv(const std::vector<sim::FillRun>& runs);
// Every decision: seed,policy,pod,node,gpus (node empty for a failed pod, GPUs joined by ';'),
// rows in arrival order per run, so row k of a (seed, policy) is the k-th arrival of
// `sim arrivals` for that seed.
std::string fill_placements_csv(const sim::FillInput& input, const std::vector<sim::FillRun>& runs);

}  // namespace gpuorch::report
