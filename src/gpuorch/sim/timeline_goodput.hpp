#pragma once
// Where the elastic policies (Pollux, lasgo) get each job's speedups: the oracle, read from the
// measured profiles, or the model fitted online to what the job has run (`--speedup-model`,
// docs/sim-timeline.md). Both are SpeedupModels (sched/jobs/speedup_model.hpp).
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "gpuorch/sched/jobs/fitted_speedup.hpp"
#include "gpuorch/sched/jobs/speedup_model.hpp"
#include "gpuorch/sim/timeline_job.hpp"

namespace gpuorch::sim {

// The job layer's speedup models (sched/jobs/), as the simulator's policies use them.
using sched::jobs::BatchRange;
using sched::jobs::FittedSpeedup;
using sched::jobs::GradientStats;
using sched::jobs::packed_nodes;
using sched::jobs::speedup;
using sched::jobs::SpeedupModel;
using sched::jobs::SpeedupSource;
using sched::jobs::ThroughputFit;
using sched::jobs::ThroughputSample;

// Goodput of a job at a GPU count, from the measured profiles (the oracle form of Pollux's
// model, timeline-protocol.md §8): the best progress rate over the batch sizes the job may use
// (its fixed batch for rigid-batch jobs and ncf), on the placement of that many GPUs on `nodes`
// nodes, as packed as the node count allows. Memoised per (application, epoch, GPUs, nodes,
// batch), since gradient statistics change per epoch.
class GoodputTable {
 public:
  explicit GoodputTable(int gpus_per_node) : per_node_(gpus_per_node) {}
  // Progress per second of `job` with `gpus` GPUs (0 for none); `adaptive`: best batch.
  double rate(const Job& job, int gpus, int nodes, bool adaptive);

 private:
  int per_node_;
  std::map<std::tuple<const AppProfile*, int, int, int, int>, double> cache_;
};

// How a policy's fitted models learn from the jobs' reports (JobSpeedups).
struct FitOptions {
  // Fitted models keep the measured speed where a configuration has run (ThroughputFit).
  bool measured = false;
  // The fitted throughput part is shared by the jobs of one application (what one job measured,
  // the next starts from); the gradient statistics stay per job.
  bool pooled = false;
  bool carry = false;  // ThroughputFit's
  // With `measured`: each job keeps its own fit, and where it has not run takes the step times
  // other jobs of its application measured there (ThroughputFit::share_steps).
  bool shared_steps = false;
  // Each job keeps its own fit, but the exchange terms it has not seen (across nodes, inside one)
  // come from one fit to every job of its application (ThroughputFit::share_network).
  bool shared_network = false;
  // A job that has not reported yet starts from a copy of the fit of the last job of its
  // application that reported, with the gradient statistics the first job of it reported when it
  // started (a new job starts from the same point): known before it runs.
  bool inherit = false;
};

// One speedup model per job, as a policy sees them.
class JobSpeedups {
 public:
  JobSpeedups(SpeedupSource source, int gpus_per_node, FitOptions fit = {})
      : source_(source), fit_(fit), table_(gpus_per_node) {}
  // `job`'s model (`adaptive`: the job tunes its batch). A fitted model is first told what the
  // job reports about the interval it has just run on its current placement: that
  // configuration's step and sync time, and its gradient statistics at the batch it ran.
  SpeedupModel& of(const Job& job, bool adaptive);
  [[nodiscard]] SpeedupSource source() const { return source_; }

 private:
  SpeedupSource source_;
  FitOptions fit_;
  GoodputTable table_;
  std::map<const Job*, std::unique_ptr<SpeedupModel>> models_;
  std::map<std::string, std::shared_ptr<ThroughputFit>> pools_;               // by application
  std::map<std::string, std::shared_ptr<sched::jobs::MeasuredSteps>> steps_;  // by application
  std::map<const Job*, std::shared_ptr<ThroughputFit>> fits_;                 // each job's own fit
  std::map<std::string, std::shared_ptr<ThroughputFit>> latest_;  // by application (`inherit`)
  std::map<std::string, GradientStats> first_stats_;              // by application (`inherit`)
};

}  // namespace gpuorch::sim
