#pragma once
// Goodput of a job at a GPU count, from the measured profiles (the oracle form of Pollux's
// model, timeline-protocol.md §8): the best progress rate over the batch sizes the job may use
// (its fixed batch for rigid-batch jobs and ncf), on the packed placement of that many GPUs.
// Memoised per (application, epoch, GPUs, batch), since gradient statistics change per epoch.
#include <map>
#include <tuple>

#include "gpuorch/sim/timeline_job.hpp"

namespace gpuorch::sim {

class GoodputTable {
 public:
  explicit GoodputTable(int gpus_per_node) : per_node_(gpus_per_node) {}
  // Progress per second of `job` with `gpus` GPUs (0 for none); `adaptive`: best batch.
  double rate(const Job& job, int gpus, bool adaptive);

 private:
  int per_node_;
  std::map<std::tuple<const AppProfile*, int, int, int>, double> cache_;
};

// The speedup search shared by Pollux and lasgo: given per job the value of each GPU count
// (value[j][r], r = 0 .. its maximum), the counts that greedily maximise the summed value within
// `total` GPUs: each step takes the job and larger count with the best value gain per added GPU.
std::vector<int> greedy_counts(const std::vector<std::vector<double>>& value, int total);

}  // namespace gpuorch::sim
