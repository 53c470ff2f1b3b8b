#pragma once
// One training application as the Pollux artifact measured it (apps/<app>/): system throughput
// per placement and per-GPU batch (placements.csv, scalability.csv) and the statistical progress
// of real runs at each total batch size (validation-<B>.csv). Lookups follow
// ../shared/reference/timeline-protocol.md §3-§5: rotation-normalised placements interpolated
// linearly in the per-GPU batch, larger jobs interpolated in 3-D over (nodes, replicas, batch).
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/sim/timeline_delaunay.hpp"

namespace gpuorch::sim {

struct StepTime {
  double step = 0;  // one optimizer step without accumulation, synchronisation included (s)
  double sync = 0;  // the synchronisation part of it (s)
};

struct GradStats {
  double sqr = 0;  // squared norm of the expected gradient
  double var = 0;  // gradient variance, expressed at the initial batch size
};

struct ValidationRow {
  double progress = 0;   // cumulative progress at the epoch's end, in steps at the initial batch
  double iteration = 0;  // cumulative optimizer steps at this table's batch size
  GradStats grad;
};

class AppProfile {
 public:
  // Reads apps/<name>/ under `dir`; bad or missing files are InputError "file:line: what".
  static AppProfile load(const std::string& dir, const std::string& name);

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] int init_batch() const { return init_batch_; }
  [[nodiscard]] int max_batch() const { return max_batch_; }
  [[nodiscard]] int min_local() const { return min_local_; }
  [[nodiscard]] int max_local() const { return max_local_; }
  [[nodiscard]] int max_epochs() const { return max_epochs_; }
  [[nodiscard]] int completion_epoch() const { return max_epochs_ - 1; }

  // Step and sync time with `local` samples per GPU on a placement given as GPUs per node, in
  // allocation order. Outside the measured range the nearest measured batch is used (the artifact
  // aborts there; only adaptive batch choices can reach it).
  [[nodiscard]] StepTime throughput(std::span<const int> gpus_per_node, int local) const;
  [[nodiscard]] GradStats grad_stats(double batch, int epoch) const;
  [[nodiscard]] double iteration(double batch, int epoch) const;
  // Progress needed to have finished `epoch` epochs.
  [[nodiscard]] double progress_threshold(int epoch) const;

 private:
  struct Sample {
    int local = 0;
    StepTime time;
  };
  template <typename F>
  double interpolate_batch(double batch, int epoch, F field) const;

  std::string name_;
  int init_batch_ = 0, max_batch_ = 0, min_local_ = 0, max_local_ = 0, max_epochs_ = 0;
  std::map<long long, std::vector<Sample>> placements_;  // by normalised placement id
  std::shared_ptr<const Delaunay3> large_;               // nodes, replicas, local -> step, sync
  std::map<int, std::vector<ValidationRow>> validation_;
  std::vector<double> thresholds_;  // by epoch
  mutable std::map<std::array<int, 3>, StepTime> large_cache_;  // queries repeat every tick
};

// The applications a workload names, loaded once from `dir`.
using AppTable = std::map<std::string, AppProfile>;

// The placement id the profiles use: zeros dropped, the lexicographically smallest rotation,
// digits concatenated. 0 for an empty placement.
long long placement_id(std::span<const int> gpus_per_node);

}  // namespace gpuorch::sim
